package node

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
)

// TestInterestStore: in interest mode, peer claims about unknown cids are
// dropped (not stored), claims about known cids and vouches are stored, and
// a lookup's fetch passes whatever its cid.
func TestInterestStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := store.New(store.Config{
		TruthPath: filepath.Join(dir, "truth.db"),
		CachePath: filepath.Join(dir, "cache.db"),
		Trust:     store.TrustOpen,
	})
	if err := st.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	ts := uint64(time.Now().UnixMilli())
	cid := func(i byte) string {
		d := make([]byte, 32)
		d[0] = i
		return store.MidhashCID(d)
	}
	known, unknown, fetched := cid(1), cid(2), cid(3)
	if _, err := st.Submit(ctx, []store.Claim{s.Text(known, "title", "local", ts)}, store.SubmitOptions{Origin: store.OriginLocal}); err != nil {
		t.Fatal(err)
	}
	peerCID, err := store.PeerIDCID(s.UID())
	if err != nil {
		t.Fatal(err)
	}
	is := &interestStore{Store: st}
	batch := []store.Claim{
		s.Text(unknown, "title", "dropped", ts),
		s.Text(known, "year", "1995", ts),
		s.Text(peerCID, store.VouchPrefix+s.UID(), "true", ts),
		s.Text(unknown, store.VouchPrefix+s.UID(), "true", ts), // a vouch key elsewhere counts for nothing
	}
	res, err := is.Submit(ctx, batch, store.SubmitOptions{Origin: store.OriginPeer})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(batch) {
		t.Fatalf("%d results for %d claims", len(res), len(batch))
	}
	if res[0].Outcome != store.Rejected || !errors.Is(res[0].Err, ErrNotInterested) || res[0].ID != batch[0].ID() {
		t.Fatalf("unknown cid: %+v", res[0])
	}
	if res[1].Outcome != store.Accepted || !res[2].Stored {
		t.Fatalf("known cid %+v, vouch %+v: want both stored", res[1], res[2])
	}
	if res[3].Outcome != store.Rejected || !errors.Is(res[3].Err, ErrNotInterested) {
		t.Fatalf("a vouch key on an unknown cid that is not its signer's: %+v", res[3])
	}
	if has, _ := st.HasCID(ctx, unknown); has {
		t.Fatal("the dropped claims' cid is known to the store")
	}
	res, err = is.Submit(ctx, []store.Claim{s.Text(fetched, "title", "looked up", ts)}, store.SubmitOptions{Origin: store.OriginFetch})
	if err != nil || res[0].Outcome != store.Accepted {
		t.Fatalf("fetched claim: %+v, %v", res, err)
	}
}
