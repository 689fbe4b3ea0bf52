package swarm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"
	dto "github.com/prometheus/client_model/go"

	"github.com/metanode/metanode/store"
)

// budgetClaims returns n claims of a fresh signer, 1 ms apart.
func budgetClaims(t *testing.T, n, base int) []store.Claim {
	t.Helper()
	w, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	ts := uint64(time.Now().UnixMilli()) - 600_000
	claims := make([]store.Claim, n)
	for i := range claims {
		claims[i] = w.Text(store.MidhashCID(fmt.Appendf(make([]byte, 0, 32), "%032d", base+i)), "title", fmt.Sprint(i), ts+uint64(i))
	}
	return claims
}

func submitLocal(t *testing.T, s *Swarm, claims []store.Claim) {
	t.Helper()
	for c := range slices.Chunk(claims, 1000) {
		if _, err := s.cfg.Store.Submit(t.Context(), c, store.SubmitOptions{Origin: store.OriginLocal}); err != nil {
			t.Fatal(err)
		}
	}
}

// askWholeSet runs one session as the review's attacker did (s12 A2): HELLO,
// one Fingerprint of count 0 over the whole set, END, about 20 bytes for
// the victim's whole set. It returns the claims the answer carried, or the
// victim's ERROR.
func askWholeSet(ctx context.Context, att host.Host, victim peer.ID) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := att.NewStream(ctx, victim, ProtocolSync)
	if err != nil {
		return 0, err
	}
	stop := context.AfterFunc(ctx, func() { _ = st.Reset() })
	defer stop()
	defer func() { _ = st.Reset() }()
	fw, fr := newFrameWriter(st), newFrameReader(st)
	_ = fw.write(appendHello(nil, hello{version: protoVersion}))
	for _, f := range encodeRanges([]rangeEntry{{upper: store.MaxSyncItem, mode: modeFingerprint}}) {
		_ = fw.write(f)
	}
	_ = fw.write([]byte{frameEnd})
	_ = fw.flush() // a refusal may close the stream before the turn is read
	got := 0
	for {
		f, err := fr.next()
		if err != nil {
			return got, fmt.Errorf("read answer: %w", err)
		}
		switch f[0] {
		case frameClaims:
			cs, err := decodeClaims(f[1:], 1<<20)
			if err != nil {
				return got, err
			}
			got += len(cs)
		case frameError:
			return got, decodeError(f)
		case frameEnd:
			return got, nil
		}
	}
}

// askUntilBusy runs whole-set sessions of att with victim, each carrying
// the whole set of n claims, until victim answers busy or max were served;
// it returns how many were served and the claims they carried.
func askUntilBusy(t *testing.T, att host.Host, victim peer.ID, n, max int) (served, sent int) {
	t.Helper()
	for served < max {
		got, err := askWholeSet(t.Context(), att, victim)
		sent += got
		if isBusy(err) {
			return served, sent
		}
		if err != nil {
			t.Fatalf("whole-set session %d: %v", served+1, err)
		}
		if got != n {
			t.Fatalf("whole-set session %d carried %d claims, want %d", served+1, got, n)
		}
		served++
	}
	return served, sent
}

