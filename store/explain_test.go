package store_test

import (
	"errors"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// Explain agrees with the merge on every worked case of
// home-merge-vectors.json: the same value, one vote marked won carrying
// that exact text, every stored claim listed with a reason, and each
// signer's home as the trust view places it.
func TestExplain_HomeVectors(t *testing.T) {
	hv, keys := store.LoadHomeVectors(t)
	cid := storetest.MidhashCID(4243)
	for _, vec := range hv.Vectors {
		t.Run(vec.Name, func(t *testing.T) {
			t.Parallel()
			s, _ := homeVectorStore(t, vec, keys, cid)
			defer s.Close()
			ex, err := s.Explain(ctx, cid)
			if errors.Is(err, store.ErrNotFound) {
				if vec.Want != nil {
					t.Fatalf("explain: %v, want %q", err, vec.Want.Value)
				}
				return // only untrusted signers: no record
			}
			if err != nil {
				t.Fatal(err)
			}
			got, ok := title(t, s, cid)
			var fe *store.FieldExplain
			for i := range ex.Fields {
				if ex.Fields[i].Key == "title" {
					fe = &ex.Fields[i]
				}
			}
			if fe == nil {
				if ok {
					t.Fatalf("no title in %+v, merged %q", ex, got)
				}
				return
			}
			if fe.Merged != ok || fe.Value != got {
				t.Fatalf("explain says %q (merged %v), the record %q (%v)", fe.Value, fe.Merged, got, ok)
			}
			won := 0
			for _, v := range fe.Votes {
				if v.Why == store.WhyWon {
					won++
					if v.Value != got || !v.Counts {
						t.Errorf("winning vote %+v, merged %q", v, got)
					}
				}
				if v.Why == "" || v.Why == "unexplained" {
					t.Errorf("vote without a reason: %+v", v)
				}
				if v.UID == "" || v.CID != cid {
					t.Errorf("vote %+v: uid or cid missing", v)
				}
			}
			if want := map[bool]int{true: 1, false: 0}[ok]; won != want {
				t.Errorf("%d votes won, want %d: %+v", won, want, fe.Votes)
			}
			if ok && (fe.Votes[0].Why != store.WhyWon || fe.Reason == "") {
				t.Errorf("the winner is not first or has no reason: %q %+v", fe.Reason, fe.Votes)
			}
			t.Logf("%s: %q because %s", vec.Name, fe.Value, fe.Reason)
		})
	}
}

// A record unknown to the store is ErrNotFound.
func TestExplain_Unknown(t *testing.T) {
	s := storetest.Open(t, store.Config{})
	if _, err := s.Explain(ctx, storetest.MidhashCID(1)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("explain of an unknown cid: %v", err)
	}
}
