package swarm

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/metanode/metanode/store/storetest"
)

// One condition, one entry: repeats under one key replace the older entry
// (newest text, newest time: it outlives the hour from its first report)
// and push no other problem out of the maxErrors slots.
func TestErrorLog_RepeatReplaces(t *testing.T) {
	e := newErrorLog()
	t0 := time.Now()
	e.add("other", "another problem", t0)
	n := 2 * maxErrors
	for i := range n {
		e.add("negotiate p a", fmt.Sprintf("mismatch %d", i), t0.Add(time.Duration(i)*time.Second))
	}
	last := t0.Add(time.Duration(n-1) * time.Second)
	if got, want := e.recent(last), []string{"another problem", fmt.Sprintf("mismatch %d", n-1)}; !slices.Equal(got, want) {
		t.Fatalf("recent %q, want %q", got, want)
	}
	if got := e.recent(t0.Add(time.Hour + time.Second)); len(got) != 1 || got[0] != fmt.Sprintf("mismatch %d", n-1) {
		t.Fatalf("an hour after the first report: %q, want the newest repeat only", got)
	}
	e.add("other", "another problem, again", last)
	if got := e.recent(last); got[len(got)-1] != "another problem, again" {
		t.Fatalf("a repeat is not moved to the end: %q", got)
	}
}

// A peer whose handshake fails (the review's run: no key against a private
// node) gave three status entries that differed only in libp2p's inner
// text. The dial path reports one per peer and address, the newest last.
func TestReportNegotiation_OnePerPeerAndAddress(t *testing.T) {
	s := &Swarm{errs: newErrorLog(), log: storetest.Logger(t, 8)}
	p, q := peer.ID("peer-p"), peer.ID("peer-q")
	a := ma.StringCast("/ip4/127.0.0.1/tcp/14201")
	b := ma.StringCast("/ip4/127.0.0.1/tcp/14202")
	report := func(p peer.ID, addr ma.Multiaddr, inner string) {
		s.reportNegotiation(p, addr, fmt.Errorf("%w with %s at %s: %v", ErrCannotNegotiate, p, addr, errors.New(inner)))
	}
	report(q, a, "connection reset by peer")
	for _, inner := range []string{"message did not have trailing newline", "incoming message was too large", "connection reset by peer"} {
		report(p, a, inner)
	}
	report(p, b, "connection reset by peer") // another address: another thing to check
	got := s.errs.recent(time.Now())
	want := []string{
		fmt.Sprintf("%v with %s at %s: connection reset by peer", ErrCannotNegotiate, q, a),
		fmt.Sprintf("%v with %s at %s: connection reset by peer", ErrCannotNegotiate, p, a),
		fmt.Sprintf("%v with %s at %s: connection reset by peer", ErrCannotNegotiate, p, b),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("status errors:\n%q\nwant\n%q", got, want)
	}
}
