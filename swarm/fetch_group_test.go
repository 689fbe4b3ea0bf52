package swarm_test

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// loadCountingStore counts the claims FetchClaims loads from the store.
type loadCountingStore struct {
	*store.Store
	calls, loaded atomic.Int64
}

func (s *loadCountingStore) FetchClaims(ctx context.Context, cid string) ([]store.Claim, error) {
	cs, err := s.Store.FetchClaims(ctx, cid)
	s.calls.Add(1)
	s.loaded.Add(int64(len(cs)))
	return cs, err
}

// TestFetch_OneGroupLoadedOncePerRequest: a FETCH of many cids that are
// all in one record (cid group) loads the group once, not once per cid:
// the work of a request is bounded by its answer, not by (cids asked) x
// (cids in the group). In open trust (a bootstrap node) anyone can build
// such a group with link claims. (Review 3, D5: 120 cids of a 121-cid
// group loaded 28,800 claims to answer 240.)
func TestFetch_OneGroupLoadedOncePerRequest(t *testing.T) {
	mn := newMocknet(t)
	var cs *loadCountingStore
	victim := newNode(t, nodeOpt{mn: mn, swarm: func(c *swarm.Config) {
		c.NoAutoSync = true
		cs = &loadCountingStore{Store: c.Store.(*store.Store)}
		c.Store = cs
	}})
	w := mustSigner(t)
	ts := uint64(time.Now().UnixMilli()) - 60_000
	const k = 120 // cids linked into one group
	hub := testCID(0)
	claims := make([]store.Claim, 2*k)
	var asked []string
	for i := 1; i <= k; i++ {
		asked = append(asked, testCID(i))
	}
	var wg sync.WaitGroup // signed in parallel
	for w0 := range 4 {
		wg.Go(func() {
			for i := w0; i < k; i += 4 {
				c := asked[i]
				claims[2*i] = w.Text(hub, store.LinkPrefix+c, "true", ts+uint64(i))
				claims[2*i+1] = w.Text(c, "title", "x", ts+uint64(i))
			}
		})
	}
	wg.Wait()
	victim.submit(t, claims)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := attackerOf(t, mn, victim).NewStream(ctx, victim.id, swarm.ProtocolFetch)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Reset()
	req := []byte{0x10}
	req = appendUvarint(req, uint64(len(asked)))
	for _, c := range asked {
		req = appendUvarint(req, uint64(len(c)))
		req = append(req, c...)
	}
	start := time.Now()
	if _, err := st.Write(frame(req...)); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseWrite()
	answered := claimsUntilEnd(t, st)
	took := time.Since(start)
	t.Logf("FETCH of %d cids of one %d-cid group: %d claims answered; the node ran FetchClaims %d times and loaded %d claims (%dx the answer) in %v",
		len(asked), k+1, answered, cs.calls.Load(), cs.loaded.Load(), cs.loaded.Load()/int64(max(answered, 1)), took)
	if answered != 2*k {
		t.Fatalf("answered %d claims, want the group's %d", answered, 2*k)
	}
	if cs.loaded.Load() > 4*int64(answered) {
		t.Fatalf("one request made the node load %d claims to answer %d", cs.loaded.Load(), answered)
	}
}

func appendUvarint(b []byte, x uint64) []byte { return binary.AppendUvarint(b, x) }
