package beacon

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/ipv4"
	"golang.org/x/time/rate"
)

// Defaults and bounds.
const (
	DefaultInterval = 10 * time.Second // an unsolicited advertise this often
	LivenessFactor  = 3                // a node unheard for Interval × this is gone
	MaxNeighbors    = 256              // nodes kept; the oldest heard goes first
	// replyRate bounds the unicast replies to probes (a probe is a few
	// dozen bytes, a reply a few hundred: no flood of probes may turn this
	// node into an amplifier on its LAN).
	replyRate  = 20
	replyBurst = 40
)

// ErrClosed is returned by a second Close, and by Open after Close.
var ErrClosed = errors.New("beacon closed")

// Config configures a Beacon. Zero fields take the documented defaults.
type Config struct {
	Name     string // the node's name in datagrams; default "meta-core"
	Instance string // required: this node, unique on the network (its own echoes are dropped by it)
	Version  string
	Group    string        // multicast group and port; default DefaultGroup
	Interval time.Duration // default DefaultInterval

	// Resources builds this node's resources for a datagram that leaves
	// from local, the IPv4 address of the interface it is sent on (or
	// that a probe came in on). Required.
	Resources func(local netip.Addr) []Resource

	// Interfaces lists the candidate interfaces (default net.Interfaces):
	// of those, the beacon uses each that is up, multicast-capable, not
	// loopback and has an IPv4 address.
	Interfaces func() ([]net.Interface, error)

	Logger     *slog.Logger          // default slog.Default()
	Registerer prometheus.Registerer // its counters; nil: none registered
}

// heard is what the beacon keeps of a node it heard.
type heard struct {
	node      NodeInfo
	resources []Resource
	addr      string
	lastSeen  time.Time
}

// iface is an interface the beacon joined and sends on.
type iface struct {
	ifi   net.Interface
	local netip.Prefix // its first IPv4 address and network
}

// Beacon advertises this node's resources and keeps the nodes it hears.
type Beacon struct {
	cfg     Config
	log     *slog.Logger
	group   *net.UDPAddr
	fates   *prometheus.CounterVec
	replies *rate.Limiter

	mu    sync.Mutex
	nodes map[string]*heard // by instance

	sendMu sync.Mutex // SetMulticastInterface and WriteTo go together
	conn   net.PacketConn
	pc     *ipv4.PacketConn
	ifaces []iface

	life   sync.Mutex // Open and Close
	opened bool
	closed bool
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns an unopened beacon; it does no I/O.
func New(cfg Config) *Beacon {
	cfg.Name = cmp.Or(cfg.Name, "meta-core")
	cfg.Group = cmp.Or(cfg.Group, DefaultGroup)
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Interfaces == nil {
		cfg.Interfaces = net.Interfaces
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &Beacon{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "beacon"),
		replies: rate.NewLimiter(replyRate, replyBurst),
		nodes:   make(map[string]*heard),
		fates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metanode_beacon_datagrams_total",
			Help: "Beacon datagrams received, by fate: neighbor (an advertise or bye kept), probe_answered, probe_not_wanted, reply_limited, own (this node's echo), oversized (over 1400 bytes), not_beacon (not beacon v2 JSON).",
		}, []string{"fate"}),
	}
	return b
}

