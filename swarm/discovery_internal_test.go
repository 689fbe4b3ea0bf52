package swarm

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

func mockSwarm(t *testing.T, mn mocknet.Mocknet, i int) *Swarm {
	t.Helper()
	return openMockSwarm(t, mn, 100+i, "/ip4/10.1.0."+string(rune('1'+i))+"/tcp/4001", store.TrustOpen, nil)
}

// openMockSwarm opens a swarm on mn with storetest signer seed, the given
// address, its own store in trust mode; lim replaces the session limits
// when not nil, and opts change the config before Open.
func openMockSwarm(t *testing.T, mn mocknet.Mocknet, seed int, addr string, trust store.TrustMode, lim *sessionLimits, opts ...func(*Config)) *Swarm {
	t.Helper()
	signer := storetest.Signer(seed)
	sk, err := PeerKey(signer)
	if err != nil {
		t.Fatal(err)
	}
	h, err := mn.AddPeer(sk, ma.StringCast(addr))
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.Open(t, store.Config{OwnUID: signer.UID(), Trust: trust})
	cfg := Config{Identity: signer, Store: st, Host: h, Name: "t", SyncInterval: time.Hour,
		Logger: storetest.Logger(t, 8)}
	for _, o := range opts {
		o(&cfg)
	}
	s := New(cfg)
	if lim != nil {
		s.sessionLimits = *lim
	}
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// A LAN peer found by mDNS is dialed by the connector (mDNS itself only
// reports it); blocked peers found again are not.
func TestMDNS_FoundPeerIsDialed(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	a, b, c := mockSwarm(t, mn, 0), mockSwarm(t, mn, 1), mockSwarm(t, mn, 2)
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	mdnsNotifee{a}.HandlePeerFound(peer.AddrInfo{ID: b.host.ID(), Addrs: b.host.Addrs()})
	mdnsNotifee{a}.HandlePeerFound(peer.AddrInfo{ID: a.host.ID(), Addrs: a.host.Addrs()}) // itself: ignored
	deadline := time.Now().Add(10 * time.Second)
	for a.host.Network().Connectedness(b.host.ID()) != network.Connected {
		if time.Now().After(deadline) {
			t.Fatal("the mDNS peer was not dialed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.penalties.strike(c.host.ID(), time.Now())
	a.penalties.strike(c.host.ID(), time.Now())
	if err := a.dial(t.Context(), peer.AddrInfo{ID: c.host.ID(), Addrs: c.host.Addrs()}); err != nil {
		t.Fatal(err) // mocknet has no gater: the connection is made, then kicked
	}
	for a.host.Network().Connectedness(c.host.ID()) == network.Connected {
		if time.Now().After(deadline) {
			t.Fatal("a blocked peer stayed connected")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPeerLimiter(t *testing.T) {
	l := newPeerLimiter(10)
	now := time.Now()
	if !l.allowAt("p", 50, now) { // the burst is five seconds' worth
		t.Fatal("burst refused")
	}
	if l.allowAt("p", 5, now) {
		t.Fatal("over the rate allowed")
	}
	if !l.allowAt("p", 5, now.Add(500*time.Millisecond)) {
		t.Fatal("no refill after half a second")
	}
	if !l.allowAt("q", 10, now) {
		t.Fatal("another peer limited")
	}
}

// A flood of new keys (minted signers) neither grows the limiter past its
// bound nor resets the bucket of a key that keeps flooding; buckets idle
// long enough to have refilled go first.
func TestKeyedLimiter_BoundedKeepsBusyBuckets(t *testing.T) {
	l := newKeyedLimiter[int](10, 64)
	now := time.Unix(1000, 0)
	if !l.allowAt(-1, 50, now) { // the flooder spends its whole burst
		t.Fatal("burst refused")
	}
	for i := range 10_000 {
		now = now.Add(time.Microsecond)
		l.allowAt(i, 1, now)
		if i%7 == 0 && l.allowAt(-1, 1, now) { // the flooder keeps trying
			t.Fatalf("after %d new keys the flooder's bucket was refilled", i)
		}
		if n := l.len(); n > 64 {
			t.Fatalf("%d buckets, bound 64", n)
		}
	}
	// Idle buckets (refilled anyway) are dropped before busy ones.
	l = newKeyedLimiter[int](10, 8)
	l.allowAt(0, 50, now)
	for i := 1; i < 8; i++ {
		l.allowAt(i, 1, now.Add(-time.Minute)) // long idle
	}
	l.allowAt(100, 1, now)
	if l.allowAt(0, 1, now) {
		t.Fatal("the busy bucket was dropped while idle ones were kept")
	}
}

// A peer that spent its gossip budget finds it spent after it disconnects
// and reconnects: reconnecting must not refill it.
func TestPeerLimiter_SurvivesReconnect(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	a, b := mockSwarm(t, mn, 0), mockSwarm(t, mn, 1)
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	if _, err := mn.ConnectPeers(a.host.ID(), b.host.ID()); err != nil {
		t.Fatal(err)
	}
	burst := 5 * a.cfg.GossipRate
	t0 := time.Now() // the clock the budget is read at: no refill however long the rounds take
	if !a.limiter.allowAt(b.host.ID(), burst, t0) || a.limiter.allowAt(b.host.ID(), burst/2, t0) {
		t.Fatal("the limiter does not hold a burst of five seconds")
	}
	deadline := time.Now().Add(10 * time.Second)
	for a.peerStats.connectedSince(b.host.ID()).IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("the connection never reached the swarm")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for range 3 {
		// Disconnected until the swarm has handled it (the DHT or a sync
		// may redial at once).
		deadline = time.Now().Add(10 * time.Second)
		for !a.peerStats.connectedSince(b.host.ID()).IsZero() {
			if err := mn.DisconnectPeers(a.host.ID(), b.host.ID()); err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatal("the disconnect never reached the swarm")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if _, err := mn.ConnectPeers(a.host.ID(), b.host.ID()); err != nil {
			t.Fatal(err)
		}
		for a.peerStats.connectedSince(b.host.ID()).IsZero() {
			if time.Now().After(deadline) {
				t.Fatal("the reconnect never reached the swarm")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if a.limiter.allowAt(b.host.ID(), burst/2, t0) {
		t.Fatal("reconnecting refilled the peer's gossip budget")
	}
}

func TestRefusedSet_BoundedAndGenerations(t *testing.T) {
	r := newRefusedSet(8)
	for i := range 20 {
		r.add(store.SyncItem{TS: uint64(i)}, "stranger", r.generation())
	}
	if n := r.len(); n > 8 || n == 0 || r.signers["stranger"].n != n {
		t.Fatalf("%d items kept (bound 8), the signer counts %d", n, r.signers["stranger"].n)
	}
	gen := r.generation()
	r.forget(func(string) bool { return false })
	r.add(store.SyncItem{TS: 99}, "stranger", gen) // decided before the trust change
	if _, ok := r.items[store.SyncItem{TS: 99}]; ok {
		t.Fatal("a stale refusal was kept")
	}
}

// TestRefusedSet_ForgetsOnlyTrustedSigners (review s12 G F1): a trust
// change forgets the refusals of signers trusted now, and keeps the
// strangers' (forgetting those made every trust change fetch an open
// peer's whole backlog of them again).
func TestRefusedSet_ForgetsOnlyTrustedSigners(t *testing.T) {
	r := newRefusedSet(64)
	for i := range 10 {
		uid := "stranger"
		if i%2 == 0 {
			uid = "friend"
		}
		r.add(store.SyncItem{TS: uint64(i)}, uid, r.generation())
	}
	r.forget(func(uid string) bool { return uid == "friend" })
	got := r.snapshot()
	if len(got) != 5 || len(r.signers) != 1 {
		t.Fatalf("%d refusals kept (%d signers), want the stranger's 5: %v", len(got), len(r.signers), got)
	}
	for _, it := range got {
		if it.TS%2 == 0 {
			t.Fatalf("the friend's refusal %v was kept", it)
		}
	}
}

// The snapshot is sorted, taken again only after a change, and always
// the current set.
func TestRefusedSet_SnapshotSharedUntilChanged(t *testing.T) {
	r := newRefusedSet(64)
	if s := r.snapshot(); len(s) != 0 {
		t.Fatalf("empty set: %v", s)
	}
	for _, ts := range []uint64{5, 1, 3} {
		r.add(store.SyncItem{TS: ts}, "s", r.generation())
	}
	a, b := r.snapshot(), r.snapshot()
	if len(a) != 3 || a[0].TS != 1 || a[2].TS != 5 || &a[0] != &b[0] {
		t.Fatalf("snapshots %v %v: want one sorted slice, shared", a, b)
	}
	r.add(store.SyncItem{TS: 2}, "s", r.generation())
	if c := r.snapshot(); len(c) != 4 || c[1].TS != 2 || len(a) != 3 {
		t.Fatalf("after an add: %v (old %v)", c, a)
	}
	r.forget(func(string) bool { return true })
	if c := r.snapshot(); len(c) != 0 {
		t.Fatalf("after the signer is trusted: %v", c)
	}
}

func TestErrorLog_RecentWithoutRepeats(t *testing.T) {
	e := newErrorLog()
	now := time.Now()
	e.add("a", "a", now.Add(-2*time.Hour))
	e.add("b", "b", now)
	e.add("b", "b", now)
	for i := range maxErrors + 3 {
		x := strings.Repeat("x", i+1)
		e.add(x, x, now)
	}
	got := e.recent(now)
	if len(got) != maxErrors || got[len(got)-1] != strings.Repeat("x", maxErrors+3) {
		t.Fatalf("recent %v", got)
	}
}

// The package imports nothing of this module but store, and its doc says
// what it owns and how it runs.
func TestPackageBoundaries(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if strings.HasPrefix(p, "github.com/metanode/metanode/") && p != "github.com/metanode/metanode/store" {
				t.Errorf("%s imports %s: swarm may import only store", f, p)
			}
		}
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Package swarm", "Concurrency", "never imports the api"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("doc.go does not say %q", want)
		}
	}
}

// TestPenaltyBox_FullTableKeepsOffenders: a table full of peer ids struck
// once makes room by dropping the stalest entry, not by forgiving everyone:
// a peer one strike from a block is still blocked by its next invalid
// delivery after a flood of new ids.
func TestPenaltyBox_FullTableKeepsOffenders(t *testing.T) {
	b := newPenaltyBox(time.Minute)
	now := time.Now()
	offender := peer.ID("offender")
	for i := range maxPenalised - 1 {
		b.strike(peer.ID(fmt.Sprint("flood", i)), now.Add(-5*time.Minute))
	}
	if b.strike(offender, now.Add(-time.Minute)) {
		t.Fatal("blocked after one strike")
	}
	for i := range 10 { // the table is full: each new id evicts one
		b.strike(peer.ID(fmt.Sprint("new", i)), now)
	}
	if len(b.strikes) > maxPenalised {
		t.Fatalf("%d peers tracked, bound %d", len(b.strikes), maxPenalised)
	}
	if !b.strike(offender, now) {
		t.Fatal("the offender's first strike was forgotten when the table filled")
	}
	if !b.isBlocked(offender) {
		t.Fatal("not blocked")
	}
}
