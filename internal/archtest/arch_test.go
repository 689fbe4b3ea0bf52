package archtest

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const module = "github.com/metanode/metanode"

type pkg struct {
	ImportPath   string
	Dir          string
	Name         string
	GoFiles      []string
	TestGoFiles  []string
	XTestGoFiles []string
	Imports      []string
	Deps         []string
}

// rel is the package path inside the module ("" for the root).
func (p pkg) rel() string { return strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/") }

// packages lists the module's packages (go list -e: a package that does
// not build yet is still listed; its own tests report why).
func packages(t *testing.T) []pkg {
	t.Helper()
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	cmd := exec.Command("go", "list", "-e", "-json", "./...")
	cmd.Dir = strings.TrimSpace(string(root))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if len(p.GoFiles) > 0 {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found %d packages: want the whole module", len(pkgs))
	}
	return pkgs
}

// TestPackageDocs: every package says what it owns, in exactly one file.
func TestPackageDocs(t *testing.T) {
	for _, p := range packages(t) {
		var with []string
		fset := token.NewFileSet()
		for _, f := range p.GoFiles {
			af, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Errorf("%s: %v", p.ImportPath, err)
				continue
			}
			if af.Doc != nil && strings.TrimSpace(af.Doc.Text()) != "" {
				with = append(with, f)
			}
		}
		switch {
		case len(with) == 0:
			t.Errorf("%s has no package doc comment (add a doc.go saying what it owns and its concurrency model)", p.ImportPath)
		case len(with) > 1:
			t.Errorf("%s has a package doc comment in %d files %v: keep exactly one (doc.go)", p.ImportPath, len(with), with)
		}
	}
}

// allowed maps a package (or a subtree, "x/...") to the module packages it
// may import. Anything not listed may import nothing of ours.
var allowed = []struct {
	from string
	to   []string
}{
	{"store/...", []string{"store/..."}},
	{"api/...", []string{"store/...", "api/..."}},
	{"swarm/...", []string{"store/...", "swarm/..."}},
	{"node/watcher/...", []string{"store/...", "node/watcher/..."}},
	{"node/beacon/...", []string{"node/beacon/..."}},
	{"node", []string{"api", "swarm", "store", "node/watcher", "node/beacon"}},
	{"cmd/...", []string{"node", "api", "store", "swarm/swarmbench"}},
	{"internal/...", []string{"internal/..."}},
}

func match(pattern, rel string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == base || strings.HasPrefix(rel, base+"/")
	}
	return rel == pattern
}

// TestImportDirection: cmd → node → {api, swarm, store}; node/watcher →
// store; api and swarm never import each other; store imports nothing of
// ours; nothing imports cmd, and only cmd imports node.
func TestImportDirection(t *testing.T) {
	checked := 0
	for _, p := range packages(t) {
		from := p.rel()
		var rule []string
		found := false
		for _, a := range allowed {
			if match(a.from, from) {
				rule, found = a.to, true
				break
			}
		}
		if !found {
			t.Errorf("%s: no import rule: add the package to archtest's table", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := strings.TrimPrefix(imp, module+"/")
			ok := false
			for _, r := range rule {
				if match(r, to) {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s imports %s: not allowed (allowed: %v)", from, to, rule)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no internal import checked: the test cannot fail")
	}
}

// pureAlgorithms are packages that must not depend on libp2p at all,
// directly or through anything they import: the reconciliation algorithm
// and its framing are tested and reused on their own.
var pureAlgorithms = []string{"swarm/reconcile", "swarm/internal/wire"}

// TestPureAlgorithms: the reconciliation package imports no libp2p.
func TestPureAlgorithms(t *testing.T) {
	seen := 0
	for _, p := range packages(t) {
		if !slices.Contains(pureAlgorithms, p.rel()) {
			continue
		}
		seen++
		for _, d := range p.Deps {
			if strings.HasPrefix(d, "github.com/libp2p/") {
				t.Errorf("%s depends on %s: it must stay free of libp2p", p.ImportPath, d)
			}
		}
	}
	if seen != len(pureAlgorithms) {
		t.Fatalf("found %d of the packages %v", seen, pureAlgorithms)
	}
}

func TestImportRules(t *testing.T) {
	// The rule table itself must say what ARCHITECTURE.md says.
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"cmd/metanode", "node", true},
		{"node", "api", true},
		{"node", "swarm", true},
		{"node", "node/watcher", true},
		{"api", "swarm", false},
		{"swarm", "api", false},
		{"store", "api", false},
		{"store/storetest", "store", true},
		{"node/watcher", "node", false},
		{"api", "node", false},
		{"swarm", "node", false},
		{"node", "cmd/metanode", false},
	} {
		ok := false
		for _, a := range allowed {
			if match(a.from, tc.from) {
				for _, r := range a.to {
					ok = ok || match(r, tc.to)
				}
				break
			}
		}
		if ok != tc.ok {
			t.Errorf("%s → %s allowed = %v, want %v", tc.from, tc.to, ok, tc.ok)
		}
	}
}

// TestLeakChecks: every package with tests runs goleak in its TestMain.
func TestLeakChecks(t *testing.T) {
	for _, p := range packages(t) {
		files := append(append([]string{}, p.TestGoFiles...), p.XTestGoFiles...)
		if len(files) == 0 {
			continue
		}
		fset := token.NewFileSet()
		ok := false
		for _, f := range files {
			af, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, 0)
			if err != nil {
				t.Errorf("%s: %v", p.ImportPath, err)
				continue
			}
			for _, d := range af.Decls {
				fn, isFn := d.(*ast.FuncDecl)
				if !isFn || fn.Name.Name != "TestMain" || fn.Recv != nil || fn.Body == nil {
					continue
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					if sel, isSel := n.(*ast.SelectorExpr); isSel {
						if id, isID := sel.X.(*ast.Ident); isID && id.Name == "goleak" {
							ok = true
						}
					}
					return !ok
				})
			}
		}
		if !ok {
			t.Errorf("%s has tests but no TestMain calling goleak (func TestMain(m *testing.M) { goleak.VerifyTestMain(m) })", p.ImportPath)
		}
	}
}