// Open binds the group's port (shared with other listeners on the host),
// joins the group on every eligible interface and starts advertising. ctx
// bounds only Open. No eligible interface is no error: the beacon is
// silent and says so.
func (b *Beacon) Open(ctx context.Context) error {
	b.life.Lock()
	defer b.life.Unlock()
	switch {
	case b.closed:
		return ErrClosed
	case b.opened:
		return errors.New("open beacon: already open")
	case b.cfg.Instance == "" || b.cfg.Resources == nil:
		return errors.New("open beacon: Config.Instance and Config.Resources are required")
	}
	group, err := net.ResolveUDPAddr("udp4", b.cfg.Group)
	if err != nil || !group.IP.IsMulticast() {
		return fmt.Errorf("open beacon: %q is not an IPv4 multicast group and port", b.cfg.Group)
	}
	b.group = group
	if b.cfg.Registerer != nil {
		if err := b.cfg.Registerer.Register(b.fates); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return fmt.Errorf("open beacon: %w", err)
			}
			b.fates = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	lc := net.ListenConfig{Control: shareAddr}
	conn, err := lc.ListenPacket(ctx, "udp4", fmt.Sprintf(":%d", group.Port))
	if err != nil {
		return fmt.Errorf("open beacon: %w", err)
	}
	pc := ipv4.NewPacketConn(conn)
	// TTL 1: discovery never leaves the local network. Loopback on: a
	// service on this very host hears the advertise too.
	if err := pc.SetMulticastTTL(1); err != nil {
		_ = conn.Close()
		return fmt.Errorf("open beacon: %w", err)
	}
	_ = pc.SetMulticastLoopback(true)
	_ = pc.SetControlMessage(ipv4.FlagInterface, true) // which interface a probe came in on, where supported
	b.conn, b.pc = conn, pc
	b.ifaces = b.join()
	b.opened = true
	runCtx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	b.wg.Add(2)
	go b.readLoop(runCtx)
	go b.advertiseLoop(runCtx)
	return nil
}

// join joins the group on each eligible interface and returns those joined.
func (b *Beacon) join() []iface {
	all, err := b.cfg.Interfaces()
	if err != nil {
		b.log.Warn("beacon: cannot list the network interfaces: discovery is silent", "err", err)
		return nil
	}
	var out []iface
	for _, ifi := range all {
		local, ok := eligible(ifi)
		if !ok {
			continue
		}
		if err := b.pc.JoinGroup(&ifi, b.group); err != nil {
			b.log.Warn("beacon: cannot join the group on an interface", "interface", ifi.Name, "group", b.group, "err", err)
			continue
		}
		out = append(out, iface{ifi: ifi, local: local})
	}
	names := make([]string, len(out))
	for i, f := range out {
		names[i] = f.ifi.Name
	}
	if len(out) == 0 {
		b.log.Warn("beacon: no interface is up with multicast and an IPv4 address: services will not find this node by the beacon", "group", b.group)
	} else {
		b.log.Info("beacon listening", "group", b.group, "interfaces", names)
	}
	return out
}

// eligible reports whether the beacon uses ifi, and its first IPv4
// address with its network.
func eligible(ifi net.Interface) (netip.Prefix, bool) {
	if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagMulticast == 0 || ifi.Flags&net.FlagLoopback != 0 {
		return netip.Prefix{}, false
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Prefix{}, false
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.To4() == nil {
			continue
		}
		ip, _ := netip.AddrFromSlice(ipn.IP.To4())
		ones, _ := ipn.Mask.Size()
		return netip.PrefixFrom(ip, ones), true
	}
	return netip.Prefix{}, false
}

// Interfaces names the interfaces the beacon joined and sends on.
func (b *Beacon) Interfaces() []string {
	b.life.Lock()
	defer b.life.Unlock()
	out := make([]string, len(b.ifaces))
	for i, f := range b.ifaces {
		out[i] = f.ifi.Name
	}
	return out
}

// Close multicasts a bye, so neighbours drop this node at once, then stops
// the loops and closes the socket. A second call returns ErrClosed.
func (b *Beacon) Close() error {
	b.life.Lock()
	defer b.life.Unlock()
	if b.closed {
		return ErrClosed
	}
	b.closed = true
	if !b.opened {
		return nil
	}
	b.cancel()
	b.broadcast(func(netip.Addr) Message {
		return Message{Proto: Proto, V: Version, Type: TypeBye, Node: b.nodeInfo()}
	})
	err := b.conn.Close()
	b.wg.Wait()
	if err != nil {
		return fmt.Errorf("close beacon: %w", err)
	}
	return nil
}

// Probe multicasts a probe: nodes owning a resource that matches one of
// want (any, when none) answer at once.
func (b *Beacon) Probe(want ...string) {
	b.broadcast(func(netip.Addr) Message {
		return Message{Proto: Proto, V: Version, Type: TypeProbe, From: b.cfg.Instance, Want: want}
	})
}

