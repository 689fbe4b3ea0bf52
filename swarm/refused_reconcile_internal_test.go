package swarm

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/metanode/metanode/store"
)

// TestReconcile_RefusedBurstsConverge: two list-mode homes hold the same
// claims and refused different parts of one burst of an untrusted signer's
// claims (close in time, none of their own in between: a plugin's scan
// relayed by an open-trust node at different times). Neither has an own
// item to cut that range at; the session must still settle it instead of
// bouncing one fingerprint of it until the turn limit.
func TestReconcile_RefusedBurstsConverge(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	common := randItems(r, 1000, 1, 1e9)
	burst := randItems(r, 100, 500_000_000, 100) // 100 claims within 100 ms
	big := randItems(r, 5000, 700_000_000, 1000) // more than one id list holds
	cases := []struct {
		name   string
		ea, eb []store.SyncItem
	}{
		{"one refused 100, the other 40 of them", burst, burst[:40]},
		{"each refused 40 others", burst[:40], burst[60:]},
		{"one refused 5000, the other none", big, nil},
		{"one refused 5000, the other every other one", big, everyOther(big)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newSimSide(slices.Clone(common), slices.Clone(c.ea), defaultReconcileParams)
			b := newSimSide(slices.Clone(common), slices.Clone(c.eb), defaultReconcileParams)
			res := simulate(t, a, b) // fails past maxTurns
			if res.moved != 0 {
				t.Fatalf("%d items moved between two sides holding the same claims", res.moved)
			}
			t.Logf("refused %d and %d: %d turns, %d bytes of ranges and wants", len(c.ea), len(c.eb), res.turns, res.overhead)
		})
	}
	// A difference of real claims inside the refused burst still moves.
	t.Run("a claim only one side holds inside the refused burst", func(t *testing.T) {
		own := randItems(r, 1, 500_000_050, 1)
		a := newSimSide(append(slices.Clone(common), own...), slices.Clone(burst), defaultReconcileParams)
		b := newSimSide(slices.Clone(common), slices.Clone(burst[:40]), defaultReconcileParams)
		res := simulate(t, a, b)
		if res.moved != 1 || b.set.Len() != len(common)+1 {
			t.Fatalf("moved %d, b holds %d of %d", res.moved, b.set.Len(), len(common)+1)
		}
	})
}

func everyOther(items []store.SyncItem) []store.SyncItem {
	var out []store.SyncItem
	for i := 0; i < len(items); i += 2 {
		out = append(out, items[i])
	}
	return out
}
