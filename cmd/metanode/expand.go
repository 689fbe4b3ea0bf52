package main

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ErrUnsetVariable is wrapped by the error for a ${VAR} in the config file
// whose variable is unset or empty: silently expanding it to "" turned
// `files: ${MEDIA_DIR}` into no watcher at all.
var ErrUnsetVariable = errors.New("unset variable")

// expander replaces ${VAR} and ${VAR:-default} in the scalar values of a
// parsed config file with the environment's values. Working on the parsed
// values rather than the text leaves comments, quoting and escapes to YAML
// (a scanner of our own misread `bob's music  # ${OLD}`), and a value
// cannot change the document's structure. A bare $ is left as written.
type expander struct {
	path   string
	lines  []string // the file's, to name the line of a reference in a multi-line value
	until  int      // the line of the next setting's key: the value being expanded ends before it (0: at the end of the file)
	getenv func(string) string
	done   map[*yaml.Node]bool // each node once: an anchor's value is expanded where it is written or through an alias, never twice
}

func newExpander(path string, file []byte, getenv func(string) string) *expander {
	return &expander{path: path, lines: strings.Split(string(file), "\n"), getenv: getenv, done: map[*yaml.Node]bool{}}
}

// node expands the values under v.
func (e *expander) node(v *yaml.Node) error {
	if v == nil || e.done[v] {
		return nil
	}
	e.done[v] = true
	switch v.Kind {
	case yaml.ScalarNode:
		s, err := e.vars(v.Value, v.Line)
		if err != nil || s == v.Value {
			return err
		}
		v.Value = s
		if v.Style&(yaml.TaggedStyle|yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
			// A plain value's type follows what it expands to, as
			// if written so: max-conns: ${N} is a number.
			v.Tag = ""
			v.Tag = v.ShortTag()
		}
	case yaml.AliasNode:
		// The anchor may sit under a key a client command skips.
		return e.node(v.Alias)
	case yaml.MappingNode:
		for i := 1; i < len(v.Content); i += 2 { // values only: keys are setting names
			if err := e.node(v.Content[i]); err != nil {
				return err
			}
		}
	case yaml.SequenceNode, yaml.DocumentNode:
		for _, c := range v.Content {
			if err := e.node(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// vars expands the ${…} references of one value starting on line.
func (e *expander) vars(s string, line int) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var out strings.Builder
	for {
		start := strings.Index(s, "${")
		if start < 0 {
			break
		}
		end := strings.IndexByte(s[start:], '}')
		if end < 0 {
			return "", fmt.Errorf("config file %s line %d: %q has no closing }", e.path, e.lineOf(line, s[start:]), s[start:])
		}
		ref := s[start+2 : start+end]
		at := e.lineOf(line, s[start:start+end+1])
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validVarName(name) {
			return "", fmt.Errorf("config file %s line %d: ${%s}: want ${NAME} or ${NAME:-default}, NAME of letters, digits and _", e.path, at, ref)
		}
		v := e.getenv(name)
		if v == "" {
			if !hasDef {
				return "", fmt.Errorf("config file %s line %d: %w ${%s}: set it in the environment, or write ${%s:-default} for a default (${%s:-} for empty)",
					e.path, at, ErrUnsetVariable, name, name, name)
			}
			v = def
		}
		out.WriteString(s[:start])
		out.WriteString(v)
		s = s[start+end+1:]
	}
	out.WriteString(s)
	return out.String(), nil
}

// lineOf is the first line from the value's first line on that holds ref
// as written: a block scalar (|, >) or a plain value continued on the next
// lines starts on one line and names a variable on another.
func (e *expander) lineOf(line int, ref string) int {
	last := len(e.lines)
	if e.until > 0 {
		last = min(last, e.until-1)
	}
	for i := line - 1; i >= 0 && i < last; i++ {
		if strings.Contains(e.lines[i], ref) {
			return i + 1
		}
	}
	return line
}

// bracesOnly says whether a YAML syntax error goes away when every ${…}
// reference is a plain word: then the references are what broke it (in
// [ ] and { } a brace ends a plain value), and quoting them is the fix.
func bracesOnly(file []byte) bool {
	if !bytes.Contains(file, []byte("${")) {
		return false
	}
	var n yaml.Node
	return yaml.Unmarshal(varRef.ReplaceAll(file, []byte("VAR")), &n) == nil
}

var varRef = regexp.MustCompile(`\$\{[^}\n]*\}`)

func validVarName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
}
