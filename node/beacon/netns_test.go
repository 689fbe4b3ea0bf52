//go:build linux

package beacon

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/net/ipv4"

	"github.com/metanode/metanode/internal/netnstest"
)

// The namespace of the beacon tests: a veth pair on 10.77.0.0/24 with
// multicast, and one on 10.78.0.0/24 without (the beacon must neither
// join nor send there).
var netnsSetup = []string{
	"ip link add v0 type veth peer name v1",
	"ip addr add 10.77.0.1/24 dev v0", "ip addr add 10.77.0.2/24 dev v1",
	"ip link set v0 up", "ip link set v1 up",
	"ip link add w0 type veth peer name w1",
	"ip link set w0 multicast off", "ip link set w1 multicast off",
	"ip addr add 10.78.0.1/24 dev w0", "ip addr add 10.78.0.2/24 dev w1",
	"ip link set w0 up", "ip link set w1 up",
}

// coreResources is what a core advertises: its /urls block as data.urls,
// built for the interface's address.
func coreResources(local netip.Addr) []Resource {
	api := "http://" + net.JoinHostPort(local.String(), "9000")
	data, _ := json.Marshal(map[string]any{"urls": map[string]string{"hostname": "meta-core", "apiUrl": api, "baseUrl": api}})
	return []Resource{{ID: "core", Caps: []string{CapCore}, Endpoints: map[string]string{"http": api}, Data: data}}
}

