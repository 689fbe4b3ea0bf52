package swarm

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/metanode/metanode/store"
)

type atomicInt = atomic.Int64

// ---- misbehaving peers ----

const (
	// Invalid deliveries within penaltyWindow that get a peer blocked. Two,
	// as gossipsub's own score graylists a peer after two invalid messages
	// (P4 weight -100, squared) and would hide a third from us.
	penaltyThreshold = 2
	penaltyWindow    = 10 * time.Minute // how long an invalid delivery counts
	maxPenalised     = 4096             // peers tracked
)

// penaltyBox counts invalid deliveries per peer and blocks repeat offenders
// for a while. Honest peers never get here: a claim that fails its
// signature was made or altered by someone who did not hold the key.
type penaltyBox struct {
	mu       sync.Mutex
	blockFor time.Duration
	strikes  map[peer.ID][]time.Time
	blocked  map[peer.ID]time.Time // until
}

func newPenaltyBox(blockFor time.Duration) *penaltyBox {
	return &penaltyBox{blockFor: blockFor, strikes: map[peer.ID][]time.Time{}, blocked: map[peer.ID]time.Time{}}
}

// strike records one invalid delivery and reports whether p is now blocked.
func (b *penaltyBox) strike(p peer.ID, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, known := b.strikes[p]; !known && len(b.strikes) >= maxPenalised {
		b.evict(now)
	}
	ts := slices.DeleteFunc(b.strikes[p], func(t time.Time) bool { return now.Sub(t) > penaltyWindow })
	ts = append(ts, now)
	b.strikes[p] = ts
	if len(ts) < penaltyThreshold {
		return false
	}
	if len(b.blocked) >= maxPenalised {
		for q, until := range b.blocked {
			if now.After(until) {
				delete(b.blocked, q)
			}
		}
	}
	b.blocked[p] = now.Add(b.blockFor)
	delete(b.strikes, p)
	return true
}

// evict makes room for one more peer: it drops the peers whose strikes
// have all expired, or else the one struck longest ago. Dropping everyone
// at once would forgive every offender whenever a flood of new peer ids
// filled the table.
func (b *penaltyBox) evict(now time.Time) {
	var oldest peer.ID
	var oldestAt time.Time
	for q, ts := range b.strikes {
		last := ts[len(ts)-1]
		if now.Sub(last) > penaltyWindow {
			delete(b.strikes, q)
			continue
		}
		if oldest == "" || last.Before(oldestAt) {
			oldest, oldestAt = q, last
		}
	}
	if len(b.strikes) >= maxPenalised {
		delete(b.strikes, oldest)
	}
}

func (b *penaltyBox) isBlocked(p peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	until, ok := b.blocked[p]
	if !ok {
		return false
	}
	if time.Now().After(until) {
		delete(b.blocked, p)
		return false
	}
	return true
}

// penalize counts an invalid delivery from p; a repeat offender is
// disconnected and refused for Config.BlockFor.
func (s *Swarm) penalize(p peer.ID, why string) {
	s.met.invalidDeliveries.Inc()
	if !s.penalties.strike(p, time.Now()) {
		s.log.Debug("invalid delivery", "peer", p, "why", why)
		return
	}
	s.log.Warn("peer blocked after repeated invalid deliveries", "peer", p, "for", s.cfg.BlockFor, "last", why)
	s.errs.add("blocked "+p.String(), "peer "+p.String()+" blocked: repeated invalid claims", time.Now())
	s.met.peersBlocked.Inc()
	select {
	case s.kickCh <- p:
	default:
	}
}

// gater refuses blocked peers at every step of a connection. It only acts
// on hosts the swarm builds; on a host passed in, blocked peers are
// disconnected when they connect.
type gater struct{ s *Swarm }

func (g *gater) blocked(p peer.ID) bool {
	return g.s.penalties != nil && g.s.penalties.isBlocked(p)
}

func (g *gater) InterceptPeerDial(p peer.ID) bool                 { return !g.blocked(p) }
func (g *gater) InterceptAddrDial(p peer.ID, _ ma.Multiaddr) bool { return !g.blocked(p) }
func (g *gater) InterceptAccept(network.ConnMultiaddrs) bool      { return true }
func (g *gater) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return !g.blocked(p)
}
func (g *gater) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }

// ---- refused claims ----

const maxRefused = 1 << 17

