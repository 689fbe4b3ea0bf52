package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

// TestE2E_OfflineHomeCatchesUp: swarm promise "a node offline during
// 10,000 writes catches up alone", with the real binary (built without
// the race detector, so the full count runs in CI). Two paired homes; B
// stops; A's plugin writes 10,000 claims; B starts again and, with no
// other step, ends up holding every claim A holds.
func TestE2E_OfflineHomeCatchesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const records, keys = 2000, 5 // 10,000 claims
	dir := t.TempDir()
	a, b := filepath.Join(dir, "home-a"), filepath.Join(dir, "home-b")
	srvA := startServe(t, a)
	code := strings.TrimSpace(binCLI(t, nil, 0, "invite", "--api", srvA.url))
	srvB := startNodeCmd(t, b, []string{"join", code})
	waitLog(t, srvB, "joining: done")
	srvB.stop(t)

	key := filepath.Join(dir, "plugin.key")
	binCLI(t, nil, 0, "keygen", "--out", key)
	plugin, err := store.LoadSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	claims := signOffline(plugin, records, keys, uint64(time.Now().UnixMilli())-60_000)
	cl := api.NewClient(srvA.url)
	defer cl.Close()
	res, err := cl.PostClaims(context.Background(), claims)
	if err != nil || res.Accepted != len(claims) {
		t.Fatalf("A took %d of %d claims (%d rejected): %v", res.Accepted, len(claims), res.Rejected, err)
	}
	want := claimCount(t, srvA.url)

	srvB = startServe(t, b)
	deadline := time.Now().Add(3 * time.Minute)
	for got := claimCount(t, srvB.url); got != want; got = claimCount(t, srvB.url) {
		if time.Now().After(deadline) {
			t.Fatalf("B holds %d of A's %d claims after 3 minutes", got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
	last := claims[len(claims)-1]
	waitField(t, srvB.url, last.CID, last.Key, string(last.Value))
	// The owner sees the catch-up at the default log level.
	waitLog(t, srvB, "caught up from a peer")
	srvB.stop(t)
	srvA.stop(t)
}

// signOffline signs records×keys text claims, on two goroutines.
func signOffline(s *store.Signer, records, keys int, ts uint64) []store.Claim {
	out := make([]store.Claim, records*keys)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := w; i < len(out); i += 2 {
				sum := sha256.Sum256(fmt.Append(nil, "offline record ", i/keys))
				cid := store.MidhashCID(sum[:])
				out[i] = s.Text(cid, fmt.Sprint("field", i%keys), fmt.Sprint("value ", i), ts+uint64(i))
			}
		})
	}
	wg.Wait()
	return out
}

// claimCount reads the live claims a node holds (GET /api/stats).
func claimCount(t *testing.T, base string) int64 {
	t.Helper()
	resp, err := http.Get(base + "/api/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st store.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Claims
}

// TestE2E_GetRemote: `metanode get --remote` on a node that keeps only
// what it looks up (interest mode) finds the claims on a peer, where a
// plain `get` finds nothing.
func TestE2E_GetRemote(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	srvA := startServe(t, filepath.Join(dir, "a"))
	key := filepath.Join(dir, "plugin.key")
	binCLI(t, nil, 0, "keygen", "--out", key)
	const cid = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
	binCLI(t, nil, 0, "claim", "put", "--api", srvA.url, "--signer", key, "--cid", cid, "--key", "title", "--value", "Heat")

	cl := api.NewClient(srvA.url)
	defer cl.Close()
	st, err := cl.SwarmStatus(context.Background())
	if err != nil || len(st.Addrs) == 0 {
		t.Fatalf("A's status: %+v %v", st, err)
	}
	srvC := startServe(t, filepath.Join(dir, "c"), "--replicate", "interest", "--trust", "open", "--bootstrap", st.Addrs[0])
	clC := api.NewClient(srvC.url)
	defer clC.Close()
	deadline := time.Now().Add(60 * time.Second)
	for !hasPeer(clC, st.PeerID) {
		if time.Now().After(deadline) {
			t.Fatalf("C never connected to A\n%s", srvC.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := binCLIAllowing(t, "get", cid, "--api", srvC.url)
	if strings.Contains(out, "Heat") {
		t.Fatalf("an interest node held the record before any lookup: %s", out)
	}
	out = binCLI(t, nil, 0, "get", cid, "--remote", "--api", srvC.url)
	if !strings.Contains(out, `"Heat"`) {
		t.Fatalf("get --remote printed %s", out)
	}
	// Looked up once, the record is kept: a plain get finds it now.
	if out := binCLI(t, nil, 0, "get", cid, "--api", srvC.url); !strings.Contains(out, `"Heat"`) {
		t.Fatalf("get after the lookup printed %s", out)
	}
	srvC.stop(t)

	// A home that trusts neither A nor its plugin is told that peers hold
	// claims only by signers it does not trust, and what to do: not "no
	// peer" (docs/trust.md).
	srvD := startServe(t, filepath.Join(dir, "d"), "--replicate", "interest", "--trust", "list", "--bootstrap", st.Addrs[0])
	clD := api.NewClient(srvD.url)
	defer clD.Close()
	for deadline := time.Now().Add(60 * time.Second); !hasPeer(clD, st.PeerID); {
		if time.Now().After(deadline) {
			t.Fatalf("D never connected to A\n%s", srvD.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	out = binCLIAllowing(t, "get", cid, "--remote", "--api", srvD.url)
	if !strings.Contains(out, "only by signers this node does not trust") || !strings.Contains(out, "trust add") {
		t.Fatalf("get --remote of a cid only untrusted signers describe printed %s", out)
	}
	srvD.stop(t)
	srvA.stop(t)
}

// hasPeer reports whether the node behind cl is connected to peer.
func hasPeer(cl *api.Client, peer string) bool {
	peers, err := cl.SwarmPeers(context.Background())
	for _, p := range peers {
		if err == nil && p.PeerID == peer {
			return true
		}
	}
	return false
}
