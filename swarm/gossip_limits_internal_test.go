package swarm

import (
	"slices"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestLimitSigners_CopiesChargedOnce: a signer's new claims spend its
// budget once, whatever other messages carry copies of them before the
// store has them (rotations, other company: each a new message); a claim
// past the budget is still dropped.
func TestLimitSigners_CopiesChargedOnce(t *testing.T) {
	s := &Swarm{signers: newKeyedLimiter[string](1, 16)} // burst 5
	s.met = newMetrics(s)
	w := storetest.Signer(790)
	var cs []store.Claim
	for i := range 6 {
		cs = append(cs, w.Text(storetest.CID(i), "title", "x", 1000))
	}
	limit := func(claims []store.Claim) (kept int, dropped bool) {
		claims = slices.Clone(claims)
		ids := make([]store.ID, len(claims))
		for i := range claims {
			ids[i] = claims[i].ID()
		}
		dropped = s.limitSigners(&claims, &ids)
		return len(claims), dropped
	}
	if kept, dropped := limit(cs[:5]); kept != 5 || dropped {
		t.Fatalf("first message: kept %d of 5 (dropped %v)", kept, dropped)
	}
	rotated := append(slices.Clone(cs[2:5]), cs[:2]...)
	for range 3 {
		if kept, dropped := limit(rotated); kept != 5 || dropped {
			t.Fatalf("copies of claims charged already: kept %d of 5: charged again", kept)
		}
	}
	if kept, dropped := limit(cs[5:]); kept != 0 || !dropped {
		t.Fatalf("a new claim past the budget: kept %d (dropped %v)", kept, dropped)
	}
}

// TestChargedIDs_Forgets: a charged id is remembered at least chargedFor
// and forgotten after at most twice that.
func TestChargedIDs_Forgets(t *testing.T) {
	var c chargedIDs
	t0 := time.Unix(1_800_000_000, 0)
	a, b := store.ID{1}, store.ID{2}
	c.add(a, t0)
	c.add(b, t0.Add(chargedFor-time.Millisecond))
	for _, tc := range []struct {
		id   store.ID
		at   time.Duration
		want bool
	}{
		{a, chargedFor - time.Millisecond, true},
		{a, chargedFor, true},
		{b, 2*chargedFor - 2*time.Millisecond, true},
		{a, 2 * chargedFor, false},
		{b, 4 * chargedFor, false},
	} {
		if got := c.has(tc.id, t0.Add(tc.at)); got != tc.want {
			t.Errorf("id %x at +%v: has = %v, want %v", tc.id[:1], tc.at, got, tc.want)
		}
	}
	// Nothing asked in between: the generation is dropped all the same.
	var quiet chargedIDs
	quiet.add(a, t0)
	if quiet.has(a, t0.Add(2*chargedFor)) {
		t.Error("an id charged 2 x chargedFor ago, with no call in between, is still remembered")
	}
}

// add and has charge one id (always within budget) and test it, for the
// tests.
func (c *chargedIDs) add(id store.ID, now time.Time) {
	c.spend([]store.Claim{{}}, []store.ID{id}, now, func(string, int) bool { return true })
}

func (c *chargedIDs) has(id store.ID, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rotate(now)
	return c.holds(id)
}