func (b *Beacon) nodeInfo() *NodeInfo {
	return &NodeInfo{Name: b.cfg.Name, Instance: b.cfg.Instance, Version: b.cfg.Version}
}

func (b *Beacon) advertise(local netip.Addr) Message {
	return Message{Proto: Proto, V: Version, Type: TypeAdvertise, Node: b.nodeInfo(), Resources: b.cfg.Resources(local)}
}

func (b *Beacon) advertiseLoop(ctx context.Context) {
	defer b.wg.Done()
	// At once, then a probe so the neighbours fill without waiting for
	// everyone's next interval.
	b.broadcast(b.advertise)
	b.Probe()
	tick := time.NewTicker(b.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			b.broadcast(b.advertise)
		}
	}
}

// encode marshals m, refusing one over MaxDatagram bytes (it would
// fragment, and peers would refuse it).
func (b *Beacon) encode(m Message) ([]byte, bool) {
	body, err := json.Marshal(m)
	if err == nil && len(body) > MaxDatagram {
		err = fmt.Errorf("%w: %d bytes", ErrOversized, len(body))
	}
	if err != nil {
		b.log.Error("beacon: cannot send a datagram", "type", m.Type, "err", err)
		return nil, false
	}
	return body, true
}

// broadcast sends one datagram to the group on each interface, built for
// that interface's address: writing once would reach one network only.
func (b *Beacon) broadcast(build func(local netip.Addr) Message) {
	b.sendMu.Lock()
	defer b.sendMu.Unlock()
	for i := range b.ifaces {
		f := &b.ifaces[i]
		body, ok := b.encode(build(f.local.Addr()))
		if !ok {
			return
		}
		if err := b.pc.SetMulticastInterface(&f.ifi); err != nil {
			b.log.Debug("beacon: cannot select an interface", "interface", f.ifi.Name, "err", err)
			continue
		}
		if _, err := b.pc.WriteTo(body, nil, b.group); err != nil {
			b.log.Debug("beacon: send failed", "interface", f.ifi.Name, "err", err)
		}
	}
}

