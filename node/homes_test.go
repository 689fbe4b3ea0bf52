package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
)

// TestHomes_MintedKeysCannotOutvote: the sybil attack between two real
// paired homes on loopback. Home Y's two plugins wrote Heat; home X's
// owner mints five keys that write EVIL through X's local API (X vouches
// for each). Once Y holds all five, Y's merged title is still Heat: X's
// keys count once, as home X, and the tie goes to the older vote. X
// agrees (the same two homes' votes).
func TestHomes_MintedKeysCannotOutvote(t *testing.T) {
	ctx := context.Background()
	y, x := pairedHomes(t)
	cid := testCID(8100)
	ts := nowMS() - 10_000
	heat := []store.Claim{signer(t).Text(cid, "title", "Heat", ts), signer(t).Text(cid, "title", "Heat", ts+1)}
	submitAccepted(t, y, heat...)
	var evil []store.Claim
	for i := range 5 {
		evil = append(evil, signer(t).Text(cid, "title", "EVIL", nowMS()+uint64(i)))
	}
	submitAccepted(t, x, evil...)
	holds := func(n interface{ Store() *store.Store }, claims []store.Claim) error {
		<-n.Store().SyncReady()
		for _, c := range claims {
			if !n.Store().SyncSet().Has(store.SyncItem{TS: c.TS, ID: c.ID()}) {
				return fmt.Errorf("%s's claim not held yet", c.UID)
			}
		}
		return nil
	}
	waitFor(t, 30*time.Second, "X's five keys' claims on Y", func() error { return holds(y, evil) })
	waitFor(t, 30*time.Second, "Y's plugins' claims on X", func() error { return holds(x, heat) })
	for _, n := range []interface{ Store() *store.Store }{y, x} {
		if err := hasField(ctx, n.Store(), cid, "title", "Heat"); err != nil {
			t.Fatal(err)
		}
	}
}
