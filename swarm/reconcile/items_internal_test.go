package reconcile

import (
	"math/rand/v2"

	"github.com/metanode/metanode/store"
)

// randItems returns n items with random ids and timestamps in [t0, t0+span).
func randItems(r *rand.Rand, n int, t0, span uint64) []store.SyncItem {
	out := make([]store.SyncItem, n)
	for i := range out {
		out[i].TS = t0 + r.Uint64N(span)
		for j := 0; j < len(out[i].ID); j += 8 {
			v := r.Uint64()
			for k := range 8 {
				out[i].ID[j+k] = byte(v >> (8 * k))
			}
		}
	}
	return out
}
