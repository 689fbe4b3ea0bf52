package swarm

import (
	"context"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/metanode/metanode/store"
)

// Review 13, unit: a span another session registered at a bound whose ts
// is MaxUint64 (a hostile peer's id-list entry, wanted) makes a cold node's
// "I hold nothing" range start with that bound after cutting: the first
// bound of a turn cannot encode a ts of MaxUint64 (1+ts-0 wraps to 0, the
// end-of-set marker), so the turn does not decode at the peer.
func TestInflight_CutAtMaxTSBoundIsValidOnTheWire(t *testing.T) {
	r := newInflight()
	h, b := r.begin("hostile", true), r.begin("honest", true)
	ph := turnPlan{wants: []shortID{{ts: math.MaxUint64, pre: [shortIDBytes]byte{1}}}}
	r.claim(h, &ph)
	pb := turnPlan{ranges: []rangeEntry{emptyFP(store.MaxSyncItem)}}
	r.claim(b, &pb)
	var rd rangeDecoder
	for _, f := range encodeRanges(pb.ranges) {
		if _, err := rd.decode(f); err != nil {
			t.Fatalf("the cut turn does not decode at the peer: %v (ranges %+v)", err, shapeOf(pb.ranges))
		}
	}
}

// Review 13, unit: an honest peer's deferral count survives 4,096 other
// peer ids deferring once (the table used to be cleared when full), so a
// peer that can bring many ids (sybils; peer ids cost nothing) cannot give
// the waiting peer maxDeferRounds more waits again and again: the
// documented bound ("at most 3 of its sessions' lifetimes") holds.
func TestInflight_DeferBoundSurvivesManyPeerIDs(t *testing.T) {
	r := newInflight()
	cold := func() turnPlan { return turnPlan{ranges: []rangeEntry{emptyFP(store.MaxSyncItem)}} }
	for range maxDeferRounds {
		hf := r.begin("hostile", true)
		ph := cold()
		r.claim(hf, &ph)
		w := r.begin("honest", true)
		pw := cold()
		r.claim(w, &pw)
		r.end(w)
		r.end(hf)
		r.takeReady()
	}
	if r.begin("honest", true).mayDefer {
		t.Fatal("setup: the honest peer may still defer after maxDeferRounds")
	}
	// Sybil sessions, each deferring once to a live hostile session.
	hf := r.begin("hostile", true)
	ph := cold()
	r.claim(hf, &ph)
	for i := range maxDeferPeers {
		f := r.begin(peer.ID(fmt.Sprintf("sybil-%d", i)), true)
		p := cold()
		r.claim(f, &p)
		r.end(f)
	}
	r.end(hf)
	r.takeReady()
	if r.begin("honest", true).mayDefer {
		t.Fatalf("after %d sybil ids deferred once, the honest peer's sessions wait again (count %d)",
			maxDeferPeers, r.defers["honest"])
	}
}

// Review 13, end to end: a hostile peer lists one fake short id with ts
// MaxUint64 to a cold node and holds the session. The cold node's next
// sessions with an honest full peer must still send valid RANGES frames
// (a cut at that bound made them malformed: the honest peer struck the
// node twice, connection and topic join, and blocked it; the node got
// none of its claims).
func TestInflight_HostileMaxTSWantDoesNotBlockHonestPeers(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	e := mockSwarm(t, mn, 1)
	p := mockSwarm(t, mn, 2)
	w, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	var claims []store.Claim
	ts0 := uint64(time.Now().UnixMilli()) - 100_000
	for i := range 50 {
		claims = append(claims, w.Text(store.MidhashCID(fmt.Appendf(make([]byte, 0, 32), "%032d", i)), "title", fmt.Sprint(i), ts0+uint64(i)))
	}
	if _, err := p.cfg.Store.Submit(context.Background(), claims, store.SubmitOptions{Origin: store.OriginLocal}); err != nil {
		t.Fatal(err)
	}

	hostileMaxTSWant(t, mn, e)
	// The hostile session now holds its want in flight (it never answers).
	if _, err := mn.LinkPeers(e.host.ID(), p.host.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := mn.ConnectPeers(e.host.ID(), p.host.ID()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if e.cfg.Store.SyncSet().Len() == len(claims) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p.Struck(e.host.ID()) {
		t.Fatalf("the honest peer struck the honest node (blocked: %v); the node holds %d of %d claims",
			p.penalties.isBlocked(e.host.ID()), e.cfg.Store.SyncSet().Len(), len(claims))
	}
	if k := e.cfg.Store.SyncSet().Len(); k != len(claims) {
		t.Fatalf("the node holds %d of %d claims", k, len(claims))
	}
}

// hostileMaxTSWant opens a sync session to e as a peer listing one fake
// short id with ts MaxUint64, reads e's answer (a WANT for it) and leaves
// the session open.
func hostileMaxTSWant(t *testing.T, mn mocknet.Mocknet, e *Swarm) {
	_, fw, fr := rawSyncSession(t, mn, e, 60*time.Second)
	fake := rangeEntry{upper: store.MaxSyncItem, mode: modeIDList,
		ids: []shortID{{ts: math.MaxUint64, pre: [shortIDBytes]byte{1}}}}
	if err := fw.write(appendHello(nil, hello{version: protoVersion})); err != nil {
		t.Fatal(err)
	}
	for _, f := range encodeRanges([]rangeEntry{fake}) {
		if err := fw.write(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.write([]byte{frameEnd}); err != nil || fw.flush() != nil {
		t.Fatal("write the turn:", err)
	}
	for {
		f, err := fr.next()
		if err != nil {
			t.Fatalf("the node's answer: %v", err)
		}
		if f[0] == frameEnd {
			break
		}
	}
}

// A peer that holds its session open (a trickle, or nothing at all, up to
// sessionTimeout) delays what other sessions left to it by at most
// maxDeferAge: the waiting peer is run again then (expire, on the
// scheduler's tick), and its new session asks regardless of the old one.
// In virtual time.
func TestInflight_HeldSessionDelaysAtMostMaxDeferAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newInflight()
		cold := func() turnPlan { return turnPlan{ranges: []rangeEntry{emptyFP(store.MaxSyncItem)}} }
		h := r.begin("hostile", true)
		ph := cold()
		r.claim(h, &ph)
		w := r.begin("honest", true)
		pw := cold()
		r.claim(w, &pw)
		if !pw.final() {
			t.Fatal("setup: the honest session did not leave the range to the hostile one")
		}
		r.end(w)
		time.Sleep(maxDeferAge - time.Second)
		r.expire(time.Now())
		if got := r.takeReady(); len(got) != 0 {
			t.Fatalf("ready %v before maxDeferAge", got)
		}
		time.Sleep(2 * time.Second)
		r.expire(time.Now())
		if got := r.takeReady(); len(got) != 1 || got[0] != "honest" {
			t.Fatalf("ready %v after maxDeferAge, want [honest]", got)
		}
		again := r.begin("honest", true)
		pa := cold()
		r.claim(again, &pa)
		if pa.final() || again.skipped != 0 {
			t.Fatalf("the honest peer's new session still defers to the held one: %+v", shapeOf(pa.ranges))
		}
		r.end(again)
		r.end(h)
	})
}
