package swarm

import (
	"slices"
	"sync"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// limitCopies runs limitSigners on copies of one message of n claims by w
// at once (every other copy in reverse order: another message id), on a
// fresh swarm whose signers have a burst of 5, and returns per copy
// whether it dropped claims and how many it kept.
func limitCopies(w *store.Signer, round, n, copies int) (dropped []bool, kept []int) {
	s := &Swarm{signers: newKeyedLimiter[string](1, 16)} // burst 5
	s.met = newMetrics(s)
	var cs []store.Claim
	for i := range n {
		cs = append(cs, w.Text(storetest.CID(round*10+i), "title", "x", 1000))
	}
	ids := make([]store.ID, len(cs))
	for i := range cs {
		ids[i] = cs[i].ID()
	}
	dropped, kept = make([]bool, copies), make([]int, copies)
	var start, wg sync.WaitGroup
	start.Add(1)
	for k := range copies {
		wg.Go(func() {
			c, id := slices.Clone(cs), slices.Clone(ids)
			if k%2 == 1 {
				slices.Reverse(c)
				slices.Reverse(id)
			}
			start.Wait()
			dropped[k] = s.limitSigners(&c, &id)
			kept[k] = len(c)
		})
	}
	start.Done()
	wg.Wait()
	return dropped, kept
}

// TestLimitSigners_CopiesChargedOnceConcurrently: copies of one message's claims
// validated at the same time (pubsub runs validators in parallel, and each
// copy is a new message id) must spend the signer's budget once, as they do
// one after another (TestLimitSigners_CopiesChargedOnce). With the test
// and the mark in two lock sections around signers.allow, concurrent copies
// can all miss and all charge: then the budget is spent several times and
// the signer's own claims are dropped (review 8, R8-5).
func TestLimitSigners_CopiesChargedOnceConcurrently(t *testing.T) {
	w := storetest.Signer(791)
	bad := 0
	const rounds, copies = 200, 8
	for r := range rounds {
		if dropped, _ := limitCopies(w, r, 5, copies); slices.Contains(dropped, true) {
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d rounds: %d concurrent copies of a 5-claim message (burst 5) had the signer's claims dropped: charged more than once", bad, rounds, copies)
	}
}

// TestLimitSigners_OverBudgetCopiesAllDropped: a message whose claims are over their
// signer's budget must be dropped in every copy. A copy whose take runs
// between another copy's take and its release finds every claim marked,
// charges nothing, and keeps them all: the flood is charged zero times
// (review 9, R9-1).
func TestLimitSigners_OverBudgetCopiesAllDropped(t *testing.T) {
	w := storetest.Signer(991)
	bad, leaked := 0, 0
	const rounds, copies = 300, 8
	for r := range rounds {
		_, kept := limitCopies(w, r, 6, copies) // 6 > burst 5: over in every copy
		if n := sumInts(kept); n > 0 {
			bad++
			leaked += n
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d rounds: copies of a 6-claim message (burst 5, always over) kept %d claims in all: charged zero times", bad, rounds, leaked)
	}
}

func sumInts(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
