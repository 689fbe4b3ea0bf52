package node_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metanode/metanode/node"
)

// legacyReq sends an unsigned write as meta-sort's writer does (JSON body,
// Accept: application/json) and decodes the answer into out.
func legacyReq(t *testing.T, n *node.Node, method, path, body string, out any) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, n.APIURL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %s: %v", method, path, b, err)
		}
	}
	return resp.StatusCode
}

// TestLegacy_SignedTrustedSharedKept: a legacy PATCH at home A is signed by
// the key A keeps in its data directory (0600), which A lists and vouches
// for like any local writer; paired home B gets the record, and A reads
// it back after a restart, signed by the same key.
func TestLegacy_SignedTrustedSharedKept(t *testing.T) {
	ctx := context.Background()
	dirA := dataDir(t, "a")
	cfgA := testConfig(t, dirA)
	a := openNodeNoCleanup(t, cfgA)
	b := joinHome(t, a, testConfig(t, dataDir(t, "b")))
	uid := a.LegacyUID()
	if uid == "" || uid == a.UID() {
		t.Fatalf("legacy writer uid %q (node %q)", uid, a.UID())
	}
	fi, err := os.Stat(filepath.Join(dirA, node.LegacyKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("legacy key file: %v, mode %v", err, fi.Mode())
	}

	cid := testCID(1)
	var res struct {
		Success bool   `json:"success"`
		HashID  string `json:"hashId"`
		Updated int    `json:"updated"`
	}
	if st := legacyReq(t, a, "PATCH", "/meta/"+cid, `{"title":"Inception","year":"2010"}`, &res); st != 200 || !res.Success || res.Updated != 2 {
		t.Fatalf("PATCH: %d %+v", st, res)
	}
	if err := ownDecision(t, a, uid); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "B has the legacy write", func() error {
		return hasField(ctx, b.Store(), cid, "title", "Inception")
	})

	if st := legacyReq(t, a, "DELETE", "/meta/"+cid+"/year", "", nil); st != 200 {
		t.Fatalf("DELETE: %d", st)
	}
	waitFor(t, 30*time.Second, "B sees the retraction", func() error {
		return hasField(ctx, b.Store(), cid, "year", "")
	})

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a = openNode(t, cfgA)
	if a.LegacyUID() != uid {
		t.Fatalf("after a restart the legacy writer is %s, was %s", a.LegacyUID(), uid)
	}
	if err := hasField(ctx, a.Store(), cid, "title", "Inception"); err != nil {
		t.Fatal(err)
	}
	if err := hasField(ctx, a.Store(), cid, "year", ""); err != nil {
		t.Fatal(err)
	}
}

// TestLegacy_Refused: with legacy writes refused the routes answer 410
// and the node holds no legacy key.
func TestLegacy_Refused(t *testing.T) {
	dir := dataDir(t, "a")
	cfg := testConfig(t, dir)
	cfg.RefuseLegacyWrites = true
	n := openNode(t, cfg)
	if st := legacyReq(t, n, "PATCH", "/meta/"+testCID(1), `{"title":"x"}`, nil); st != http.StatusGone {
		t.Fatalf("PATCH: %d, want 410", st)
	}
	if _, err := os.Stat(filepath.Join(dir, node.LegacyKeyFile)); !os.IsNotExist(err) {
		t.Fatalf("legacy key file with legacy writes refused: %v", err)
	}
	if n.LegacyUID() != "" {
		t.Fatalf("LegacyUID %q", n.LegacyUID())
	}
}
