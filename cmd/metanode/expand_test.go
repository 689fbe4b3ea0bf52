package main

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ${VAR} is expanded in the parsed values, so YAML decides what is a
// comment and what is quoted (review 2.2: a scanner of our own took the
// apostrophe in bob's for a quote and expanded the comment after it).
func TestLoadConfig_ExpandFollowsYAML(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		env        map[string]string
		check      func(Config) bool
		want       string
	}{
		{"apostrophe then comment", "files: /srv/bob's music  # was ${OLD_DIR}\n", nil,
			func(c Config) bool { return c.Files == "/srv/bob's music" }, "files = /srv/bob's music"},
		{"escaped quote then hash", "files: \"/srv/a\\\" #${X}\"\n", map[string]string{"X": "EXP"},
			func(c Config) bool { return c.Files == `/srv/a" #EXP` }, `files = /srv/a" #EXP`},
		{"single quoted", "files: '${X}'\n", map[string]string{"X": "EXP"},
			func(c Config) bool { return c.Files == "EXP" }, "files = EXP"},
		{"default with colon", "files: \"${KEYDIR:-/a:b}/x\"\n", nil,
			func(c Config) bool { return c.Files == "/a:b/x" }, "files = /a:b/x"},
		{"dollar dollar", "files: /srv/$$x\n", nil,
			func(c Config) bool { return c.Files == "/srv/$$x" }, "files = /srv/$$x"},
		{"number from a variable", "max-conns: ${N}\n", map[string]string{"N": "12"},
			func(c Config) bool { return c.MaxConns == 12 }, "max-conns = 12"},
		{"list items", "listen:\n  - /ip4/127.0.0.1/tcp/${P}\n  - \"/ip6/::1/tcp/${P}\"\n", map[string]string{"P": "4101"},
			func(c Config) bool {
				return slices.Equal(c.Listen, []string{"/ip4/127.0.0.1/tcp/4101", "/ip6/::1/tcp/4101"})
			}, "two listen addresses"},
		{"value with YAML syntax stays one value", "files: ${S}\n", map[string]string{"S": "/a # b: [c]"},
			func(c Config) bool { return c.Files == "/a # b: [c]" }, "files = /a # b: [c]"},
	} {
		env := map[string]string{"HOME": t.TempDir()}
		for k, v := range tc.env {
			env[k] = v
		}
		cfg, _, err := LoadConfig(loadOptions{getenv: envMap(env), configPath: "/x/metanode.yml", fileBytes: []byte(tc.body)})
		if err != nil {
			t.Errorf("%s: %q: %v", tc.name, tc.body, err)
			continue
		}
		if !tc.check(cfg) {
			t.Errorf("%s: %q: got files=%q max-conns=%d listen=%q, want %s", tc.name, tc.body, cfg.Files, cfg.MaxConns, cfg.Listen, tc.want)
		}
	}
}

// A ${VAR} error names the value's line, also further down a list.
func TestLoadConfig_ExpandErrorLine(t *testing.T) {
	body := "http: 127.0.0.1:9000\nrelays:\n  - /ip4/1.2.3.4/tcp/1/p2p/x\n  - ${RELAY}\n"
	_, _, err := LoadConfig(loadOptions{getenv: envMap(nil), configPath: "/x/m.yml", fileBytes: []byte(body)})
	if !errors.Is(err, ErrUnsetVariable) || !strings.Contains(err.Error(), "config file /x/m.yml line 4:") {
		t.Fatalf("unset variable on line 4: %v", err)
	}
	// In a flow list a brace ends a plain value: the message says to quote.
	_, _, err = LoadConfig(loadOptions{getenv: envMap(nil), configPath: "/x/m.yml", fileBytes: []byte("relays: [${RELAY}]\n")})
	if err == nil || !strings.Contains(err.Error(), `must be quoted: "${VAR}"`) {
		t.Fatalf("unquoted ${VAR} in a flow list: %v", err)
	}
}

// A reference further down a multi-line value is named by its own line
// (the README promises the line), and the next setting's lines are not
// searched for it.
func TestLoadConfig_ExpandErrorLineMultiline(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		line       int
	}{
		{"literal block", "files: |\n  /a\n  ${MISSING}\n", 3},
		{"folded block", "files: >\n  /a\n  ${MISSING}\n", 3},
		{"plain continued", "files: /a\n  ${MISSING}\nhttp: 127.0.0.1:9000\n", 2},
		{"split by folding, written whole in the next setting", "files: >\n  ${MISS\n  ING}\nswarm: \"${MISS ING}\"\n", 1},
	} {
		_, _, err := LoadConfig(loadOptions{getenv: envMap(nil), configPath: "/x/m.yml", fileBytes: []byte(tc.body)})
		want := "config file /x/m.yml line " + strconv.Itoa(tc.line) + ":"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q: %v, want %q", tc.name, tc.body, err, want)
		}
	}
}

// The "must be quoted" hint is for syntax errors the references cause,
// not for any syntax error in a file that mentions ${ somewhere.
func TestLoadConfig_QuoteHintOnlyWhenBracesBreak(t *testing.T) {
	body := "# files: ${MEDIA_DIR}\nhttp: 127.0.0.1:9000\n\tswarm: x\n"
	_, _, err := LoadConfig(loadOptions{getenv: envMap(nil), configPath: "/x/m.yml", fileBytes: []byte(body)})
	if !errors.Is(err, errYAMLSyntax) || strings.Contains(err.Error(), "must be quoted") {
		t.Fatalf("a tab, ${ only in a comment: %v", err)
	}
}

// A value from the environment that is not UTF-8 (a Latin-1 path) loads
// from the file as it does from METANODE_FILES.
func TestLoadConfig_ExpandNonUTF8(t *testing.T) {
	env := map[string]string{"HOME": t.TempDir(), "F": "/srv/m\xfcsic"}
	cfg, _, err := LoadConfig(loadOptions{getenv: envMap(env), configPath: "/x/m.yml", fileBytes: []byte("files: ${F}\n")})
	if err != nil || cfg.Files != "/srv/m\xfcsic" {
		t.Fatalf("files = %q, %v", cfg.Files, err)
	}
}

// An alias to a value under a key the client commands skip is expanded
// for them as for serve, and an anchor's value is expanded once.
func TestLoadConfig_ExpandAlias(t *testing.T) {
	body := []byte("files: &h ${H}\nhttp: *h\n")
	env := map[string]string{"HOME": t.TempDir(), "H": "127.0.0.1:9555"}
	for _, only := range []string{"", "http"} {
		cfg, _, err := LoadConfig(loadOptions{getenv: envMap(env), configPath: "/x/m.yml", fileBytes: body, only: only})
		if err != nil || cfg.HTTP != "127.0.0.1:9555" {
			t.Errorf("only=%q: http = %q, %v", only, cfg.HTTP, err)
		}
	}
	// A value that holds ${ after expansion is not expanded again.
	env["H"] = "/srv/${X}"
	cfg, _, err := LoadConfig(loadOptions{getenv: envMap(env), configPath: "/x/m.yml", fileBytes: []byte("files: &h ${H}\nswarm-key: *h\n")})
	if err != nil || cfg.Files != "/srv/${X}" {
		t.Errorf("files = %q, %v", cfg.Files, err)
	}
}
