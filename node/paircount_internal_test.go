package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
)

// TestJoinerShare: the pairing count is exact on a small set and, above
// the exact limit, a sample's estimate close to the exact count (here the
// node's own claims are a contiguous quarter of the set, so each stratum
// but one is pure and the estimate is within two strata).
func TestJoinerShare(t *testing.T) {
	ctx := context.Background()
	n := New(Config{
		DataDir:  t.TempDir(),
		HTTPAddr: "127.0.0.1:0",
		Listen:   []string{"/ip4/127.0.0.1/tcp/0"},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err := n.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	plugin, stranger := mustSigner(t), mustSigner(t)
	if err := n.Trust(ctx, stranger.UID()); err != nil {
		t.Fatal(err)
	}
	base := uint64(time.Now().UnixMilli()) - 100_000
	var mine, other []store.Claim
	for i := range 60 {
		mine = append(mine, plugin.Text(cidN(i), "title", "mine", base+uint64(i)))
	}
	for i := range 180 {
		other = append(other, stranger.Text(cidN(1000+i), "title", "other", base+1000+uint64(i)))
	}
	// The plugin writes locally (vouched for); the stranger's claims came
	// from a peer (a local write would make it a local writer, vouched for).
	for _, batch := range []struct {
		claims []store.Claim
		submit func(context.Context, []store.Claim) ([]store.Result, error)
	}{
		{mine, n.SubmitClaims},
		{other, func(ctx context.Context, c []store.Claim) ([]store.Result, error) {
			return n.store.Submit(ctx, c, store.SubmitOptions{Origin: store.OriginPeer})
		}},
	} {
		res, err := batch.submit(ctx, batch.claims)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Outcome == store.Rejected {
				t.Fatalf("rejected: %v", r.Err)
			}
		}
	}
	const want = 1 + 60 // the vouch for the plugin and its claims
	if got, err := n.joinerShare(ctx); err != nil || got != want {
		t.Fatalf("exact count = %d, %v; want %d", got, err, want)
	}
	exact, sample := pairCountExact, pairCountSample
	t.Cleanup(func() { pairCountExact, pairCountSample = exact, sample })
	pairCountExact, pairCountSample = 10, 40
	total := n.store.SyncSet().Len()
	for range 5 {
		got, err := n.joinerShare(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slack := int64(2*total/pairCountSample + 1); got < want-slack || got > want+slack {
			t.Fatalf("estimate %d of %d claims; want %d ± %d", got, total, want, slack)
		}
	}
}

func mustSigner(t *testing.T) *store.Signer {
	t.Helper()
	s, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func cidN(i int) string { return store.MidhashCID(fmt.Appendf(nil, "%032d", i)) }