// refusedSet remembers claims the store refused as untrusted, with their
// signer, so periodic syncs do not fetch them again: sync counts them as
// held. Bounded: the oldest are forgotten first. A trust change (Resync)
// forgets those whose signer is trusted now, and only those: forgetting
// all made every trust change (a pairing, a new plugin, a vouch arriving)
// fetch an open peer's whole backlog of strangers' claims again, which
// spent the peer's sync budget in 3 or 4 changes (review s12 G F1).
type refusedSet struct {
	mu    sync.Mutex
	max   int
	gen   uint64 // bumped by forget: refusals decided before a trust change are dropped
	items map[store.SyncItem]*refusedSigner
	// signers holds each signer with refusals once, with their number: a
	// trust change looks at each signer, not at each claim, and does
	// nothing more when none of them became trusted.
	signers map[string]*refusedSigner
	order   []store.SyncItem
	// sorted is the last snapshot, shared read-only by the sessions that
	// took it until the set changes: each session used to clone and sort
	// up to max items before reading a byte from its peer.
	sorted []store.SyncItem
	ver    uint64 // bumped by every change, so a sort done outside the lock is kept only if still current
}

// refusedSigner is a signer with refusals remembered, and how many.
type refusedSigner struct {
	uid string
	n   int
}

func newRefusedSet(max int) *refusedSet {
	return &refusedSet{max: max, items: map[store.SyncItem]*refusedSigner{}, signers: map[string]*refusedSigner{}}
}

// generation returns the current generation, to pass to add.
func (r *refusedSet) generation() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

// add remembers a claim of signer uid refused in generation gen (ignored
// when trust changed since).
func (r *refusedSet) add(it store.SyncItem, uid string, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.items[it]; ok || gen != r.gen {
		return
	}
	if len(r.order) >= r.max {
		drop := r.order[:r.max/4]
		for _, d := range drop {
			r.drop(d)
		}
		r.order = slices.Delete(r.order, 0, len(drop))
	}
	sg := r.signers[uid]
	if sg == nil {
		sg = &refusedSigner{uid: strings.Clone(uid)}
		r.signers[sg.uid] = sg
	}
	sg.n++
	r.items[it] = sg
	r.order = append(r.order, it)
	r.sorted = nil
	r.ver++
}

// drop forgets item it (not its place in order).
func (r *refusedSet) drop(it store.SyncItem) {
	sg := r.items[it]
	delete(r.items, it)
	if sg != nil {
		if sg.n--; sg.n == 0 {
			delete(r.signers, sg.uid)
		}
	}
}

// forget drops the refusals whose signer trusted now accepts, and any
// refusal decided before this call.
func (r *refusedSet) forget(trusted func(uid string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	now := map[*refusedSigner]bool{}
	for uid, sg := range r.signers {
		if trusted(uid) {
			now[sg] = true
			delete(r.signers, uid)
		}
	}
	if len(now) == 0 {
		return
	}
	r.order = slices.DeleteFunc(r.order, func(it store.SyncItem) bool {
		if now[r.items[it]] {
			delete(r.items, it)
			return true
		}
		return false
	})
	r.sorted = nil
	r.ver++
}

func (r *refusedSet) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.items)
}

// snapshot returns the items in (ts, id) order. The slice is shared: read
// it, never write it.
func (r *refusedSet) snapshot() []store.SyncItem {
	r.mu.Lock()
	if r.sorted != nil || len(r.order) == 0 {
		defer r.mu.Unlock()
		return r.sorted
	}
	out, ver := slices.Clone(r.order), r.ver
	r.mu.Unlock()
	slices.SortFunc(out, store.SyncItem.Compare) // outside the lock: add does not wait
	r.mu.Lock()
	if r.ver == ver {
		r.sorted = out
	}
	r.mu.Unlock()
	return out
}

// ---- per-key budgets: gossip rates, sync claims ----

// keyedLimiter is a token bucket per key (a peer, a signer). A key's bucket
// outlives the key's connection: a flooding peer that reconnects finds its
// bucket as it left it, not refilled. A bucket holds size (read at each
// use) and an empty one is full again after refill. Memory is bounded by
// max keys: a bucket idle long enough to have refilled loses nothing when
// dropped, and those go first; past max busy keys the least recently used
// quarter goes (a flood of new keys then resets only the quietest buckets,
// never the flooder's own, which it keeps using).
type keyedLimiter[K comparable] struct {
	mu     sync.Mutex
	size   func() float64
	refill time.Duration
	max    int
	keys   map[K]*keyedBucket
}

