package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

func superseded(t *testing.T, s *store.Store, cs ...store.Claim) []bool {
	t.Helper()
	ids := make([]store.ID, len(cs))
	for i := range cs {
		ids[i] = cs[i].ID()
	}
	got, err := s.Superseded(ctx, cs, ids)
	if err != nil {
		t.Fatalf("superseded: %v", err)
	}
	return got
}

// TestSuperseded_ByStoredRow: a claim is superseded when the stored row of
// its (cid, key, signer) is the claim itself or wins by (ts, id); a newer
// claim, another key, another signer, an unknown signer and a claim older
// than a stored retraction are judged each on its own row.
func TestSuperseded_ByStoredRow(t *testing.T) {
	s := open(t, store.Config{Trust: store.TrustOpen})
	a, b, never := storetest.Signer(1), storetest.Signer(2), storetest.Signer(3)
	cur := a.Text(cidA, "title", "current", 1000)
	gone := a.Retraction(cidA, "year", 1000)
	other := b.Text(cidA, "title", "b's", 1000)
	submit(t, s, cur, gone, other)

	cases := []struct {
		name string
		c    store.Claim
		want bool
	}{
		{"older", a.Text(cidA, "title", "old", 999), true},
		{"same claim", cur, true},
		{"newer", a.Text(cidA, "title", "newer", 1001), false},
		{"older than a retraction", a.Text(cidA, "year", "1999", 500), true},
		{"other key", a.Text(cidA, "genre", "x", 1), false},
		{"other cid", a.Text(cidB, "title", "x", 1), false},
		{"other signer, older than its own row", b.Text(cidA, "title", "b old", 1), true},
		{"signer never stored", never.Text(cidA, "title", "x", 1), false},
	}
	cs := make([]store.Claim, len(cases))
	for i := range cases {
		cs[i] = cases[i].c
	}
	got := superseded(t, s, cs...)
	for i, tc := range cases {
		if got[i] != tc.want {
			t.Errorf("%s: superseded = %v, want %v", tc.name, got[i], tc.want)
		}
	}
	// Same tie on ts: the higher id wins.
	x, y := a.Text(cidC, "k", "x", 7), a.Text(cidC, "k", "y", 7)
	lo, hi := x, y
	if x.ID().Compare(y.ID()) > 0 {
		lo, hi = y, x
	}
	submit(t, s, hi)
	if got := superseded(t, s, lo, hi); !slices.Equal(got, []bool{true, true}) {
		t.Errorf("tie on ts: lower id superseded=%v, stored one=%v; want both true", got[0], got[1])
	}
}

// TestSuperseded_LiveLinkUntilItsEdge: a live link between two record
// cids joins their groups even when its row is newer (a retraction that
// came first), so, older than its row, it is superseded only once its
// group edge is stored: the first copy joins (review 8, R8-1), replays
// change nothing and must not pass as new (review 9, R9-2). A link on a
// peer-id cid joins nothing and is judged by its row.
func TestSuperseded_LiveLinkUntilItsEdge(t *testing.T) {
	s := open(t, store.Config{Trust: store.TrustOpen})
	a := storetest.Signer(1)
	peerCID, err := store.PeerIDCID(a.UID())
	if err != nil {
		t.Fatal(err)
	}
	link := a.Text(cidA, store.LinkPrefix+cidB, "true", 1000)
	submit(t, s, a.Retraction(cidA, store.LinkPrefix+cidB, 1001), a.Retraction(peerCID, store.LinkPrefix+cidB, 1001))
	peerLink := a.Text(peerCID, store.LinkPrefix+cidB, "true", 1000)
	if got := superseded(t, s, link, peerLink); !slices.Equal(got, []bool{false, true}) {
		t.Fatalf("a live link older than its retraction: superseded=%v, a link on a peer-id cid=%v; want false, true", got[0], got[1])
	}
	submit(t, s, link) // stale as a row, stored as an edge
	if got := superseded(t, s, link); !got[0] {
		t.Fatal("a replay of a link whose edge is stored is not superseded")
	}
	now := a.Text(cidC, store.LinkPrefix+cidB, "true", 1000)
	newer := a.Text(cidC, store.LinkPrefix+cidB, "true", 1002)
	submit(t, s, now)
	if got := superseded(t, s, now, newer); !slices.Equal(got, []bool{true, false}) {
		t.Fatalf("a link that is its own row: superseded=%v; a newer one: %v; want true, false", got[0], got[1])
	}
}

// TestSuperseded_Batches: more claims than one query takes, duplicates of
// one row among them, answer in the callers' order.
func TestSuperseded_Batches(t *testing.T) {
	s := open(t, store.Config{Trust: store.TrustOpen})
	a := storetest.Signer(1)
	var rows, asked []store.Claim
	var want []bool
	for i := range 700 {
		key := fmt.Sprintf("k%03d", i)
		rows = append(rows, a.Text(cidA, key, "v", 100))
		// Even keys are asked with an older claim (superseded), odd with a
		// newer one; every tenth twice.
		ts := uint64(101)
		if i%2 == 0 {
			ts = 99
		}
		c := a.Text(cidA, key, "w", ts)
		asked = append(asked, c)
		want = append(want, i%2 == 0)
		if i%10 == 0 {
			asked = append(asked, c)
			want = append(want, i%2 == 0)
		}
	}
	submit(t, s, rows...)
	if got := superseded(t, s, asked...); !slices.Equal(got, want) {
		n := 0
		for i := range got {
			if got[i] != want[i] {
				n++
			}
		}
		t.Fatalf("%d of %d answers wrong", n, len(want))
	}
}

// BenchmarkSuperseded: the gossip validator's stale check, per claim, for
// messages of 1 and 64 claims against a store of 20,000 rows (half the
// asked claims have a row). Reported as a ratio to one signature
// verification on one core (the validator verifies every new claim
// anyway): stale-check/verify.
func BenchmarkSuperseded(b *testing.B) {
	signer := storetest.Signer(1)
	probe := signer.Text(cidA, "probe", "x", 1)
	const verifies = 2000
	start := time.Now()
	for range verifies {
		if err := probe.Verify(); err != nil {
			b.Fatal(err)
		}
	}
	verify := float64(time.Since(start).Nanoseconds()) / verifies
	s := open(b, store.Config{Trust: store.TrustOpen})
	var rows []store.Claim
	for i := range 20_000 {
		rows = append(rows, signer.Text(storetest.CID(i%500), fmt.Sprintf("k%d", i), "v", 100))
	}
	submit(b, s, rows...)
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
			cs := make([]store.Claim, n)
			ids := make([]store.ID, n)
			for i := range cs {
				j := i * 2 // even: a stored row's key; odd: none
				cs[i] = signer.Text(storetest.CID(j%500), fmt.Sprintf("k%d", j+i%2), "w", 99)
				ids[i] = cs[i].ID()
			}
			b.ResetTimer()
			for range b.N {
				if _, err := s.Superseded(ctx, cs, ids); err != nil {
					b.Fatal(err)
				}
			}
			perClaim := float64(b.Elapsed().Nanoseconds()) / float64(b.N*n)
			b.ReportMetric(perClaim/verify, "stale-check/verify")
		})
	}
}
