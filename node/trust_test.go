package node_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// End-to-end trust between homes on loopback (issue 5). Auto-trust of local
// writers and trusting a home's node uid are covered in node_test.go.

// submitAccepted writes claims through the node's local API path and fails the
// test unless every one is accepted.
func submitAccepted(t *testing.T, n *node.Node, claims ...store.Claim) {
	t.Helper()
	res, err := n.SubmitClaims(context.Background(), claims)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome == store.Rejected {
			t.Fatalf("claim %d (%s %s): %v", i, claims[i].CID, claims[i].Key, r.Err)
		}
	}
}

// lacksKey is nil when the store's merged view has no key on cid.
func lacksKey(ctx context.Context, st *store.Store, cid, key string) error {
	rec, err := st.Record(ctx, cid, "")
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if v, ok := rec.Fields[key]; ok {
		return fmt.Errorf("%s = %q, want no value", key, v)
	}
	return nil
}

// holdsNoneOf fails the test when the store's sync set (what the node stores
// and forwards) holds one of the claims.
func holdsNoneOf(t *testing.T, st *store.Store, what string, claims ...store.Claim) {
	t.Helper()
	<-st.SyncReady()
	for _, c := range claims {
		if st.SyncSet().Has(store.SyncItem{TS: c.TS, ID: c.ID()}) {
			t.Fatalf("%s: the node holds %s %s by %s", what, c.CID, c.Key, c.UID)
		}
	}
}

// storeFromPeer stores claims on n as if a peer had sent them: not a
// local write, so no auto-trust.
func storeFromPeer(t *testing.T, n *node.Node, claims ...store.Claim) {
	t.Helper()
	res, err := n.Store().Submit(context.Background(), claims, store.SubmitOptions{Origin: store.OriginPeer})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome == store.Rejected {
			t.Fatalf("claim %d (%s %s): %v", i, claims[i].CID, claims[i].Key, r.Err)
		}
	}
}

// pairedHomes opens two homes, b bootstrapping through a, each trusting the
// other's node uid.
func pairedHomes(t *testing.T) (a, b *node.Node) {
	t.Helper()
	a = openNode(t, testConfig(t, dataDir(t, "a")))
	return a, joinHome(t, a, testConfig(t, dataDir(t, "b")))
}

// TestTrust_StrangerIgnoredThenCaughtUp: home A holds a stranger's claims
// (A trusts it directly; it writes at its own home, so A vouches for it
// nowhere). Home B, paired with A,
// refuses them by sync and by gossip while A's own plugin's claims arrive;
// once B's owner trusts the stranger, its earlier claims arrive by catch-up,
// without a restart.
func TestTrust_StrangerIgnoredThenCaughtUp(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig(t, dataDir(t, "a")))
	stranger, pluginA := signer(t), signer(t)
	if err := a.Trust(ctx, stranger.UID()); err != nil {
		t.Fatal(err)
	}
	// The stranger writes at its own home S, which A does not trust: A
	// gets its claims from S (a local write at A would make it A's local
	// writer, vouched for).
	scfg := testConfig(t, dataDir(t, "s"))
	scfg.Bootstrap = a.Addrs()[:1]
	s := openNode(t, scfg)
	atA := func(c store.Claim) {
		t.Helper()
		submitAccepted(t, s, c)
		waitFor(t, 30*time.Second, "the stranger's claim on A", func() error {
			return hasField(ctx, a.Store(), c.CID, c.Key, c.Text())
		})
	}
	ts := nowMS() - 10_000
	// Before B exists: only sync can carry these.
	early := stranger.Text(testCID(40), "title", "early", ts)
	atA(early)
	submitAccepted(t, a, pluginA.Text(testCID(41), "title", "marker", ts))

	b := joinHome(t, a, testConfig(t, dataDir(t, "b")))
	// The session that brought the marker offered the stranger's claim too.
	waitFor(t, 30*time.Second, "A's plugin claim on B by sync", func() error {
		return hasField(ctx, b.Store(), testCID(41), "title", "marker")
	})
	holdsNoneOf(t, b.Store(), "sync", early)

	// Live: gossip (and the periodic syncs) offer the next one.
	live := stranger.Text(testCID(42), "title", "live", nowMS())
	atA(live)
	submitAccepted(t, a, pluginA.Text(testCID(43), "title", "marker 2", nowMS()))
	waitFor(t, 30*time.Second, "A's second plugin claim on B", func() error {
		return hasField(ctx, b.Store(), testCID(43), "title", "marker 2")
	})
	holdsNoneOf(t, b.Store(), "gossip", early, live)
	for _, c := range []string{testCID(40), testCID(42)} {
		if err := lacksKey(ctx, b.Store(), c, "title"); err != nil {
			t.Fatalf("B's merged view shows the stranger: %v", err)
		}
	}

	if err := b.Trust(ctx, stranger.UID()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the stranger's earlier claims on B by catch-up", func() error {
		if err := hasField(ctx, b.Store(), testCID(40), "title", "early"); err != nil {
			return err
		}
		return hasField(ctx, b.Store(), testCID(42), "title", "live")
	})
}

