package swarm_test

import (
	"context"
	"encoding/binary"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

func peerCID(t testing.TB, uid string) string {
	t.Helper()
	c, err := store.PeerIDCID(uid)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func vouch(t testing.TB, by *store.Signer, uid string, ts uint64) store.Claim {
	return by.Text(peerCID(t, by.UID()), store.VouchPrefix+uid, "true", ts)
}

// holds reports whether n's sync set holds every claim.
func (n *node) holds(claims ...store.Claim) bool {
	<-n.st.SyncReady()
	for i := range claims {
		if !n.st.SyncSet().Has(store.SyncItem{TS: claims[i].TS, ID: claims[i].ID()}) {
			return false
		}
	}
	return true
}

func (n *node) holdsNone(claims ...store.Claim) bool {
	<-n.st.SyncReady()
	return !slices.ContainsFunc(claims, func(c store.Claim) bool {
		return n.st.SyncSet().Has(store.SyncItem{TS: c.TS, ID: c.ID()})
	})
}

// Issue 5: a gossip message that carries a trusted signer's vouch and the
// vouched signer's claims is accepted whole and forwarded (no sync runs
// here, so nothing arrives late by catch-up). A vouch by a signer trusted
// only through a vouch (two hops) or a replayed vouch retracted since does
// not open the door, even for one message.
func TestGossip_VouchInSameMessage(t *testing.T) {
	mn := newMocknet(t)
	noSync := func(c *swarm.Config) { c.NoAutoSync = true }
	pub := newNode(t, nodeOpt{mn: mn, swarm: noSync})                          // a bare relay
	home := newNode(t, nodeOpt{mn: mn, trust: store.TrustList, swarm: noSync}) // trusts V
	far := newNode(t, nodeOpt{mn: mn, trust: store.TrustList, swarm: noSync})  // trusts V, hears only home
	linkConnect(t, mn, pub, home)
	linkConnect(t, mn, home, far)
	waitForMesh(t, []*node{pub, home, far})
	v, p, w, x, r := mustSigner(t), mustSigner(t), mustSigner(t), mustSigner(t), mustSigner(t)
	ctx := context.Background()
	for _, n := range []*node{home, far} {
		if err := n.st.Trust(ctx, v.UID(), "test"); err != nil {
			t.Fatal(err)
		}
	}
	ts := uint64(time.Now().UnixMilli()) - 60_000

	// One message: V vouches for P and for W, then P's claims.
	msg := []store.Claim{vouch(t, v, p.UID(), ts), vouch(t, v, w.UID(), ts)}
	pclaims := signMany(p, 0, 5, ts+1)
	msg = append(msg, pclaims...)
	pub.sw.Publish(msg)
	waitFor(t, 20*time.Second, "P's claims on home and, forwarded, on far", func() bool {
		return home.holds(msg...) && far.holds(msg...)
	})
	if !home.st.Trusted(p.UID()) || !home.st.Trusted(w.UID()) {
		t.Fatal("home does not trust the vouched signers")
	}

	// Two hops: W (trusted through V's vouch) vouches for X in the message
	// that carries X's claims. A marker claim by V tells when home has
	// handled the message.
	marker := v.Text(testCID(900), "title", "two hops", ts+10)
	xclaims := signMany(x, 100, 3, ts+11)
	pub.sw.Publish(append([]store.Claim{vouch(t, w, x.UID(), ts+10), marker}, xclaims...))
	waitFor(t, 20*time.Second, "the two-hop message handled", func() bool { return home.holds(marker) })
	if home.st.Trusted(x.UID()) || !home.holdsNone(xclaims...) {
		t.Fatal("a vouch by a vouched-for signer let its claims in (two hops)")
	}

	// A retracted vouch replayed in one message with R's claims.
	old := vouch(t, v, r.UID(), ts+20)
	retract := v.Retraction(peerCID(t, v.UID()), store.VouchPrefix+r.UID(), ts+21)
	pub.sw.Publish([]store.Claim{retract})
	waitFor(t, 20*time.Second, "the retraction on home", func() bool { return home.holds(retract) })
	marker2 := v.Text(testCID(901), "title", "replay", ts+22)
	rclaims := signMany(r, 200, 3, ts+23)
	pub.sw.Publish(append([]store.Claim{old, marker2}, rclaims...))
	waitFor(t, 20*time.Second, "the replay handled", func() bool { return home.holds(marker2) })
	if home.st.Trusted(r.UID()) || !home.holdsNone(rclaims...) {
		t.Fatal("a replayed, retracted vouch let its signer's claims in")
	}
	// Home publishes the markers again as its own batch (an ignored
	// message's valid claims are still relayed live), never the message.
	waitFor(t, 20*time.Second, "the markers on far", func() bool { return far.holds(marker, marker2) })
	if n := far.sw.GossipClaims("untrusted"); n != 0 {
		t.Fatalf("home forwarded a message with untrusted claims (far saw %v)", n)
	}
	if home.sw.Struck(pub.id) {
		t.Fatal("untrusted claims were held against the relaying peer")
	}
}

func mustSigner(t testing.TB) *store.Signer {
	t.Helper()
	s, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A sync batch that carries a vouch after the vouched signer's claims (in
// (ts, id) order) stores them all in one session: the vouch is applied
// first.
func TestSync_VouchInSameBatch(t *testing.T) {
	mn := newMocknet(t)
	noSync := func(c *swarm.Config) { c.NoAutoSync = true }
	src := newNode(t, nodeOpt{mn: mn, swarm: noSync})
	home := newNode(t, nodeOpt{mn: mn, trust: store.TrustList, swarm: noSync})
	v, p := mustSigner(t), mustSigner(t)
	if err := home.st.Trust(context.Background(), v.UID(), "test"); err != nil {
		t.Fatal(err)
	}
	ts := uint64(time.Now().UnixMilli()) - 60_000
	pclaims := signMany(p, 0, 20, ts)
	src.submit(t, pclaims)
	src.submit(t, []store.Claim{vouch(t, v, p.UID(), ts+100)}) // later than every claim it vouches for
	linkConnect(t, mn, src, home)
	st, err := home.sw.SyncWith(context.Background(), src.id)
	if err != nil {
		t.Fatal(err)
	}
	// Moved, not Recvd: gossipsub may hand home one of src's recent
	// messages (IHAVE from its message cache) before the session stores
	// it, and the session then counts that claim as held, not new.
	if st.Refused != 0 || st.ClaimsMoved != 21 || !home.holds(pclaims...) {
		t.Fatalf("one session: %+v; home holds P's claims: %v", st, home.holds(pclaims...))
	}
}

// Issue 5: claims a node's interest filter drops are neutral in sync,
// gossip and fetch: not refused (a later interest may want them), not
// invalid, never held against the peer.
func TestNotInterested_Neutral(t *testing.T) {
	mn := newMocknet(t)
	noSync := func(c *swarm.Config) { c.NoAutoSync = true }
	full := newNode(t, nodeOpt{mn: mn, swarm: noSync})
	var keep []string
	for i := range 10 {
		keep = append(keep, testCID(i), testCID(100+i))
	}
	picky := newNode(t, nodeOpt{mn: mn, swarm: func(c *swarm.Config) {
		c.NoAutoSync = true
		c.Store = &interestStore{Store: c.Store.(*store.Store), cids: keep, reject: swarm.ErrNotInterested}
	}})
	w := mustSigner(t)
	ts := uint64(time.Now().UnixMilli()) - 60_000
	// Stored without publishing: a gossip batch leaving after the link
	// would deliver the claims of interest before the sync this checks.
	if _, err := full.st.Submit(context.Background(), signMany(w, 0, 30, ts), store.SubmitOptions{Origin: store.OriginLocal}); err != nil { // 10 of interest
		t.Fatal(err)
	}
	linkConnect(t, mn, full, picky)
	waitForMesh(t, []*node{full, picky})

	st, err := picky.sw.SyncWith(context.Background(), full.id)
	if err != nil {
		t.Fatal(err)
	}
	if st.ClaimsRecvd != 10 || st.Uninterested != 20 || st.Refused != 0 || st.Invalid != 0 {
		t.Fatalf("sync: %+v", st)
	}

	live := signMany(w, 100, 20, ts+100) // by gossip: 10 of interest
	full.submit(t, live)
	waitFor(t, 20*time.Second, "the gossiped claims of interest", func() bool { return picky.holds(live[:10]...) })

	if _, err := picky.sw.Lookup(context.Background(), testCID(20)); err == nil {
		t.Fatal("a lookup of a cid the filter drops reported claims stored")
	}

	if n, _ := picky.setOf(); n != 20 {
		t.Fatalf("picky holds %d claims, want 20", n)
	}
	if picky.sw.RefusedLen() != 0 {
		t.Fatalf("%d dropped claims remembered as refused", picky.sw.RefusedLen())
	}
	if picky.sw.Struck(full.id) {
		t.Fatal("the peer was penalised for claims the filter dropped")
	}
}

// countingStore records the cids peers fetch from it.
type countingStore struct {
	*store.Store
	mu    sync.Mutex
	asked []string
}

func (s *countingStore) FetchClaims(ctx context.Context, cid string) ([]store.Claim, error) {
	s.mu.Lock()
	s.asked = append(s.asked, cid)
	s.mu.Unlock()
	return s.Store.FetchClaims(ctx, cid)
}

func (s *countingStore) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.asked
	s.asked = nil
	return out
}

// Issue 5: a node with a huge interest list asks one peer for a bounded
// number of cids per interest fetch, always the head of its list (the
// peer-id cids of the signers it trusts directly) and a window of the rest.
func TestInterest_FetchBounded(t *testing.T) {
	mn := newMocknet(t)
	var cs *countingStore
	peerNode := newNode(t, nodeOpt{mn: mn, swarm: func(c *swarm.Config) {
		c.NoAutoSync = true
		cs = &countingStore{Store: c.Store.(*store.Store)}
		c.Store = cs
	}})
	cids := make([]string, swarm.MaxInterestCIDs+1000)
	for i := range cids {
		cids[i] = testCID(i)
	}
	lean := newNode(t, nodeOpt{mn: mn, swarm: func(c *swarm.Config) {
		c.NoAutoSync = true
		c.Interest = func(context.Context) ([]string, error) { return cids, nil }
	}})
	linkConnect(t, mn, lean, peerNode)
	lean.sw.FetchInterest(context.Background(), peerNode.id)
	asked := cs.take()
	if len(asked) != swarm.MaxInterestCIDs {
		t.Fatalf("one interest fetch asked for %d cids, want %d", len(asked), swarm.MaxInterestCIDs)
	}
	slices.Sort(asked)
	if len(slices.Compact(asked)) != swarm.MaxInterestCIDs {
		t.Fatal("one interest fetch asked for a cid twice")
	}
	for _, c := range cids[:256] { // the head: one request's worth
		if _, ok := slices.BinarySearch(asked, c); !ok {
			t.Fatalf("the head of the interest list was not asked: %s", c)
		}
	}
}

// Issue 5, defences: claims of a signer a list node does not trust are set
// aside before their signatures are checked, so a peer cannot make the
// node spend verification on claims it would refuse anyway. Seen from
// outside: a push of untrusted claims with broken signatures is refused
// (and remembered), not counted as invalid against the peer.
func TestSync_UntrustedSetAsideUnverified(t *testing.T) {
	mn := newMocknet(t)
	victim := newNode(t, nodeOpt{mn: mn, trust: store.TrustList})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := rawSyncStream(ctx, t, mn, victim)
	stranger := mustSigner(t)
	claims := signMany(stranger, 0, 20, uint64(time.Now().UnixMilli())-1000)
	body := binary.AppendUvarint([]byte{2}, uint64(len(claims)))
	for i := range claims {
		claims[i].Sig[3] ^= 0xff // R, not S: still canonical
		body = claims[i].AppendWire(body)
	}
	in := append(frame(1, 1, 0, 0), frame(body...)...) // HELLO, CLAIMS
	in = append(in, frame(5)...)                       // END
	if _, err := st.Write(in); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseWrite()
	_, _ = io.Copy(io.Discard, st) // the victim's answer, then its end of the session
	waitFor(t, 10*time.Second, "the claims to be refused", func() bool { return victim.sw.RefusedLen() == len(claims) })
	if victim.sw.Struck(attackerPeer(st)) {
		t.Fatal("the node verified claims of a signer it does not trust (and blamed the peer)")
	}
	if n, _ := victim.setOf(); n != 0 {
		t.Fatalf("the node stored %d untrusted claims", n)
	}
}

// TestGossip_VouchLeadsEverySplitPart: a new writer's first write bigger
// than one gossip message (a plugin's first scan) is published with its
// vouch in one call; the publisher splits it and the vouch leads every
// part, so a home that trusts the voucher takes every part live. With the
// vouch in the first part only, the home validated the other parts before
// it stored the vouch and refused them. No sync runs.
func TestGossip_VouchLeadsEverySplitPart(t *testing.T) {
	mn := newMocknet(t)
	noSync := func(c *swarm.Config) { c.NoAutoSync = true }
	pub := newNode(t, nodeOpt{mn: mn, swarm: noSync})
	home := newNode(t, nodeOpt{mn: mn, trust: store.TrustList, swarm: noSync})
	linkConnect(t, mn, pub, home)
	waitForMesh(t, []*node{pub, home})
	v, w := mustSigner(t), mustSigner(t)
	if err := home.st.Trust(context.Background(), v.UID(), "test"); err != nil {
		t.Fatal(err)
	}
	ts := uint64(time.Now().UnixMilli()) - 60_000
	msg := append([]store.Claim{vouch(t, v, w.UID(), ts)}, signMany(w, 0, 2100, ts+1)...) // three parts
	pub.sw.Publish(msg)
	waitFor(t, 60*time.Second, "every part on home", func() bool { return home.holds(msg...) })
	if n := home.sw.GossipClaims("untrusted"); n != 0 {
		t.Fatalf("home refused %v claims of the vouched writer", n)
	}
}
