package swarm_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

func newPSK(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestParseSwarmKey(t *testing.T) {
	k := newPSK(t)
	file := "/key/swarm/psk/1.0.0/\n/base16/\n" + hex.EncodeToString(k) + "\n"
	got, err := swarm.ParseSwarmKey(strings.NewReader(file))
	if err != nil || !bytes.Equal(got, k) {
		t.Fatalf("parse: %x, %v", got, err)
	}
	for _, bad := range []string{"", "/key/swarm/psk/1.0.0/\n/base16/\nzz\n", "/key/swarm/psk/2.0.0/\n/bin/\nabc"} {
		if _, err := swarm.ParseSwarmKey(strings.NewReader(bad)); err == nil {
			t.Fatalf("parsed %q", bad)
		}
	}
}

// Promise 7: a private swarm. Nodes with the same key connect (TCP only);
// a node with another key, or none, gets a clear "swarm key mismatch"
// error in seconds, in Connect's error and in Status().Errors, also when
// the peer is one of its bootstrap peers.
func TestPrivateSwarm_KeyMismatch(t *testing.T) {
	key := newPSK(t)
	a := newNode(t, nodeOpt{psk: key})
	st := a.sw.Status()
	if !st.Private {
		t.Fatal("status does not say private")
	}
	for _, addr := range st.Addrs {
		if strings.Contains(addr, "/udp/") {
			t.Fatalf("private node listens on %s (QUIC refuses a swarm key)", addr)
		}
	}
	friend := newNode(t, nodeOpt{psk: key})
	connect(t, friend, a)

	for name, psk := range map[string][]byte{"other key": newPSK(t), "no key": nil} {
		t.Run(name, func(t *testing.T) {
			stranger := newNode(t, nodeOpt{psk: psk})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := stranger.sw.Connect(ctx, a.sw.Addrs()[0])
			if !errors.Is(err, swarm.ErrCannotNegotiate) {
				t.Fatalf("connect with the wrong key: %v, want ErrCannotNegotiate", err)
			}
			if !strings.Contains(err.Error(), "swarm key mismatch") || !strings.Contains(err.Error(), a.id.String()) {
				t.Fatalf("error does not name the problem and the peer: %v", err)
			}
			if errs := stranger.sw.Status().Errors; !slices.ContainsFunc(errs, func(e string) bool {
				return strings.Contains(e, "swarm key mismatch")
			}) {
				t.Fatalf("status errors %q", errs)
			}
		})
	}
	// The same through the bootstrap redialer, with no call from the owner.
	boot := newNode(t, nodeOpt{psk: newPSK(t), swarm: func(c *swarm.Config) { c.Bootstrap = a.sw.Addrs()[:1] }})
	waitFor(t, 20*time.Second, "the bootstrap mismatch to be reported", func() bool {
		return slices.ContainsFunc(boot.sw.Status().Errors, func(e string) bool {
			return strings.Contains(e, "swarm key mismatch") && strings.Contains(e, a.id.String())
		})
	})
}

// Promise 2 end to end on real hosts: a node offline while another takes
// many writes catches up by itself when it comes back (bootstrap redial,
// sync on connect), and gossip carries what is written after.
func TestCatchUp_OfflineWrites(t *testing.T) {
	writes := 10000
	if swarm.RaceEnabled {
		// SQLite under the race detector stores a claim in milliseconds; the
		// protocol path is the same, only the count is smaller.
		writes = 1500
	}
	a := newNode(t, nodeOpt{})
	bootstrap := a.sw.Addrs()[:1]
	b := newNode(t, nodeOpt{swarm: func(c *swarm.Config) { c.Bootstrap = bootstrap }})
	waitFor(t, 20*time.Second, "b to reach its bootstrap peer", func() bool {
		return b.sw.Host().Network().Connectedness(a.id) == network.Connected
	})
	// b goes offline: its swarm stops, its store stays.
	if err := b.sw.Close(); err != nil {
		t.Fatal(err)
	}
	w, _ := store.GenerateSigner()
	ts := uint64(time.Now().UnixMilli()) - uint64(writes) - 10000
	a.submit(t, signMany(w, 0, writes, ts))

	// b comes back with a new swarm on the same store and key.
	b2 := &node{st: b.st, signer: b.signer, id: b.id}
	b2.sw = swarm.New(swarm.Config{Identity: b.signer, Store: b.st, Name: "test", Listen: []string{"/ip4/127.0.0.1/tcp/0"},
		Bootstrap: bootstrap, SyncInterval: time.Hour, Logger: testLog(t)})
	b2.open(t)
	waitSame(t, 5*time.Minute, writes, a, b2)
	waitForMesh(t, []*node{a, b2})
	a.submit(t, signMany(w, writes, 10, ts+uint64(writes)))
	waitSame(t, 30*time.Second, writes+10, a, b2)
}

// Promise 4: on a 6-node swarm, a node asked about a cid finds the holder
// through the DHT although it has no connection to it, fetches, verifies
// and stores its claims. Only the holder trusts the writer (the asker
// starts to just before asking), so no other node can answer and nothing
// reached the asker before.
func TestLookup_ThroughDHT(t *testing.T) {
	// A real handshake under -race on a loaded machine may take more than
	// the 1 s a provider dial gets; then only connected peers are asked.
	swarm.SetLookupDial(t, 10*time.Second)
	// No sync session: the lookup's own dial of the holder would start
	// the connection's catch-up, which may store the claim before the
	// fetch does (the lookup is then found with 0 new claims).
	nodes := make([]*node, 6)
	for i := range nodes {
		nodes[i] = newNode(t, nodeOpt{trust: store.TrustList, swarm: func(c *swarm.Config) { c.DHTServer, c.NoAutoSync = true, true }})
	}
	hub := nodes[0]
	for _, n := range nodes[1:] {
		connect(t, n, hub)
	}
	asker, holder := nodes[1], nodes[5]
	w, _ := store.GenerateSigner()
	if err := holder.st.Trust(context.Background(), w.UID(), "test"); err != nil {
		t.Fatal(err)
	}
	claims := signMany(w, 0, 3, uint64(time.Now().UnixMilli())-1000)
	holder.submit(t, claims)
	cid := claims[1].CID
	waitFor(t, 20*time.Second, "routing tables", func() bool {
		for _, n := range nodes {
			if n.sw.Status().RoutingTable == 0 {
				return false
			}
		}
		return true
	})
	holder.sw.Provide(cid)
	waitFor(t, 20*time.Second, "the holder to provide", func() bool { return holder.sw.Status().Provided > 0 })
	// DHT maintenance may have connected them: cut that connection.
	_ = asker.sw.Host().Network().ClosePeer(holder.id)
	_ = holder.sw.Host().Network().ClosePeer(asker.id)
	if _, err := asker.st.Record(context.Background(), cid, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the asker knows the cid before asking: %v", err)
	}
	if err := asker.st.Trust(context.Background(), w.UID(), "test"); err != nil {
		t.Fatal(err)
	}
	n, err := asker.sw.Lookup(context.Background(), cid)
	if err != nil || n != 1 {
		t.Fatalf("lookup: %d, %v", n, err)
	}
	if c := asker.sw.Counters(); c.LookupsViaDHT != 1 {
		t.Fatalf("the lookup was not answered through the DHT: %+v", c)
	}
	rec, err := asker.st.Record(context.Background(), cid, "")
	if err != nil || rec.Fields["title"] != "title 1" {
		t.Fatalf("record after lookup: %v, %v", rec.Fields, err)
	}
	if _, err := asker.sw.Lookup(context.Background(), testCID(4242)); !errors.Is(err, swarm.ErrNotFound) {
		t.Fatalf("lookup of a cid nobody has: %v", err)
	}
	if st := hub.sw.Status(); st.DHTMode != "server" {
		t.Fatalf("dht mode %q", st.DHTMode)
	}
}

// Discovery: a node provides the cids it already holds claims for by
// itself (the walk over its store, which also renews records before they
// expire), and never more than ProvidePerHr allows (a burst of at most
// ProvidePerHr, then ProvidePerHr an hour).
func TestProvide_WalkBounded(t *testing.T) {
	dhtServer := func(c *swarm.Config) { c.DHTServer = true }
	hub := newNode(t, nodeOpt{swarm: dhtServer})
	holder := newNode(t, nodeOpt{noOpen: true, swarm: func(c *swarm.Config) {
		c.DHTServer, c.ProvidePerHr, c.Bootstrap = true, 20, hub.sw.Addrs()[:1]
	}})
	w, _ := store.GenerateSigner()
	holder.submit(t, signMany(w, 0, 60, uint64(time.Now().UnixMilli())-1000)) // 60 cids, before the swarm opens
	holder.open(t)
	waitFor(t, 60*time.Second, "the holder to provide its cids unasked", func() bool { return holder.sw.Status().Provided > 0 })
	start := time.Now()
	time.Sleep(2 * time.Second) // room for a runaway provider to go past its bound
	// At most the burst, plus what the hourly rate allows since (20/h:
	// nothing within a test).
	limit := int64(20 + 20*time.Since(start).Hours() + 1)
	if n := holder.sw.Status().Provided; n > limit {
		t.Fatalf("%d cids provided, bound %d", n, limit)
	}
}