// refusals is the victim's count of budget refusals in role.
func refusals(t *testing.T, s *Swarm, role string) float64 {
	t.Helper()
	var m dto.Metric
	if err := s.met.syncRefused.WithLabelValues(role, "budget").Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func isBusy(err error) bool {
	var re *remoteError
	return errors.As(err, &re) && re.code == errCodeBusy
}

// TestSync_BudgetRefusesRepeatedWholeSet: a peer id asking for the whole
// set session after session (review s12 A2: 772 MB in 20 s from one id) is
// answered ERROR busy, with no strike, once it has taken its budget (about
// one full catch-up, twice the set), also after it reconnects, while it
// keeps asking a cold node catches up in full and a full peer syncs as
// usual.
func TestSync_BudgetRefusesRepeatedWholeSet(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	quiet := func(c *Config) { c.NoAutoSync = true }
	v := openMockSwarm(t, mn, 120, "/ip4/10.1.2.1/tcp/4001", store.TrustOpen, nil, quiet)
	const n = 3000
	claims := budgetClaims(t, n, 0)
	submitLocal(t, v, claims)
	budget := 2*n + resendSlack
	att := connectedPeer(t, mn, v.host.ID())

	// Whole-set sessions one after the other, until refused.
	start := time.Now()
	served, sent := askUntilBusy(t, att, v.host.ID(), n, 10)
	t.Logf("%v: whole-set sessions served before the refusal: %d, %d claims (set %d, budget %d)", time.Since(start).Round(time.Millisecond), served, sent, n, budget)
	if served == 10 {
		t.Fatalf("10 whole-set sessions in a row served (%d claims of a set of %d): no budget", sent, n)
	}
	// The budget, and at most the one session admitted with a little left.
	if served < 2 || sent > budget+n {
		t.Fatalf("%d sessions, %d claims served before the refusal; want at least 2 and at most %d", served, sent, budget+n)
	}
	if got := refusals(t, v, "responder"); got != 1 {
		t.Fatalf("budget refusals counted: %v, want 1", got)
	}
	if v.Struck(att.ID()) {
		t.Fatal("a budget refusal struck the peer: it is busy, not a violation")
	}

	// Reconnecting does not refill it.
	if err := mn.DisconnectPeers(att.ID(), v.host.ID()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); v.host.Network().Connectedness(att.ID()) == network.Connected; {
		if time.Now().After(deadline) {
			t.Fatal("the disconnect never reached the victim")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := mn.ConnectPeers(att.ID(), v.host.ID()); err != nil {
		t.Fatal(err)
	}
	if got, err := askWholeSet(t.Context(), att, v.host.ID()); !isBusy(err) || got != 0 {
		t.Fatalf("after a reconnect: %d claims, %v; want ERROR busy at once", got, err)
	}

	// The attacker keeps asking, from 2 streams at once (its per-peer cap).
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var mu sync.Mutex
	leaked, refused := 0, 0
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				got, err := askWholeSet(ctx, att, v.host.ID())
				mu.Lock()
				leaked += got
				if isBusy(err) {
					refused++
				}
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	// (a) A cold node catches up in full meanwhile.
	c := openMockSwarm(t, mn, 121, "/ip4/10.1.2.2/tcp/4001", store.TrustOpen, nil, quiet)
	// (b) A full peer with a few claims of its own syncs as usual.
	d := openMockSwarm(t, mn, 122, "/ip4/10.1.2.3/tcp/4001", store.TrustOpen, nil, quiet)
	submitLocal(t, d, claims)
	submitLocal(t, d, budgetClaims(t, 5, n))
	for _, o := range []*Swarm{c, d} {
		if _, err := mn.LinkPeers(o.host.ID(), v.host.ID()); err != nil {
			t.Fatal(err)
		}
		if _, err := mn.ConnectPeers(o.host.ID(), v.host.ID()); err != nil {
			t.Fatal(err)
		}
	}
	stc, err := c.SyncWith(t.Context(), v.host.ID())
	if err != nil {
		t.Fatalf("a cold node's catch-up while a peer is refused for its budget: %v", err)
	}
	if got := c.cfg.Store.SyncSet().Len(); got != n {
		t.Fatalf("the cold node holds %d claims after its catch-up, want %d", got, n)
	}
	std, err := d.SyncWith(t.Context(), v.host.ID())
	if err != nil {
		t.Fatalf("a full peer's sync while a peer is refused for its budget: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); v.cfg.Store.SyncSet().Len() != n+5; { // stored after the session
		if time.Now().After(deadline) {
			t.Fatalf("the victim holds %d claims after the full peer's sync, want %d", v.cfg.Store.SyncSet().Len(), n+5)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	t.Logf("%v: cold catch-up: %d claims in %v; full peer: %d round trips; meanwhile the attacker was refused %d times and sent %d claims",
		time.Since(start).Round(time.Millisecond), stc.ClaimsRecvd, stc.Duration.Round(time.Millisecond), std.RoundTrips, refused, leaked)
	if refused == 0 {
		t.Fatal("the attacker's sessions during the honest ones were never refused")
	}
	// Its budget refills about budget/10 min: a few hundred claims in the
	// test's seconds, not another set.
	if leaked >= n {
		t.Fatalf("the attacker was sent %d more claims (a set is %d) while its budget was spent", leaked, n)
	}
}

// TestSyncWith_BudgetRefusalIsRetried: a budget refusal is the peer's
// ERROR busy, so an honest initiator's SyncWith asks again (about 4 s of
// retries) and succeeds once the budget holds claims again.
func TestSyncWith_BudgetRefusalIsRetried(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	quiet := func(c *Config) { c.NoAutoSync = true }
	v := openMockSwarm(t, mn, 123, "/ip4/10.1.2.4/tcp/4001", store.TrustOpen, nil, quiet)
	e := openMockSwarm(t, mn, 124, "/ip4/10.1.2.5/tcp/4001", store.TrustOpen, nil, quiet)
	submitLocal(t, v, budgetClaims(t, 50, 0))
	if _, err := mn.LinkPeers(e.host.ID(), v.host.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := mn.ConnectPeers(e.host.ID(), v.host.ID()); err != nil {
		t.Fatal(err)
	}
	v.syncBudget.spend(e.host.ID(), 1<<20, time.Now())
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond) // no retry within it
	_, err := e.SyncWith(ctx, v.host.ID())
	cancel()
	if !isBusy(err) {
		t.Fatalf("sync with a spent budget: %v, want the peer's ERROR busy", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.SyncWith(t.Context(), v.host.ID())
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	v.syncBudget.mu.Lock()
	delete(v.syncBudget.keys, e.host.ID()) // refilled
	v.syncBudget.mu.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sync once the budget refilled: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("SyncWith never returned")
	}
	if got := e.cfg.Store.SyncSet().Len(); got != 50 {
		t.Fatalf("the initiator holds %d claims, want 50", got)
	}
}

// The budget is the per-session bound of the set as it is now, refills in
// syncBudgetRefill, may go past empty by what a session sent, and a node
// starts no session of its own with a peer whose budget is spent.
func TestSyncBudget_Bucket(t *testing.T) {
	set := 1000
	b := newSyncBudget(func() int { return set })
	t0 := time.Unix(1000, 0)
	size := 2*set + resendSlack
	b.spend("p", size-1, t0)
	if b.empty("p", t0) {
		t.Fatal("empty before its size was spent")
	}
	b.spend("p", set, t0) // a session admitted with 1 left
	if !b.empty("p", t0) {
		t.Fatal("not empty once its size was spent")
	}
	if b.empty("q", t0) {
		t.Fatal("another peer's budget spent")
	}
	// set-1 over the size: empty until that has refilled too.
	over := time.Duration(float64(syncBudgetRefill) * float64(set-1) / float64(size))
	if !b.empty("p", t0.Add(over-time.Second)) {
		t.Fatal("refilled faster than syncBudgetRefill allows")
	}
	if b.empty("p", t0.Add(over+time.Second)) {
		t.Fatal("not refilled after the excess")
	}
	// A set that grew gives a refilled bucket its new size.
	b.spend("r", size, t0)
	set *= 10
	if b.empty("r", t0.Add(syncBudgetRefill/10+time.Second)) {
		t.Fatal("the budget does not follow the set")
	}
}

// A node starts no session with a peer whose budget is spent (its own
// pushes count too: a peer answering "I hold nothing" to each session this
// node starts would otherwise pull the set per connection).
func TestSync_BudgetBoundsInitiatorPushes(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	quiet := func(c *Config) { c.NoAutoSync = true }
	v := openMockSwarm(t, mn, 125, "/ip4/10.1.2.6/tcp/4001", store.TrustOpen, nil, quiet)
	e := openMockSwarm(t, mn, 126, "/ip4/10.1.2.7/tcp/4001", store.TrustOpen, nil, quiet)
	const n = 500
	submitLocal(t, v, budgetClaims(t, n, 0))
	if _, err := mn.LinkPeers(e.host.ID(), v.host.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := mn.ConnectPeers(e.host.ID(), v.host.ID()); err != nil {
		t.Fatal(err)
	}
	st, err := v.SyncWith(t.Context(), e.host.ID()) // v pushes the set to cold e
	if err != nil || st.ClaimsSent != n {
		t.Fatalf("push to a cold peer: %d sent, %v", st.ClaimsSent, err)
	}
	v.syncBudget.mu.Lock()
	spent := v.syncBudget.keys[e.host.ID()].spent
	v.syncBudget.mu.Unlock()
	if spent < n {
		t.Fatalf("pushing %d claims spent %v of the peer's budget", n, spent)
	}
	v.syncBudget.spend(e.host.ID(), 1<<20, time.Now())
	if _, err := v.SyncWith(t.Context(), e.host.ID()); !errors.Is(err, errSyncBudget) {
		t.Fatalf("a session with a peer whose budget is spent: %v, want %v", err, errSyncBudget)
	}
	if got := refusals(t, v, "initiator"); got != 1 {
		t.Fatalf("budget refusals counted: %v, want 1", got)
	}
}

// TestSync_NetBudgetBoundsFreshIDs (review s12 E2): fresh peer ids from
// one network each start with a full bucket of their own, but not of their
// network's: past netBudgetPeers peers' worth, a new id from there is
// refused at once. The test's mocknet addresses are all keyed as one
// public network.
func TestSync_NetBudgetBoundsFreshIDs(t *testing.T) {
	old := budgetNet
	budgetNet = func(ma.Multiaddr) string { return "198.51.100.7/32" }
	t.Cleanup(func() { budgetNet = old })
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	v := openMockSwarm(t, mn, 121, "/ip4/10.1.2.1/tcp/4001", store.TrustOpen, nil, func(c *Config) { c.NoAutoSync = true })
	const n = 200
	submitLocal(t, v, budgetClaims(t, n, 0))
	perNet := netBudgetPeers * (2*n + resendSlack)
	sent, ids := 0, 0
	for ; ids < 4*netBudgetPeers; ids++ {
		// Each id takes what its own bucket allows, then a fresh one comes.
		served, got := askUntilBusy(t, connectedPeer(t, mn, v.host.ID()), v.host.ID(), n, 4)
		sent += got
		if served == 0 { // refused at once: its network's budget
			break
		}
	}
	if ids == 4*netBudgetPeers {
		t.Fatalf("%d fresh ids from one network were sent %d claims, never refused", ids, sent)
	}
	if sent > perNet+2*n { // past empty by one session, and what refilled meanwhile
		t.Errorf("one network was sent %d claims, its budget is %d", sent, perNet)
	}
	var m dto.Metric
	if err := v.met.syncRefused.WithLabelValues("responder", "net_budget").Write(&m); err != nil || m.GetCounter().GetValue() < 1 {
		t.Errorf("net budget refusals counted: %v (%v)", m.GetCounter().GetValue(), err)
	}
	t.Logf("%d fresh ids from one network: %d claims sent (budget %d), then refused", ids, sent, perNet)
}

// TestBudgetNet: public addresses are keyed by /32 or /48; private,
// carrier-grade NAT, link-local and loopback ones have no network budget.
func TestBudgetNet(t *testing.T) {
	for addr, want := range map[string]string{
		"/ip4/198.51.100.7/tcp/4001":            "198.51.100.7/32",
		"/ip6/2001:db8:1:2::5/udp/4001/quic-v1": "2001:db8:1::/48",
		"/ip4/192.168.1.10/tcp/4001":            "",
		"/ip4/100.64.3.4/tcp/4001":              "",
		"/ip4/127.0.0.1/tcp/4001":               "",
		"/ip6/::1/tcp/4001":                     "",
		"/ip6/fe80::1/tcp/4001":                 "",
		"/ip6/64:ff9b::c633:6407/tcp/4001":      "198.51.100.7/32", // NAT64: the IPv4 peer's own
		"/ip6/::ffff:198.51.100.8/tcp/4001":     "198.51.100.8/32",
		"/dns4/example.org/tcp/4001":            "",
	} {
		if got := budgetNet(ma.StringCast(addr)); got != want {
			t.Errorf("%s: %q, want %q", addr, got, want)
		}
	}
}