// signEach signs one claim per signer in parallel: sign(i, signer i).
func signEach(signers []*store.Signer, sign func(i int, s *store.Signer) store.Claim) []store.Claim {
	out := make([]store.Claim, len(signers))
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(signers); i += workers {
				out[i] = sign(i, signers[i])
			}
		})
	}
	wg.Wait()
	return out
}

// TestTrust_SybilsCannotOutvote: 50 untrusted signers vote another title
// for a record one trusted signer wrote, and link it to a second record,
// through an open archive node, by sync and then by gossip. The list home
// keeps the trusted title and both records apart; it stores none of their
// claims.
func TestTrust_SybilsCannotOutvote(t *testing.T) {
	ctx := context.Background()
	acfg := testConfig(t, dataDir(t, "archive"))
	acfg.Trust = store.TrustOpen // keeps and relays every valid claim
	archive := openNode(t, acfg)

	x, y := testCID(50), testCID(51)
	plugin, marker := signer(t), signer(t)
	sybils := make([]*store.Signer, 50)
	for i := range sybils {
		sybils[i] = signer(t)
	}
	ts := nowMS() - 10_000
	// Before the home connects: these reach it by sync only.
	votes := signEach(sybils, func(i int, s *store.Signer) store.Claim {
		return s.Text(x, "title", "Sybil", ts+1)
	})
	links := signEach(sybils, func(i int, s *store.Signer) store.Claim {
		return s.Text(x, store.LinkPrefix+y, "true", ts+1)
	})
	bad := append(votes, links...)
	submitAccepted(t, archive, bad...)
	submitAccepted(t, archive, marker.Text(testCID(52), "title", "marker", ts+2))

	hcfg := testConfig(t, dataDir(t, "home"))
	hcfg.Bootstrap = archive.Addrs()[:1]
	home := openNode(t, hcfg)
	submitAccepted(t, home, plugin.Text(x, "title", "Heat", ts), plugin.Text(y, "title", "Ronin", ts))
	if err := home.Trust(ctx, marker.UID()); err != nil {
		t.Fatal(err)
	}

	check := func(what string, bad []store.Claim) {
		t.Helper()
		rx, err := home.Store().Record(ctx, x, "")
		if err != nil {
			t.Fatal(err)
		}
		ry, err := home.Store().Record(ctx, y, "")
		if err != nil {
			t.Fatal(err)
		}
		if rx.Fields["title"] != "Heat" || ry.Fields["title"] != "Ronin" {
			t.Fatalf("%s: titles %q and %q, want Heat and Ronin", what, rx.Fields["title"], ry.Fields["title"])
		}
		if rx.RID == ry.RID || !slices.Equal(rx.CIDs, []string{x}) {
			t.Fatalf("%s: the sybils joined the records: %v and %v", what, rx.CIDs, ry.CIDs)
		}
		holdsNoneOf(t, home.Store(), what, bad...)
	}
	// The session that brought the marker offered the sybils' claims too.
	waitFor(t, 30*time.Second, "the marker on the home", func() error {
		return hasField(ctx, home.Store(), testCID(52), "title", "marker")
	})
	check("by sync", bad)

	// Live: newer votes (each would replace its signer's older one) by
	// gossip and the periodic syncs, then the marker again.
	again := signEach(sybils, func(i int, s *store.Signer) store.Claim {
		return s.Text(x, "title", "Sybil again", nowMS())
	})
	submitAccepted(t, archive, again...)
	submitAccepted(t, archive, marker.Text(testCID(52), "title", "marker 2", nowMS()))
	waitFor(t, 30*time.Second, "the second marker on the home", func() error {
		return hasField(ctx, home.Store(), testCID(52), "title", "marker 2")
	})
	check("live", append(bad, again...))
}

