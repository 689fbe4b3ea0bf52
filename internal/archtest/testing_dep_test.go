package archtest

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// testingImporters are the third-party packages in the binary known to
// import testing from non-test files, with where. Our own packages may not.
var testingImporters = map[string]string{
	// dht_options.go: test-only options (disableFixLowPeersRoutine) in v0.42.
	"github.com/libp2p/go-libp2p-kad-dht": "dht_options.go",
}

// TestBinaryDoesNotImportTesting: no package of ours that the binary links
// imports testing (test fixtures live in store/refdata, not storetest), and
// no new third-party package brings it in unnoticed.
func TestBinaryDoesNotImportTesting(t *testing.T) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", "./cmd/metanode")
	cmd.Dir = strings.TrimSpace(string(root))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	ours := 0
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.ImportPath == module || strings.HasPrefix(p.ImportPath, module+"/") {
			ours++
		}
		for _, imp := range p.Imports {
			if imp != "testing" {
				continue
			}
			switch _, known := testingImporters[p.ImportPath]; {
			case p.ImportPath == module || strings.HasPrefix(p.ImportPath, module+"/"):
				t.Errorf("%s imports testing and is linked into cmd/metanode: move what it needs out of test helpers (e.g. store/refdata)", p.ImportPath)
			case !known:
				t.Errorf("third-party %s imports testing into cmd/metanode: upgrade it, or list it in testingImporters", p.ImportPath)
			}
		}
	}
	if ours < 5 {
		t.Fatalf("cmd/metanode links %d of our packages: the listing is wrong", ours)
	}
}