func (b *Beacon) readLoop(ctx context.Context) {
	defer b.wg.Done()
	buf := make([]byte, MaxDatagram+1) // one byte more: a longer datagram is seen as too long
	for {
		n, cm, src, err := b.pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			b.log.Debug("beacon: read failed", "err", err)
			select { // a socket error that repeats must not spin
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		ifIndex := 0
		if cm != nil {
			ifIndex = cm.IfIndex
		}
		b.handle(buf[:n], ifIndex, src)
	}
}

// handle takes one datagram: a probe is answered, an advertise or bye
// recorded; anything else changes nothing and is counted.
func (b *Beacon) handle(d []byte, ifIndex int, src net.Addr) {
	m, err := Parse(d)
	if err != nil {
		fate := "not_beacon"
		if errors.Is(err, ErrOversized) {
			fate = "oversized"
		}
		b.fates.WithLabelValues(fate).Inc()
		b.log.Debug("beacon: datagram refused", "from", src, "err", err)
		return
	}
	switch m.Type {
	case TypeProbe:
		b.answer(m, ifIndex, src)
	case TypeAdvertise, TypeBye:
		if m.Node.Instance == b.cfg.Instance {
			b.fates.WithLabelValues("own").Inc()
			return
		}
		b.record(m, src)
		b.fates.WithLabelValues("neighbor").Inc()
	}
}

// answer replies to a probe that wants one of this node's resources, by
// unicast to the prober's address, built for the interface it came in on.
func (b *Beacon) answer(m Message, ifIndex int, src net.Addr) {
	if m.From == b.cfg.Instance {
		b.fates.WithLabelValues("own").Inc()
		return
	}
	local := b.localFor(ifIndex, src)
	ad := b.advertise(local)
	if !wanted(m.Want, ad.Resources) {
		b.fates.WithLabelValues("probe_not_wanted").Inc()
		return
	}
	if !b.replies.Allow() {
		b.fates.WithLabelValues("reply_limited").Inc()
		return
	}
	body, ok := b.encode(ad)
	if !ok {
		return
	}
	b.sendMu.Lock()
	_, err := b.pc.WriteTo(body, nil, src)
	b.sendMu.Unlock()
	if err != nil {
		b.log.Debug("beacon: reply failed", "to", src, "err", err)
		return
	}
	b.fates.WithLabelValues("probe_answered").Inc()
}

// localFor is this node's address on the interface a datagram came in on:
// by the interface's index, else the interface whose network holds the
// source, else the first.
func (b *Beacon) localFor(ifIndex int, src net.Addr) netip.Addr {
	var from netip.Addr
	if u, ok := src.(*net.UDPAddr); ok {
		from, _ = netip.AddrFromSlice(u.IP.To4())
	}
	for _, f := range b.ifaces {
		if ifIndex != 0 && f.ifi.Index == ifIndex {
			return f.local.Addr()
		}
	}
	for _, f := range b.ifaces {
		if from.IsValid() && f.local.Contains(from) {
			return f.local.Addr()
		}
	}
	if len(b.ifaces) > 0 {
		return b.ifaces[0].local.Addr()
	}
	return netip.Addr{}
}

func (b *Beacon) record(m Message, src net.Addr) {
	addr := ""
	if u, ok := src.(*net.UDPAddr); ok {
		addr = u.IP.String()
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if m.Type == TypeBye {
		delete(b.nodes, m.Node.Instance)
		return
	}
	if _, known := b.nodes[m.Node.Instance]; !known && len(b.nodes) >= MaxNeighbors {
		b.expireLocked(now)
		if len(b.nodes) >= MaxNeighbors { // still full: the oldest heard makes room
			oldest := ""
			for k, h := range b.nodes {
				if oldest == "" || h.lastSeen.Before(b.nodes[oldest].lastSeen) {
					oldest = k
				}
			}
			delete(b.nodes, oldest)
		}
	}
	b.nodes[m.Node.Instance] = &heard{node: *m.Node, resources: m.Resources, addr: addr, lastSeen: now}
}

func (b *Beacon) expireLocked(now time.Time) {
	cutoff := now.Add(-b.cfg.Interval * LivenessFactor)
	for k, h := range b.nodes {
		if h.lastSeen.Before(cutoff) {
			delete(b.nodes, k)
		}
	}
}

// Neighbors lists the nodes heard within Interval × LivenessFactor, by
// name and instance.
func (b *Beacon) Neighbors() []Neighbor {
	b.mu.Lock()
	b.expireLocked(time.Now())
	out := make([]Neighbor, 0, len(b.nodes))
	for _, k := range slices.Sorted(maps.Keys(b.nodes)) {
		h := b.nodes[k]
		out = append(out, newNeighbor(h.node, h.resources, h.addr, float64(h.lastSeen.UnixNano())/1e9))
	}
	b.mu.Unlock()
	slices.SortStableFunc(out, func(x, y Neighbor) int { return cmp.Compare(x.Name, y.Name) })
	return out
}

// NeighborsByName lists one row per name: its most recently heard
// instance.
func (b *Beacon) NeighborsByName() []Neighbor {
	var out []Neighbor
	for _, nb := range b.Neighbors() {
		if i := len(out) - 1; i >= 0 && out[i].Name == nb.Name {
			if nb.LastSeen > out[i].LastSeen {
				out[i] = nb
			}
			continue
		}
		out = append(out, nb)
	}
	return out
}

// Self is this node as a row, as its neighbours list it.
func (b *Beacon) Self() Neighbor {
	var local netip.Addr
	b.life.Lock()
	if len(b.ifaces) > 0 {
		local = b.ifaces[0].local.Addr()
	}
	b.life.Unlock()
	return newNeighbor(*b.nodeInfo(), b.cfg.Resources(local), "", float64(time.Now().UnixNano())/1e9)
}