// keyedBucket records what was taken and not yet refilled, not what is
// left: a bucket whose size grows (the sync budget follows the set) holds
// the new size once it has refilled, as a new bucket does.
type keyedBucket struct {
	spent float64   // may pass size: see spend
	used  time.Time // last use, and the time spent was brought up to
}

const (
	limiterBurst   = 5 * time.Second // a gossip bucket holds this much of its rate
	maxPeerBuckets = 4096            // peers tracked by the gossip limiter and the sync budget
	// Signers are cheap to mint (open trust): more room, still bounded
	// (a bucket is about 100 bytes).
	maxSignerBuckets = 1 << 14
)

// newKeyedLimiter allows perSec per key, in a burst of five seconds' worth.
func newKeyedLimiter[K comparable](perSec, max int) *keyedLimiter[K] {
	size := float64(perSec) * limiterBurst.Seconds()
	return &keyedLimiter[K]{size: func() float64 { return size }, refill: limiterBurst, max: max, keys: map[K]*keyedBucket{}}
}

// newPeerLimiter bounds the new claims a peer's gossip may bring per second.
func newPeerLimiter(perSec int) *keyedLimiter[peer.ID] {
	return newKeyedLimiter[peer.ID](perSec, maxPeerBuckets)
}

func (l *keyedLimiter[K]) allow(k K, n int) bool {
	return l.allowAt(k, n, time.Now())
}

// allowAt takes n from k's bucket if it holds n.
func (l *keyedLimiter[K]) allowAt(k K, n int, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, size := l.bucket(k, now)
	if b.spent+float64(n) > size {
		return false
	}
	b.spent += float64(n)
	return true
}

// spend takes n from k's bucket, past empty if need be (what was sent is
// spent): the bucket is then empty until it has refilled the excess too.
func (l *keyedLimiter[K]) spend(k K, n int, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, _ := l.bucket(k, now)
	b.spent += float64(n)
}

// empty reports whether k's bucket holds nothing.
func (l *keyedLimiter[K]) empty(k K, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, size := l.bucket(k, now)
	return b.spent >= size
}

// bucket returns k's bucket, refilled up to now, and the bucket size; l.mu
// held. A time before the bucket's last use refills nothing.
func (l *keyedLimiter[K]) bucket(k K, now time.Time) (*keyedBucket, float64) {
	size := l.size()
	b, ok := l.keys[k]
	if !ok {
		if len(l.keys) >= l.max {
			l.evict(now, size)
		}
		b = &keyedBucket{used: now}
		l.keys[k] = b
	}
	if d := now.Sub(b.used); d > 0 {
		b.spent = max(0, b.spent-l.refilled(d, size))
		b.used = now
	}
	return b, size
}

// refilled is what a bucket of size regains in d.
func (l *keyedLimiter[K]) refilled(d time.Duration, size float64) float64 {
	return size * d.Seconds() / l.refill.Seconds()
}

// evict drops the buckets that have refilled since their last use, then,
// if that freed less than a quarter, the least recently used ones down to
// three quarters of max. Amortised: it runs once per max/4 new keys at
// most.
func (l *keyedLimiter[K]) evict(now time.Time, size float64) {
	for k, b := range l.keys {
		if b.spent <= l.refilled(now.Sub(b.used), size) {
			delete(l.keys, k)
		}
	}
	keep := l.max - l.max/4
	if len(l.keys) <= keep {
		return
	}
	used := make([]time.Time, 0, len(l.keys))
	for _, b := range l.keys {
		used = append(used, b.used)
	}
	slices.SortFunc(used, time.Time.Compare)
	cut := used[len(used)-keep] // keep the buckets used at or after cut
	for k, b := range l.keys {
		if b.used.Before(cut) {
			delete(l.keys, k)
		}
	}
	for k := range l.keys { // ties at cut (a coarse clock)
		if len(l.keys) <= keep {
			break
		}
		if l.keys[k].used.Equal(cut) {
			delete(l.keys, k)
		}
	}
}

// len is how many buckets the limiter holds.
func (l *keyedLimiter[K]) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// peerSessions counts the inbound sync sessions each peer runs, so one peer
// cannot take every inbound slot.
type peerSessions struct {
	mu  sync.Mutex
	max int
	n   map[peer.ID]int
}

func newPeerSessions(max int) *peerSessions {
	return &peerSessions{max: max, n: map[peer.ID]int{}}
}

