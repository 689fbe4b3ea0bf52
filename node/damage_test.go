package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// noSwarmErrors fails when a node's swarm reports a problem.
func noSwarmErrors(t *testing.T, name string, n *node.Node) {
	t.Helper()
	st, err := n.SwarmStatus(context.Background())
	if err != nil || len(st.Errors) > 0 {
		t.Fatalf("%s's swarm reports %q, %v", name, st.Errors, err)
	}
}

// claimsOf lists the stored claims of key on cid (none when no claim
// describes the cid: its record is hidden).
func claimsOf(t *testing.T, st *store.Store, cid, key string) []store.Claim {
	t.Helper()
	gc, err := st.Claims(context.Background(), cid, store.ClaimFilter{Key: key})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return gc.Claims
}

// TestDamage_PeerNeverGetsTheDamagedClaim is issue 20's attack: one bit of
// a claim's value flipped in a stopped node's truth.db. Restarted, the node
// never serves the value nobody signed, its /health is degraded naming the
// claim and the remedy, the paired home it syncs with never receives the
// claim, reports no problem with it (no swarm key mismatch, no block) and
// keeps syncing.
func TestDamage_PeerNeverGetsTheDamagedClaim(t *testing.T) {
	ctx := context.Background()
	cfgA := testConfig(t, dataDir(t, "a"))
	a := openNodeNoCleanup(t, cfgA)
	plugin := signer(t)
	cid := testCID(30)
	year := plugin.Text(cid, "year", "Damaged-1995", nowMS())
	if _, err := a.SubmitClaims(ctx, []store.Claim{plugin.Text(cid, "title", "Heat", nowMS()), year}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	storetest.FlipBit(t, filepath.Join(cfgA.DataDir, node.TruthFile), year.Value)
	flipped := bytes.Clone(year.Value)
	flipped[len(flipped)/2] ^= 0x04

	a = openNode(t, cfgA)
	b := joinHome(t, a, testConfig(t, dataDir(t, "b")))
	waitFor(t, 30*time.Second, "the intact title on B", func() error { return hasField(ctx, b.Store(), cid, "title", "Heat") })
	waitFor(t, 30*time.Second, "A degraded, naming the damaged claim", func() error {
		h := a.Health(ctx)
		if h.Status != "degraded" || !strings.Contains(h.Checks["integrity"], `key "year"`) {
			return fmt.Errorf("health %+v", h)
		}
		return nil
	})
	h := a.Health(ctx).Checks["integrity"]
	for _, want := range []string{"cid " + cid, "signer " + plugin.UID(), "asks its peers", "restore truth.db from a backup"} {
		if !strings.Contains(h, want) {
			t.Errorf("integrity check %q does not say %q", h, want)
		}
	}
	if cs := claimsOf(t, a.Store(), cid, "year"); len(cs) != 0 {
		t.Fatalf("A serves %d year claims (%q): the damaged one must not leave it", len(cs), cs[0].Value)
	}
	if rec, err := a.Store().Record(ctx, cid, ""); err != nil || rec.Fields["year"] == string(flipped) {
		t.Fatalf("A's record %v, %v", rec.Fields, err)
	}

	// B keeps syncing with A, and has nothing against it.
	genre := plugin.Text(cid, "genre", "crime", nowMS())
	if _, err := a.SubmitClaims(ctx, []store.Claim{genre}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a later claim of A on B", func() error { return hasField(ctx, b.Store(), cid, "genre", "crime") })
	if cs := claimsOf(t, b.Store(), cid, "year"); len(cs) != 0 {
		t.Fatalf("B received %d year claims (%q)", len(cs), cs[0].Value)
	}
	noSwarmErrors(t, "B", b)
	noSwarmErrors(t, "A", a)
}

// TestDamage_RefetchedFromPeer: a claim damaged on a node while its paired
// home holds the genuine copy. The node's scrub finds it, sets it aside
// (it leaves the sync set) and asks its peer again: the genuine claim comes
// back by sync, and the node's health is ok again.
func TestDamage_RefetchedFromPeer(t *testing.T) {
	ctx := context.Background()
	cfgA := testConfig(t, dataDir(t, "a"))
	cfgA.Scrub = store.ScrubConfig{Period: time.Millisecond, MaxRate: 1e6, Delay: time.Millisecond}
	a := openNodeNoCleanup(t, cfgA)
	b := joinHome(t, a, testConfig(t, dataDir(t, "b")))
	plugin := signer(t)
	cid := testCID(31)
	year := plugin.Text(cid, "year", "Refetched-1995", nowMS())
	if _, err := a.SubmitClaims(ctx, []store.Claim{year}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the claim on B", func() error { return hasField(ctx, b.Store(), cid, "year", "Refetched-1995") })
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	storetest.FlipBit(t, filepath.Join(cfgA.DataDir, node.TruthFile), year.Value)

	cfgA.Bootstrap = b.Addrs()[:1] // A listens on a new port: it dials B
	a = openNode(t, cfgA)
	waitFor(t, 30*time.Second, "the genuine claim back on A, its health ok", func() error {
		cs := claimsOf(t, a.Store(), cid, "year")
		if len(cs) != 1 || cs[0].ID() != year.ID() || cs[0].Sig != year.Sig {
			return fmt.Errorf("A holds %d year claims", len(cs))
		}
		if h := a.Health(ctx); h.Checks["integrity"] != "ok" {
			return fmt.Errorf("integrity %q", h.Checks["integrity"])
		}
		return nil
	})
	resp, err := http.Get(a.APIURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"metanode_store_quarantined_total 1", "metanode_store_quarantined_claims 0", "metanode_store_scrub_claims_total"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("A's /metrics has no %q", want)
		}
	}
}
