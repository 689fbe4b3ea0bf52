package store_test

import (
	"os"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestSubmit_RIDHints: a cid new to the store takes the rid its writer
// names (metanode import keeps the rids of the store it imports) when that
// rid is well formed and no group has it; a cid with a record keeps it, a
// taken or malformed rid is ignored, a link still joins (the older rid
// survives), and the rid outlives a restart and a cache rebuild.
func TestSubmit_RIDHints(t *testing.T) {
	a := storetest.Signer(1)
	truth, cache := paths(t)
	cfg := store.Config{TruthPath: truth, CachePath: cache, Trust: store.TrustOpen}
	s := reopen(t, cfg)
	const legacy = "01J2VFBRD0FCY8TBJFB9NQS3CY" // content-ids.md's vector: older than any rid minted now
	hint := func(claims []store.Claim, rids map[string]string) []store.Result {
		t.Helper()
		res, err := s.Submit(ctx, claims, store.SubmitOptions{RIDs: rids})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	hint([]store.Claim{a.Text(cidA, "title", "Heat", 1)}, map[string]string{cidA: legacy})
	if got := record(t, s, cidA).RID; got != legacy {
		t.Fatalf("rid %s, want the hint %s", got, legacy)
	}
	// Taken by cidA's group: cidB gets a fresh rid, and a malformed hint
	// is no rid at all.
	hint([]store.Claim{a.Text(cidB, "title", "Ronin", 2), a.Text(cidC, "title", "Alien", 2)},
		map[string]string{cidB: legacy, cidC: "not-a-rid"})
	rb, rc := record(t, s, cidB).RID, record(t, s, cidC).RID
	if rb == legacy || !store.IsRID(rb) || !store.IsRID(rc) || rb == rc {
		t.Fatalf("rids %s %s: want two fresh ones", rb, rc)
	}
	// A cid with a record keeps it whatever the hint says.
	hint([]store.Claim{a.Text(cidB, "year", "1998", 3)}, map[string]string{cidB: "01J2VFBRD0FCY8TBJFB9NQS3CZ"})
	if got := record(t, s, cidB).RID; got != rb {
		t.Fatalf("rid moved to %s, want %s", got, rb)
	}
	// A link joins cidB's record into the hinted one: the older rid survives.
	hint([]store.Claim{a.Text(cidA, store.LinkPrefix+cidB, "true", 4)}, nil)
	if got := record(t, s, cidB).RID; got != legacy {
		t.Fatalf("after the link cidB is in %s, want %s", got, legacy)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, suf := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(cache + suf) // a rebuild from truth
	}
	s = reopen(t, cfg)
	defer s.Close()
	for _, c := range []string{cidA, cidB} {
		if got := record(t, s, c).RID; got != legacy {
			t.Fatalf("after a rebuild %s is in %s, want %s", c, got, legacy)
		}
	}
}
