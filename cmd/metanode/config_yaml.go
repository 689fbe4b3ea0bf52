package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The config file: YAML read key by key, so an error names the key and
// its line (config.go merges it with the other layers).

// decodeYAML applies a YAML document onto c, key by key, so an error names
// the key and its line. ${VAR} references in the values are expanded
// (expander).
func decodeYAML(c *Config, b []byte, path string, getenv func(string) string, layers configLayers, only string) error {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file: defaults
		}
		if bracesOnly(b) {
			return fmt.Errorf("config file %s: %w: %w (a ${VAR} inside [ ] or { } must be quoted: \"${VAR}\")", path, errYAMLSyntax, err)
		}
		return fmt.Errorf("config file %s: %w: %w", path, errYAMLSyntax, err)
	}
	if only == "" {
		// One document: a second one's settings would be dropped unread.
		var next yaml.Node
		switch err := dec.Decode(&next); {
		case errors.Is(err, io.EOF):
		case err != nil:
			return fmt.Errorf("config file %s: %w: %w", path, errYAMLSyntax, err)
		case len(next.Content) > 0 && next.Content[0].Tag != "!!null":
			return fmt.Errorf("config file %s line %d: a second YAML document (after ---): put every setting in one document", path, next.Content[0].Line)
		}
	}
	if len(doc.Content) == 0 {
		return nil
	}
	m := doc.Content[0]
	if m.Kind == yaml.ScalarNode && m.Tag == "!!null" {
		return nil
	}
	if m.Kind != yaml.MappingNode {
		if only != "" {
			return nil // no settings in it: nothing to take
		}
		return fmt.Errorf("config file %s line %d: want a mapping of settings (key: value)", path, m.Line)
	}
	exp := newExpander(path, b, getenv)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if only != "" && k.Value != only {
			continue
		}
		src := fmt.Sprintf("config file %s line %d", path, k.Line)
		s := settingNamed(k.Value)
		if s == nil {
			return &ConfigError{Field: k.Value, Value: nodeString(v), Source: src,
				Err: fmt.Errorf("%w; known keys: %s", ErrUnknownKey, strings.Join(settingNames(), ", "))}
		}
		if layers.set[s.name] {
			return &ConfigError{Field: k.Value, Value: nodeString(v), Source: src, Err: errors.New("set twice")}
		}
		exp.until = 0
		if i+2 < len(m.Content) {
			exp.until = m.Content[i+2].Line
		}
		if err := exp.node(v); err != nil {
			return err
		}
		if _, list := s.field(c).(*[]string); list {
			scalarToList(v)
		}
		if err := v.Decode(s.field(c)); err != nil {
			return &ConfigError{Field: k.Value, Value: nodeString(v), Source: src, Err: fmt.Errorf("want %s", kindOf(s.field(c)))}
		}
		layers.set[s.name] = true
		layers.src[s.name] = src
		if s.name != "files" || c.Files != "" { // files: "" asks for no watcher
			layers.fileSrc[s.name] = src
		}
	}
	if only != "" {
		return nil
	}
	// The key-by-key walk above is the strict check; decoding the keys
	// alone with KnownFields guards against a key the table forgot. The
	// values are decoded already (and a value need not survive being
	// written back: a non-UTF-8 path from the environment does not).
	keys := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i+1 < len(m.Content); i += 2 {
		keys.Content = append(keys.Content, m.Content[i], &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"})
	}
	kb, err := yaml.Marshal(keys)
	if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	var strict Config
	sd := yaml.NewDecoder(bytes.NewReader(kb))
	sd.KnownFields(true)
	if err := sd.Decode(&strict); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

// scalarToList turns a list setting written as one value into a list of
// its comma-separated parts, as the environment and flags take lists:
// "bootstrap: ${PEERS}" with PEERS=a,b, or a single address, are lists.
func scalarToList(v *yaml.Node) {
	if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
		return
	}
	var items []*yaml.Node
	for _, part := range strings.Split(v.Value, ",") {
		if part = strings.TrimSpace(part); part != "" {
			items = append(items, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: part, Line: v.Line, Column: v.Column})
		}
	}
	*v = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: items, Line: v.Line, Column: v.Column}
}

// nodeString is a YAML value as written, on one line: a list or a mapping
// in flow style, so a message shows [1, 2] rather than "".
func nodeString(v *yaml.Node) string {
	if v.Kind == yaml.ScalarNode {
		return v.Value
	}
	cp := *v
	cp.Style = yaml.FlowStyle
	b, err := yaml.Marshal(&cp)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func settingNames() []string {
	names := make([]string, len(settings))
	for i, s := range settings {
		names[i] = s.name
	}
	return names
}

func kindOf(p any) string {
	switch p.(type) {
	case *[]string:
		return "a list of strings"
	case *bool:
		return "true or false"
	case *int:
		return "an integer"
	}
	return "a string"
}