// enter takes a slot for p; false when p already runs max sessions.
func (ps *peerSessions) enter(p peer.ID) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.n[p] >= ps.max {
		return false
	}
	ps.n[p]++
	return true
}

func (ps *peerSessions) leave(p peer.ID) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.n[p]--; ps.n[p] <= 0 {
		delete(ps.n, p)
	}
}

// ---- problems for the owner ----

const maxErrors = 16

// errorLog keeps the recent problems an owner should see in
// /api/swarm/status, newest last, one entry per condition: an entry is
// keyed by what it is about (a peer and address, say), and a repeat
// replaces the older entry with its own text and time. One misconfigured
// peer, whose failures differ only in libp2p's inner text, thus takes one
// of the maxErrors slots, not several, and pushes no other problem out.
type errorLog struct {
	mu      sync.Mutex
	entries []errorEntry
}

type errorEntry struct {
	key, msg string
	at       time.Time
}

func newErrorLog() *errorLog { return &errorLog{} }

// add records msg under key at now.
func (e *errorLog) add(key, msg string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entries = slices.DeleteFunc(e.entries, func(x errorEntry) bool { return x.key == key })
	e.entries = append(e.entries, errorEntry{key: key, msg: msg, at: now})
	if len(e.entries) > maxErrors {
		e.entries = slices.Delete(e.entries, 0, len(e.entries)-maxErrors)
	}
}

// recent returns messages younger than an hour.
func (e *errorLog) recent(now time.Time) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, x := range e.entries {
		if now.Sub(x.at) < time.Hour {
			out = append(out, x.msg)
		}
	}
	return out
}

// ---- connection events ----

// onConnected runs in the network's notification path: it must not block.
func (s *Swarm) onConnected(c network.Conn) {
	p := c.RemotePeer()
	if s.penalties.isBlocked(p) {
		select {
		case s.kickCh <- p:
		default:
		}
		return
	}
	at := c.Stat().Opened
	if at.IsZero() {
		at = time.Now()
	}
	s.peerStats.connected(p, at)
	if len(s.host.Network().ConnsToPeer(p)) > 1 {
		return // not the first connection to this peer
	}
	select {
	case s.connCh <- p:
	default: // the periodic sync covers it
	}
}

func (s *Swarm) onDisconnected(c network.Conn) {
	p := c.RemotePeer()
	if s.host.Network().Connectedness(p) == network.Connected {
		return
	}
	s.peerStats.disconnected(p)
	s.meshMu.Lock()
	delete(s.mesh, p)
	s.meshMu.Unlock()
}

// maxFoundDials bounds the dials of peers mDNS found that run at once. A
// dial costs up to about 13 s when an address accepts TCP and never
// completes a handshake, and anyone on the LAN can announce such peers.
const maxFoundDials = 4

// runConnector dials peers found by mDNS (a few at once, off its loop),
// redials those it reached once when they drop (lan.go), and runs the
// kicker, which disconnects blocked peers: kicks never wait behind dials.
func (s *Swarm) runConnector(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.runKicker(ctx) })
	slots := make(chan struct{}, maxFoundDials)
	dialFound := s.dialFound
	if s.foundDial != nil {
		dialFound = s.foundDial
	}
	t := time.NewTicker(lanCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ai := <-s.foundCh:
			if ai.ID == s.host.ID() || s.penalties.isBlocked(ai.ID) {
				continue
			}
			if s.host.Network().Connectedness(ai.ID) == network.Connected {
				s.lan.add(ai, time.Now())
				continue
			}
			select { // the found queue holds the rest meanwhile
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				defer func() { <-slots }()
				if err := dialFound(ctx, ai); err != nil {
					s.log.Debug("mdns peer unreachable", "peer", ai.ID, "err", err)
					return
				}
				s.lan.add(ai, time.Now())
			})
		case <-t.C:
			s.redialLAN(ctx)
		}
	}
}

// runKicker closes the connections of peers that got blocked (penalize)
// or that connect while blocked (onConnected), as soon as they are.
func (s *Swarm) runKicker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-s.kickCh:
			_ = s.host.Network().ClosePeer(p)
		}
	}
}

// mdnsNotifee hands LAN peers to the connector without blocking mDNS.
type mdnsNotifee struct{ s *Swarm }

func (n mdnsNotifee) HandlePeerFound(ai peer.AddrInfo) {
	select {
	case n.s.foundCh <- ai:
	default:
	}
}
