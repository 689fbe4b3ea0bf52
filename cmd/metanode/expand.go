package main

import (
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ErrUnsetVariable is wrapped by the error for a ${VAR} in the config file
// whose variable is unset or empty: silently expanding it to "" turned
// `files: ${MEDIA_DIR}` into no watcher at all.
var ErrUnsetVariable = errors.New("unset variable")

// expandNode replaces ${VAR} and ${VAR:-default} in the scalar values under
// v (a parsed config file) with the environment's values. Working on the
// parsed values rather than the text leaves comments, quoting and escapes
// to YAML (a scanner of our own misread `bob's music  # ${OLD}`), and a
// value cannot change the document's structure. A bare $ is left as written.
func expandNode(v *yaml.Node, path string, getenv func(string) string) error {
	switch v.Kind {
	case yaml.ScalarNode:
		s, err := expandVars(v.Value, path, v.Line, getenv)
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
	case yaml.MappingNode:
		for i := 1; i < len(v.Content); i += 2 { // values only: keys are setting names
			if err := expandNode(v.Content[i], path, getenv); err != nil {
				return err
			}
		}
	case yaml.SequenceNode, yaml.DocumentNode:
		for _, c := range v.Content {
			if err := expandNode(c, path, getenv); err != nil {
				return err
			}
		}
	}
	return nil
}

// expandVars expands the ${…} references of one value starting on line.
func expandVars(s, path string, line int, getenv func(string) string) (string, error) {
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
			return "", fmt.Errorf("config file %s line %d: %q has no closing }", path, line, s[start:])
		}
		ref := s[start+2 : start+end]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validVarName(name) {
			return "", fmt.Errorf("config file %s line %d: ${%s}: want ${NAME} or ${NAME:-default}, NAME of letters, digits and _", path, line, ref)
		}
		v := getenv(name)
		if v == "" {
			if !hasDef {
				return "", fmt.Errorf("config file %s line %d: %w ${%s}: set it in the environment, or write ${%s:-default} for a default (${%s:-} for empty)",
					path, line, ErrUnsetVariable, name, name, name)
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
