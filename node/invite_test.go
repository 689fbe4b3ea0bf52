package node_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// TestNode_InviteAndPair: a code pairs one home (both then trust each
// other's node uid), is refused to a second home and after it expires, and
// the invites file holds no usable token.
func TestNode_InviteAndPair(t *testing.T) {
	ctx := context.Background()
	var skew atomic.Int64 // the inviter's clock moves on to expire invites
	cfgA := testConfig(t, dataDir(t, "a"))
	cfgA.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	a := openNode(t, cfgA)
	b := openNode(t, testConfig(t, dataDir(t, "b")))
	c := openNode(t, testConfig(t, dataDir(t, "c")))

	resp, err := a.Invite(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := node.ParseInvite(resp.Code)
	if err != nil || inv.UID != a.UID() || inv.Swarm != swarm.DefaultName || len(inv.Addrs) == 0 || inv.SwarmKey != "" {
		t.Fatalf("invite %+v: %v", inv, err)
	}
	if _, err := a.Invite(ctx, time.Second); err == nil {
		t.Fatal("an invite for one second was made")
	}

	if _, err := b.Pair(ctx, inv); err != nil {
		t.Fatalf("pair: %v", err)
	}
	if !a.Store().Trusted(b.UID()) || !b.Store().Trusted(a.UID()) {
		t.Fatal("the two homes do not trust each other's node uid after pairing")
	}
	if _, err := b.Pair(ctx, inv); err != nil { // the same joiner may retry
		t.Fatalf("pair again: %v", err)
	}
	if _, err := c.Pair(ctx, inv); !errors.Is(err, swarm.ErrPairRefused) {
		t.Fatalf("a second home with the same code: %v", err)
	}
	if a.Store().Trusted(c.UID()) {
		t.Fatal("a refused home is trusted")
	}

	resp, err = a.Invite(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	skew.Store(int64(2 * time.Hour))
	inv2, _ := node.ParseInvite(resp.Code)
	if _, err := c.Pair(ctx, inv2); !errors.Is(err, swarm.ErrPairRefused) {
		t.Fatalf("an expired code: %v", err)
	}

	b2, err := os.ReadFile(filepath.Join(cfgA.DataDir, node.InvitesFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b2), inv.Token) || strings.Contains(string(b2), inv2.Token) {
		t.Fatal("the invites file holds a usable token")
	}
	if fi, _ := os.Stat(filepath.Join(cfgA.DataDir, node.InvitesFile)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("invites file mode %v", fi.Mode())
	}
}

func TestParseInvite(t *testing.T) {
	s := signer(t)
	good := node.Invite{Swarm: "s", UID: s.UID(), Addrs: []string{peerAddr(t, s)}, Token: "dG9rZW4"}
	if _, err := node.ParseInvite("  " + good.Code() + "\n"); err != nil {
		t.Fatalf("good code: %v", err)
	}
	if err := good.CheckPeer(); err != nil {
		t.Fatalf("good code: %v", err)
	}
	other := good
	other.Addrs = append(other.Addrs, peerAddr(t, signer(t)))
	if err := other.CheckPeer(); !errors.Is(err, node.ErrInvitePeer) {
		t.Fatalf("a code with another peer's address: %v", err)
	}
	for name, inv := range map[string]node.Invite{
		"no token": {Swarm: "s", UID: good.UID, Addrs: good.Addrs},
		"bad uid":  {Swarm: "s", UID: "zNope", Addrs: good.Addrs, Token: good.Token},
		"no addrs": {Swarm: "s", UID: good.UID, Token: good.Token},
		"no swarm": {UID: good.UID, Addrs: good.Addrs, Token: good.Token},
		"long token": {Swarm: "s", UID: good.UID, Addrs: good.Addrs,
			Token: strings.Repeat("A", 400)},
	} {
		if _, err := node.ParseInvite(inv.Code()); !errors.Is(err, node.ErrBadInvite) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, code := range []string{"", "mn2:e30", "mn1:", "mn1:%%%", "mn1:W10"} {
		if _, err := node.ParseInvite(code); !errors.Is(err, node.ErrBadInvite) {
			t.Errorf("%q: %v", code, err)
		}
	}
}

func FuzzParseInvite(f *testing.F) {
	s, err := store.GenerateSigner()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(node.Invite{Swarm: "s", UID: s.UID(), Addrs: []string{peerAddr(f, s)}, Token: "dG9rZW4"}.Code())
	f.Add("mn1:e30")
	f.Add("mn1:")
	f.Fuzz(func(t *testing.T, code string) {
		inv, err := node.ParseInvite(code)
		if err != nil {
			if !errors.Is(err, node.ErrBadInvite) {
				t.Fatalf("error without ErrBadInvite: %v", err)
			}
			return
		}
		if len(inv.TokenBytes()) == 0 || len(inv.Addrs) == 0 || inv.Swarm == "" {
			t.Fatalf("accepted an incomplete code: %+v", inv)
		}
		if again, err := node.ParseInvite(inv.Code()); err != nil || again.Token != inv.Token {
			t.Fatalf("re-encoded code: %+v, %v", again, err)
		}
	})
}

// TestNode_InvitesFileUnreadable: a damaged invites file is set aside (its
// codes stop working) instead of refusing every invite from then on.
func TestNode_InvitesFileUnreadable(t *testing.T) {
	dir := dataDir(t, "a")
	a := openNode(t, testConfig(t, dir))
	if err := os.WriteFile(filepath.Join(dir, node.InvitesFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Invite(context.Background(), time.Hour); err != nil {
		t.Fatalf("invite with a damaged invites file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, node.InvitesFile+".bad")); err != nil {
		t.Fatalf("the damaged file was not set aside: %v", err)
	}
}

// TestNode_PairCountsWhatJoinerAccepts: A is paired with B and holds B's
// plugin's claims and a stranger's (trusted by A directly). A new home C
// joins A: the count A answers is the claims C will accept (A's own uid's
// and its plugin's, through A's vouch), not A's whole sync set, and C
// reaches it.
func TestNode_PairCountsWhatJoinerAccepts(t *testing.T) {
	ctx := context.Background()
	a, b := pairedHomes(t)
	pluginA, pluginB, stranger := signer(t), signer(t), signer(t)
	if err := a.Trust(ctx, stranger.UID()); err != nil {
		t.Fatal(err)
	}
	ts := nowMS() - 10_000
	var mine, theirs []store.Claim
	for i := range 20 {
		mine = append(mine, pluginA.Text(testCID(100+i), "title", "A", ts+uint64(i)))
		theirs = append(theirs, pluginB.Text(testCID(200+i), "title", "B", ts+uint64(i)))
	}
	submitAccepted(t, a, mine...)
	// From a peer: a local write would make the stranger a local writer,
	// vouched for.
	storeFromPeer(t, a, stranger.Text(testCID(300), "title", "S", ts))
	submitAccepted(t, b, theirs...)
	// A's sync set: its vouch for pluginA, 20 + 1 claims, B's vouch and 20.
	waitFor(t, 30*time.Second, "B's plugin's claims on A", func() error {
		if got := a.ClaimCount(); got != 1+20+1+1+20 {
			return fmt.Errorf("A holds %d claims", got)
		}
		return nil
	})

	resp, err := a.Invite(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := node.ParseInvite(resp.Code)
	if err != nil {
		t.Fatal(err)
	}
	c := openNode(t, testConfig(t, dataDir(t, "c")))
	m, err := c.Pair(ctx, inv)
	if err != nil {
		t.Fatal(err)
	}
	if m != 1+20 { // A's vouch for its plugin and the plugin's claims
		t.Fatalf("A answered %d claims; C accepts 21", m)
	}
	waitFor(t, 30*time.Second, "C holds the count A answered", func() error {
		if got := c.ClaimCount(); int64(got) != m {
			return fmt.Errorf("C holds %d of %d claims", got, m)
		}
		return nil
	})
}

// peerAddr is a loopback address of the peer whose key is s.
func peerAddr(t testing.TB, s *store.Signer) string {
	t.Helper()
	id, err := swarm.PeerIDOf(s)
	if err != nil {
		t.Fatal(err)
	}
	return "/ip4/127.0.0.1/tcp/1/p2p/" + id.String()
}
