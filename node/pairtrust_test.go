package node_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/swarm"
)

// inviteCode has a make a code and parses it.
func inviteCode(t *testing.T, a *node.Node) node.Invite {
	t.Helper()
	resp, err := a.Invite(context.Background(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := node.ParseInvite(resp.Code)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// TestPair_DistrustedJoinerCannotReplayItsToken: after A's owner distrusts
// the home that paired with A's code (a leaked code, or a home gone bad),
// that home presenting the same unexpired token again is refused and stays
// distrusted: the owner's trust rm is not undone by the peer it blocks.
func TestPair_DistrustedJoinerCannotReplayItsToken(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig(t, dataDir(t, "a")))
	b := openNode(t, testConfig(t, dataDir(t, "b")))
	inv := inviteCode(t, a)
	if _, err := b.Pair(ctx, inv); err != nil {
		t.Fatalf("pair: %v", err)
	}
	if err := a.Distrust(ctx, b.UID()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pair(ctx, inv); !errors.Is(err, swarm.ErrPairRefused) {
		t.Fatalf("the distrusted joiner's replayed token: %v, want refused", err)
	}
	if a.Store().Trusted(b.UID()) || !a.Store().Distrusted(b.UID()) {
		t.Fatalf("after the distrusted joiner replayed its token: trusted=%v distrusted=%v",
			a.Store().Trusted(b.UID()), a.Store().Distrusted(b.UID()))
	}
}

// TestPair_KeepsTheOwnersRows: pairing, and the same joiner retrying its
// token (answered OK), leave a trust row the owner made before as it was
// (trust ls keeps saying "owner"), on both homes: a uid already on the
// list needs no new Trust call.
func TestPair_KeepsTheOwnersRows(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig(t, dataDir(t, "a")))
	b := openNode(t, testConfig(t, dataDir(t, "b")))
	if err := a.Trust(ctx, b.UID()); err != nil {
		t.Fatal(err)
	}
	if err := b.Trust(ctx, a.UID()); err != nil {
		t.Fatal(err)
	}
	row := func(n *node.Node, uid string) string {
		l, err := n.TrustList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Trusted {
			if e.UID == uid {
				return e.Source + " " + e.Note + " " + e.Added.String()
			}
		}
		return "none"
	}
	beforeA, beforeB := row(a, b.UID()), row(b, a.UID())
	inv := inviteCode(t, a)
	for i := range 2 { // the second time is the same joiner retrying
		if _, err := b.Pair(ctx, inv); err != nil {
			t.Fatalf("pair %d: %v", i, err)
		}
		if got := row(a, b.UID()); got != beforeA {
			t.Fatalf("pair %d: the inviter's row for the joiner changed: %s, was %s", i, got, beforeA)
		}
		if got := row(b, a.UID()); got != beforeB {
			t.Fatalf("pair %d: the joiner's row for the inviter changed: %s, was %s", i, got, beforeB)
		}
	}
}

// TestPair_RefusedJoinLeavesTrustAsItWas: a join the inviter refuses (a
// used code) trusts nothing on the joining home, and a distrust of the
// code's uid made before it stands.
func TestPair_RefusedJoinLeavesTrustAsItWas(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig(t, dataDir(t, "a")))
	b := openNode(t, testConfig(t, dataDir(t, "b")))
	c := openNode(t, testConfig(t, dataDir(t, "c")))
	d := openNode(t, testConfig(t, dataDir(t, "d")))
	inv := inviteCode(t, a)
	if _, err := b.Pair(ctx, inv); err != nil { // B uses the code
		t.Fatalf("pair: %v", err)
	}
	if _, err := c.Pair(ctx, inv); !errors.Is(err, swarm.ErrPairRefused) {
		t.Fatalf("a used code paired a second home: %v", err)
	}
	if c.Store().Trusted(a.UID()) {
		t.Fatal("C trusts the inviter after its refused join")
	}
	if err := d.Distrust(ctx, a.UID()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pair(ctx, inv); !errors.Is(err, swarm.ErrPairRefused) {
		t.Fatalf("a used code paired a third home: %v", err)
	}
	if d.Store().Trusted(a.UID()) || !d.Store().Distrusted(a.UID()) {
		t.Fatalf("D's distrust of the inviter did not survive its refused join (trusted=%v)", d.Store().Trusted(a.UID()))
	}
}

// TestPair_CodeUIDMustBeItsPeer: a code whose uid is not the peer its
// addresses name is refused before anything happens: CheckPeer says so,
// and Pair given such an invite neither trusts its uid nor spends the
// token, which the rightful joiner then uses.
func TestPair_CodeUIDMustBeItsPeer(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig(t, dataDir(t, "a")))
	c := openNode(t, testConfig(t, dataDir(t, "c")))
	inv := inviteCode(t, a)
	forged := inv
	forged.UID = signer(t).UID()
	if err := forged.CheckPeer(); !errors.Is(err, node.ErrInvitePeer) {
		t.Fatalf("a code naming another uid than its peer: %v", err)
	}
	if err := inv.CheckPeer(); err != nil {
		t.Fatalf("the genuine code: %v", err)
	}
	if _, err := c.Pair(ctx, forged); !errors.Is(err, node.ErrInvitePeer) {
		t.Fatalf("pair with a code naming another uid than its peer: %v", err)
	}
	if c.Store().Trusted(forged.UID) || a.Store().Trusted(c.UID()) {
		t.Fatalf("a refused code changed trust: C trusts its uid %v, A trusts C %v",
			c.Store().Trusted(forged.UID), a.Store().Trusted(c.UID()))
	}
	if _, err := c.Pair(ctx, inv); err != nil {
		t.Fatalf("the genuine code after the forged one: %v", err)
	}
}
