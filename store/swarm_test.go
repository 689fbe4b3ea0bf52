package store_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// manyClaims builds n claims over n/5 cids from three signers, with some
// replaced rows and tombstones.
func manyClaims(n int) []store.Claim {
	signers := storetest.Signers(3)
	return storetest.Claims(n, func(i int) (*store.Signer, store.Claim) {
		c := store.Claim{CID: storetest.CID(i / 5), Key: fmt.Sprintf("k%d", i%4), Kind: store.KindText, Value: fmt.Appendf(nil, "v%d", i), TS: uint64(1000 + i)}
		if i%11 == 0 {
			c.Kind, c.Value = store.KindRetraction, nil
		}
		return signers[i%3], c
	})
}

// wantItems is the sync set the claims should give: the (ts, id) of each
// row that wins its (cid, key, signer).
func wantItems(claims []store.Claim, trusted func(string) bool) []store.SyncItem {
	type k struct{ cid, key, uid string }
	best := map[k]store.Claim{}
	for _, c := range claims {
		kk := k{c.CID, c.Key, c.UID}
		if b, ok := best[kk]; !ok || item(c).Compare(item(b)) > 0 {
			best[kk] = c
		}
	}
	var out []store.SyncItem
	for _, c := range best {
		if trusted(c.UID) {
			out = append(out, item(c))
		}
	}
	slices.SortFunc(out, store.SyncItem.Compare)
	return out
}

func TestSwarm_SyncSetAndReads(t *testing.T) {
	tp, cp := paths(t)
	cfg := store.Config{TruthPath: tp, CachePath: cp}
	claims := manyClaims(600)
	s := reopen(t, cfg)
	if _, err := s.Submit(ctx, claims[:400], store.SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Claims that arrive while the set loads must not be lost from it.
	s = reopen(t, cfg)
	defer s.Close()
	for lo := 400; lo < len(claims); lo += 50 {
		if _, err := s.Submit(ctx, claims[lo:lo+50], store.SubmitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	<-s.SyncReady()
	want := wantItems(claims, func(string) bool { return true })
	got := s.SyncSet().Items(store.MinSyncItem, store.MaxSyncItem, 0)
	if !slices.Equal(got, want) {
		t.Fatalf("sync set has %d items, want %d", len(got), len(want))
	}

	// ClaimsByItems: stored ones come back, unknown ones are skipped.
	missing := store.SyncItem{TS: 1, ID: store.ID{1}}
	byItems, err := s.ClaimsByItems(ctx, []store.SyncItem{want[0], missing, want[5]})
	if err != nil || len(byItems) != 2 || item(byItems[0]) != want[0] || item(byItems[1]) != want[5] {
		t.Fatalf("by items=%d %v", len(byItems), err)
	}
	for _, c := range byItems {
		if err := c.Verify(); err != nil {
			t.Fatalf("served claim does not verify: %v", err)
		}
	}
	// ClaimsInRange: [lo, hi) in order, bounded by limit.
	lo, hi := want[10], want[60]
	rng, err := s.ClaimsInRange(ctx, lo, hi, 1000)
	if err != nil || len(rng) != 50 {
		t.Fatalf("range=%d %v", len(rng), err)
	}
	for i, c := range rng {
		if item(c) != want[10+i] {
			t.Fatalf("range item %d out of order", i)
		}
	}
	if rng, _ = s.ClaimsInRange(ctx, store.MinSyncItem, store.MaxSyncItem, 7); len(rng) != 7 || item(rng[0]) != want[0] {
		t.Fatalf("limited range=%d", len(rng))
	}
	if rng, _ = s.ClaimsInRange(ctx, store.MinSyncItem, store.MaxSyncItem, 100000); len(rng) != len(want) {
		t.Fatalf("full range=%d, want %d", len(rng), len(want))
	}
	// FetchClaims: the group's claims, tombstones included.
	fetched, err := s.FetchClaims(ctx, storetest.CID(3))
	if err != nil {
		t.Fatal(err)
	}
	var wantFetch int
	for _, it := range want {
		for _, c := range claims {
			if item(c) == it && c.CID == storetest.CID(3) {
				wantFetch++
			}
		}
	}
	if len(fetched) != wantFetch || wantFetch == 0 {
		t.Fatalf("fetched=%d, want %d", len(fetched), wantFetch)
	}
	if got, _ := s.FetchClaims(ctx, storetest.CID(100000)); len(got) != 0 {
		t.Fatal("fetch of an unknown cid returned claims")
	}
	// CIDs: every cid with claims, in string order, paged.
	var all []string
	after := ""
	for {
		page, err := s.CIDs(ctx, after, 17)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if len(page) < 17 {
			break
		}
		after = page[len(page)-1]
	}
	if len(all) != 120 || !slices.IsSorted(all) {
		t.Fatalf("cids=%d sorted=%v", len(all), slices.IsSorted(all))
	}
	if ok, _ := s.HasCID(ctx, storetest.CID(7)); !ok {
		t.Fatal("HasCID false for a claimed cid")
	}
}

// TestSwarm_SharedOnly: a distrusted signer's claims are neither in the
// set nor served, nor provided.
func TestSwarm_SharedOnly(t *testing.T) {
	s := open(t, store.Config{})
	<-s.SyncReady()
	a, b := storetest.Signer(1), storetest.Signer(2)
	ca, cb := a.Text(cidA, "title", "a", 1), b.Text(cidB, "title", "b", 1)
	submit(t, s, ca, cb)
	if err := s.Distrust(ctx, b.UID()); err != nil {
		t.Fatal(err)
	}
	if got := s.SyncSet().Items(store.MinSyncItem, store.MaxSyncItem, 0); len(got) != 1 || got[0] != item(ca) {
		t.Fatalf("set=%v", got)
	}
	if got, _ := s.ClaimsInRange(ctx, store.MinSyncItem, store.MaxSyncItem, 10); len(got) != 1 {
		t.Fatalf("range=%d", len(got))
	}
	if got, _ := s.FetchClaims(ctx, cidB); len(got) != 0 {
		t.Fatal("fetch serves a distrusted signer")
	}
	if got, _ := s.CIDs(ctx, "", 10); !slices.Equal(got, []string{cidA}) {
		t.Fatalf("cids=%v", got)
	}
}