// TestTrust_DistrustRemovesVotes: home A sees a plugin of home B (trusted
// through B's vouch) win a title and hold the only year. When A's owner
// distrusts that plugin, A's merged view shows its own plugin's title and
// loses the year at once; the plugin's claims leave A's sync set (A no
// longer forwards them), and its new claims are refused.
func TestTrust_DistrustRemovesVotes(t *testing.T) {
	ctx := context.Background()
	a, b := pairedHomes(t)
	x, y := testCID(60), testCID(62)
	pluginA, bad, good := signer(t), signer(t), signer(t)
	ts := nowMS() - 10_000
	submitAccepted(t, a, pluginA.Text(x, "title", "Heat", ts+5), pluginA.Text(y, "title", "Ronin", ts+6))
	// One vote each: the oldest vote wins the tie. The vandal also joins x
	// to another record: pluginA's newer title on y is then its vote for x.
	old := []store.Claim{bad.Text(x, "title", "Vandalised", ts), bad.Text(x, "year", "1066", ts), bad.Text(x, "cids/"+y, "true", ts)}
	submitAccepted(t, b, old...)
	waitFor(t, 30*time.Second, "B's plugin's votes on A", func() error {
		if err := hasField(ctx, a.Store(), x, "title", "Vandalised"); err != nil {
			return err
		}
		if err := hasField(ctx, a.Store(), y, "cids/"+x, "true"); err != nil {
			return err
		}
		return hasField(ctx, a.Store(), x, "year", "1066")
	})

	if err := a.Distrust(ctx, bad.UID()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the distrusted votes gone from A's merged view", func() error {
		if err := hasField(ctx, a.Store(), x, "title", "Heat"); err != nil {
			return err
		}
		if err := hasField(ctx, a.Store(), y, "title", "Ronin"); err != nil {
			return err
		}
		if err := lacksKey(ctx, a.Store(), y, "cids/"+x); err != nil {
			return err // the vandal's link no longer joins the two
		}
		return lacksKey(ctx, a.Store(), x, "year")
	})
	holdsNoneOf(t, a.Store(), "after distrust", old...)

	// Its new claims: B still trusts it and sends them; A refuses them.
	newer := bad.Text(x, "title", "Vandalised again", nowMS())
	submitAccepted(t, b, newer)
	submitAccepted(t, b, good.Text(testCID(61), "title", "marker", nowMS()))
	waitFor(t, 30*time.Second, "B's other plugin's claim on A", func() error {
		return hasField(ctx, a.Store(), testCID(61), "title", "marker")
	})
	holdsNoneOf(t, a.Store(), "new claims after distrust", append(old, newer)...)
	if err := hasField(ctx, a.Store(), x, "title", "Heat"); err != nil {
		t.Fatal(err)
	}
	if err := lacksKey(ctx, a.Store(), x, "year"); err != nil {
		t.Fatal(err)
	}
}

