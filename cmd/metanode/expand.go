package main

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnsetVariable is wrapped by the error for a ${VAR} in the config file
// whose variable is unset or empty: silently expanding it to "" turned
// `files: ${MEDIA_DIR}` into no watcher at all.
var ErrUnsetVariable = errors.New("unset variable")

// expandVars replaces ${VAR} and ${VAR:-default} in a config file's text
// with the environment's values, line by line so an error names the line.
// A bare $ is left as written, and so are comments (a whole-line or a
// trailing # comment), so the commented defaults may mention variables.
func expandVars(text, path string, getenv func(string) string) (string, error) {
	lines := strings.SplitAfter(text, "\n")
	for i, line := range lines {
		body, comment := splitComment(line)
		var out strings.Builder
		for {
			start := strings.Index(body, "${")
			if start < 0 {
				break
			}
			end := strings.IndexByte(body[start:], '}')
			if end < 0 {
				return "", fmt.Errorf("config file %s line %d: %q has no closing }", path, i+1, body[start:])
			}
			ref := body[start+2 : start+end]
			name, def, hasDef := strings.Cut(ref, ":-")
			if !validVarName(name) {
				return "", fmt.Errorf("config file %s line %d: ${%s}: want ${NAME} or ${NAME:-default}, NAME of letters, digits and _", path, i+1, ref)
			}
			v := getenv(name)
			if v == "" {
				if !hasDef {
					return "", fmt.Errorf("config file %s line %d: %w ${%s}: set it in the environment, or write ${%s:-default} for a default (${%s:-} for empty)",
						path, i+1, ErrUnsetVariable, name, name, name)
				}
				v = def
			}
			out.WriteString(body[:start])
			out.WriteString(v)
			body = body[start+end+1:]
		}
		out.WriteString(body)
		lines[i] = out.String() + comment
	}
	return strings.Join(lines, ""), nil
}

// splitComment splits a YAML line before its comment: a # at the start or
// after a blank, outside quotes.
func splitComment(line string) (body, comment string) {
	var quote byte
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i], line[i:]
		}
	}
	return line, ""
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