func openBeacon(t *testing.T, cfg Config) *Beacon {
	t.Helper()
	b := New(cfg)
	if err := b.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// peer is a service's socket in the namespace: it sends on v1 and reads
// what comes to its own port, or to the group's port when it listens.
type peer struct {
	conn net.PacketConn
	pc   *ipv4.PacketConn
}

func newPeer(t *testing.T, addr string, joinGroup bool) *peer {
	t.Helper()
	lc := net.ListenConfig{Control: shareAddr}
	conn, err := lc.ListenPacket(context.Background(), "udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	p := &peer{conn: conn, pc: ipv4.NewPacketConn(conn)}
	v1, err := net.InterfaceByName("v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.pc.SetMulticastInterface(v1); err != nil {
		t.Fatal(err)
	}
	if joinGroup {
		if err := p.pc.JoinGroup(v1, &net.UDPAddr{IP: net.ParseIP("239.255.99.1")}); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func (p *peer) send(t *testing.T, to string, body []byte) {
	t.Helper()
	dst, err := net.ResolveUDPAddr("udp4", to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.pc.WriteTo(body, nil, dst); err != nil {
		t.Fatal(err)
	}
}

// next reads datagrams until one parses and satisfies ok, for at most d.
func (p *peer) next(t *testing.T, d time.Duration, what string, ok func(Message) bool) Message {
	t.Helper()
	deadline := time.Now().Add(d)
	buf := make([]byte, 2*MaxDatagram)
	for {
		_ = p.conn.SetReadDeadline(deadline)
		n, _, err := p.conn.ReadFrom(buf)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if m, err := Parse(buf[:n]); err == nil && ok(m) {
			return m
		}
	}
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// count is the beacon's counter of datagrams with fate.
func count(b *Beacon, fate string) float64 {
	var m dto.Metric
	if err := b.fates.WithLabelValues(fate).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBeacon_Netns: a core's beacon in a private network namespace, met
// as the meta services meet it. It joins and sends only on the
// interfaces with multicast; a probe wanting metamesh.core is answered
// by unicast with data.urls for the interface it came in on; the advertise
// repeats every interval and a clean stop sends a bye; another node's
// advertise and bye come and go in Neighbors. Garbage, an oversized
// datagram and this node's own echo change nothing and are counted.
func TestBeacon_Netns(t *testing.T) {
	if !netnstest.Enter(t, netnsSetup...) {
		return
	}
	b := openBeacon(t, Config{Instance: "core-1", Interval: 300 * time.Millisecond, Resources: coreResources})
	if got := slices.Sorted(slices.Values(b.Interfaces())); !slices.Equal(got, []string{"v0", "v1"}) {
		t.Fatalf("the beacon uses %v, want the multicast interfaces v0 and v1", got)
	}

	// A service listening on the group hears the advertise, again and again.
	listener := newPeer(t, ":9099", true)
	first := time.Now()
	for time.Since(first) < 250*time.Millisecond { // one interval later, another
		m := listener.next(t, 5*time.Second, "the periodic advertise", func(m Message) bool {
			return m.Type == TypeAdvertise && m.Node.Instance == "core-1"
		})
		if len(m.Resources) != 1 || !m.Resources[0].Matches(CapCore) {
			t.Fatalf("advertise resources %+v", m.Resources)
		}
	}

	// A probe for the core, from a service's ephemeral port: a unicast
	// reply whose apiUrl is an address of the interface it came in on.
	prober := newPeer(t, "10.77.0.2:0", false)
	prober.send(t, DefaultGroup, mustJSON(t, Message{Proto: Proto, V: Version, Type: TypeProbe, From: "stremio-1", Want: []string{CapCore}}))
	reply := prober.next(t, 5*time.Second, "the probe's reply", func(m Message) bool { return m.Type == TypeAdvertise })
	var data struct {
		URLs map[string]string `json:"urls"`
	}
	if err := json.Unmarshal(reply.Resources[0].Data, &data); err != nil {
		t.Fatal(err)
	}
	if api := data.URLs["apiUrl"]; api != "http://10.77.0.1:9000" && api != "http://10.77.0.2:9000" {
		t.Fatalf("the reply's data.urls.apiUrl is %q: want an address on the probe's network", api)
	}
	// A probe that wants something else is not answered.
	before := count(b, "probe_not_wanted")
	prober.send(t, DefaultGroup, mustJSON(t, Message{Proto: Proto, V: Version, Type: TypeProbe, From: "stremio-1", Want: []string{"metamesh.transport/*"}}))
	waitUntil(t, 5*time.Second, "the unwanted probe counted", func() bool {
		return count(b, "probe_not_wanted") > before
	})

	// Another node's advertise and bye.
	sortNode := &NodeInfo{Name: "meta-sort", Instance: "sort-1"}
	svc := []Resource{{ID: "service", Caps: []string{"metamesh.service/meta-sort"}, Endpoints: map[string]string{"ui": "http://10.77.0.2:8180"}}}
	prober.send(t, DefaultGroup, mustJSON(t, Message{Proto: Proto, V: Version, Type: TypeAdvertise, Node: sortNode, Resources: svc}))
	waitUntil(t, 5*time.Second, "meta-sort among the neighbours", func() bool { return len(b.Neighbors()) == 1 })
	nb := b.Neighbors()[0]
	if nb.Name != "meta-sort" || nb.Addr != "10.77.0.2" || nb.BaseURL != "http://10.77.0.2:8180" || !slices.Equal(nb.Caps, []string{"metamesh.service/meta-sort"}) {
		t.Fatalf("neighbour %+v", nb)
	}

	// Garbage and an oversized datagram on the port change nothing.
	oversized := mustJSON(t, Message{Proto: Proto, V: Version, Type: TypeAdvertise, Node: &NodeInfo{Name: "big", Instance: "big-1"},
		Resources: []Resource{{ID: strings.Repeat("x", MaxDatagram), Caps: []string{CapCore}}}})
	for _, d := range [][]byte{[]byte("garbage\x00\xff"), []byte(`{"proto":"beacon","v":2,"type":"advertise"}`), oversized} {
		prober.send(t, DefaultGroup, d)
	}
	waitUntil(t, 5*time.Second, "the refused datagrams counted", func() bool {
		return count(b, "oversized") >= 1 && count(b, "not_beacon") >= 2
	})
	if got := b.Neighbors(); len(got) != 1 || got[0].Instance != "sort-1" {
		t.Fatalf("neighbours after garbage: %+v", got)
	}
	if count(b, "own") == 0 {
		t.Error("the beacon's own echo was not seen (and dropped)")
	}

	prober.send(t, DefaultGroup, mustJSON(t, Message{Proto: Proto, V: Version, Type: TypeBye, Node: sortNode}))
	waitUntil(t, 5*time.Second, "meta-sort gone after its bye", func() bool { return len(b.Neighbors()) == 0 })

	// A clean stop says bye.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	listener.next(t, 5*time.Second, "the bye", func(m Message) bool {
		return m.Type == TypeBye && m.Node.Instance == "core-1"
	})
	if err := b.Close(); err != ErrClosed {
		t.Fatalf("second Close: %v", err)
	}
}