// TestTrust_UndoneDistrustVouchesAgain: A's owner distrusts A's own plugin
// (A withdraws its vouch, so B stops trusting it), then trusts it again:
// A vouches again, and B accepts the plugin's new and earlier claims. Before,
// the undo stayed local: B ignored the plugin for good.
func TestTrust_UndoneDistrustVouchesAgain(t *testing.T) {
	ctx := context.Background()
	a, b := pairedHomes(t)
	plugin := signer(t)
	x, y := testCID(70), testCID(71)
	submitAccepted(t, a, plugin.Text(x, "title", "Heat", nowMS()))
	waitFor(t, 30*time.Second, "A's plugin's claim on B", func() error {
		return hasField(ctx, b.Store(), x, "title", "Heat")
	})

	if err := a.Distrust(ctx, plugin.UID()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "B stops trusting the plugin", func() error {
		if b.Store().Trusted(plugin.UID()) {
			return errNo
		}
		return lacksKey(ctx, b.Store(), x, "title")
	})

	if err := a.Trust(ctx, plugin.UID()); err != nil {
		t.Fatal(err)
	}
	submitAccepted(t, a, plugin.Text(y, "title", "Ronin", nowMS()))
	waitFor(t, 30*time.Second, "B trusts the plugin again, old and new claims", func() error {
		if !b.Store().Trusted(plugin.UID()) {
			return errors.New("B does not trust the plugin")
		}
		if err := hasField(ctx, b.Store(), y, "title", "Ronin"); err != nil {
			return err
		}
		return hasField(ctx, b.Store(), x, "title", "Heat")
	})
	// Trusting a uid the node never vouched for signs no vouch.
	other := signer(t)
	if err := a.Trust(ctx, other.UID()); err != nil {
		t.Fatal(err)
	}
	list, err := a.TrustList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Trusted {
		if e.UID == other.UID() && len(e.VouchedBy) > 0 {
			t.Fatalf("trust add of a stranger vouched for it: %+v", e)
		}
	}
}

// TestTrust_InterestNodeTrustAtRunTime: an interest-mode node trusts a
// connected home at run time. It fetches that home's vouches and its remote
// lookups then accept the home's plugin, without a restart and without
// waiting for a periodic interest fetch (an hour away here). Before the
// trust, the lookup's 404 says the peers' claims were refused, not that no
// peer knows the cid.
func TestTrust_InterestNodeTrustAtRunTime(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig(t, dataDir(t, "a")))
	plugin := signer(t)
	cid := testCID(80)
	submitAccepted(t, a, plugin.Text(cid, "title", "Only A", nowMS()))

	cfg := testConfig(t, dataDir(t, "h"))
	cfg.Replicate = node.ReplicateInterest
	cfg.SyncInterval = time.Hour
	cfg.Bootstrap = a.Addrs()[:1]
	h := openNode(t, cfg)
	waitFor(t, 30*time.Second, "h connected to A", func() error {
		if peers, err := h.SwarmPeers(ctx); err != nil || len(peers) == 0 {
			return errNo
		}
		return nil
	})
	lookup := func() (store.Record, error) {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return h.RemoteRecord(lctx, cid, "")
	}
	_, err := lookup()
	if !errors.Is(err, store.ErrNotFound) || !errors.Is(err, swarm.ErrOnlyUntrusted) {
		t.Fatalf("lookup before trusting A = %v, want not found: only untrusted signers", err)
	}

	if err := h.Trust(ctx, a.UID()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "h trusts A's plugin", func() error {
		if !h.Store().Trusted(plugin.UID()) {
			return errNo
		}
		return nil
	})
	rec, err := lookup()
	if err != nil || rec.Fields["title"] != "Only A" {
		t.Fatalf("lookup after trusting A = %+v, %v", rec.Fields, err)
	}
}
