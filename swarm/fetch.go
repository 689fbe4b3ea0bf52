package swarm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/metanode/metanode/store"
)

// ProtocolFetch returns the claims of the groups holding some cids.
const ProtocolFetch protocol.ID = "/metanode/fetch/1.0.0"

const (
	maxFetchClaims = 1 << 16  // claims in one fetch response
	maxFetchBytes  = 64 << 20 // claim bytes in one fetch response (a record's claims are far fewer)
	maxFetchServes = 8        // fetch requests served at once
	// maxFetchLoaded bounds the claims one request makes the node load,
	// duplicates included, whatever it sends: work per request, not only
	// the answer, is bounded.
	maxFetchLoaded  = 2 * maxFetchClaims
	fetchTimeout    = 30 * time.Second
	lookupProviders = 8 // providers asked before giving up
	lookupFallback  = 8 // connected peers asked when no provider answered
	lookupParallel  = 4 // providers dialed at once
)

// lookupDial bounds one dial of a provider: its record names any address
// its announcer liked, and one that accepts TCP and stalls must not hold
// the lookup. A variable only so that a test on a loaded machine (real
// handshakes under -race) can allow more.
var lookupDial = time.Second

// serveFetch answers one FETCH request: the shared claims of each cid's
// group, deduplicated, in CLAIMS frames, then END. Each group is loaded
// once per request.
func (s *Swarm) serveFetch(ctx context.Context, st network.Stream) {
	p := st.Conn().RemotePeer()
	if s.penalties.isBlocked(p) { // its connection is being closed
		_ = st.Reset()
		return
	}
	frame, err := newRequestReader(st, maxFetchFrame).next()
	if err != nil || frame[0] != frameFetch {
		if err == nil {
			err = fmt.Errorf("%w: expected FETCH", errProtocol)
		}
		s.log.Debug("bad fetch request", "peer", p, "err", err)
		s.refuse(st, errCodeProtocol, "expected one FETCH frame")
		return
	}
	cids, err := decodeFetch(frame)
	if err != nil {
		s.refuse(st, errCodeProtocol, err.Error())
		return
	}
	if !s.fetchServes.TryAcquire(1) {
		s.refuse(st, errCodeBusy, "too many fetch requests")
		return
	}
	defer s.fetchServes.Release(1)
	fw := newFrameWriter(st)
	var stats SyncStats
	cw := claimWriter{write: fw.write, stats: &stats}
	seen := map[store.ID]struct{}{}
	answered := map[string]bool{} // cids whose group was loaded
	size, loaded := 0, 0
	for _, c := range cids {
		if answered[c] || len(seen) >= maxFetchClaims || size >= maxFetchBytes || loaded >= maxFetchLoaded {
			continue // its group is in the answer, or the answer (or the work) is full
		}
		answered[c] = true
		claims, err := s.cfg.Store.FetchClaims(ctx, c)
		if err != nil {
			s.log.Warn("fetch claims", "cid", c, "err", err)
			s.refuse(st, errCodeInternal, "store unavailable")
			return
		}
		loaded += len(claims)
		// The other cids of the group: asked again, they would load the
		// same group (a request of 256 cids of one record would load it
		// 256 times). A group's cids with claims show as the claims' cids.
		// Not link targets: a link on or to a peer-id cid joins nothing,
		// and marking its target would hide that cid's own claims (a
		// stranger's link could hide a trusted signer's vouches: review 4,
		// R4). A target with no claims of its own costs a reload at most.
		for i := range claims {
			answered[claims[i].CID] = true
		}
		out := claims[:0]
		for _, cl := range claims {
			id, n := cl.ID(), len(cl.Wire())
			if _, dup := seen[id]; dup || len(seen) >= maxFetchClaims || size+n > maxFetchBytes {
				continue
			}
			seen[id] = struct{}{}
			size += n
			out = append(out, cl)
		}
		if err := cw.add(out, nil); err != nil {
			_ = st.Reset()
			return
		}
	}
	if cw.flush() != nil || fw.write([]byte{frameEnd}) != nil || fw.flush() != nil {
		_ = st.Reset()
		return
	}
	_ = st.Close()
}

// ErrOnlyUntrusted comes with ErrNotFound from Lookup when peers answered
// claims about the cid but every one was by a signer this node does not
// trust: a peer knows the cid, this node refused what it holds.
var ErrOnlyUntrusted = errors.New("peers hold claims about it only by signers this node does not trust")

// fetchFrom asks p for the claims of cids and stores them (the store
// verifies). It returns how many the store did not reject.
func (s *Swarm) fetchFrom(ctx context.Context, p peer.ID, cids []string) (int, error) {
	fc, err := s.fetchCounting(ctx, p, cids)
	return fc.taken, err
}

// fetchCount is what one fetch answer did to the store.
type fetchCount struct {
	taken     int // claims the store did not reject
	added     int // claims stored as new about a cid of the asked group
	held      int // claims about the asked group already held (same or newer row)
	untrusted int // claims refused because their signers are not trusted
}

// fetchCounting is fetchFrom with the detail of a fetchCount.
func (s *Swarm) fetchCounting(ctx context.Context, p peer.ID, cids []string) (fc fetchCount, err error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	st, err := s.host.NewStream(ctx, p, ProtocolFetch)
	if err != nil {
		s.met.fetches.WithLabelValues("error").Inc()
		return fc, fmt.Errorf("fetch from %s: %w", p, err)
	}
	claims, err := readFetch(ctx, st, cids)
	if err != nil {
		s.met.fetches.WithLabelValues("error").Inc()
		if errors.Is(err, errProtocol) {
			s.penalize(p, "fetch: "+err.Error())
		}
		return fc, fmt.Errorf("fetch from %s: %w", p, err)
	}
	if len(claims) == 0 {
		s.met.fetches.WithLabelValues("empty").Inc()
		return fc, nil
	}
	gen := s.refused.generation()
	claims, refused := s.dropUntrusted(claims)
	for _, r := range refused {
		s.refused.add(r.item, r.uid, gen)
	}
	fc.untrusted = len(refused)
	claims, onGroup, unasked := s.boundToRequest(claims, cids)
	if unasked > 0 {
		// Not a strike: an honest peer's group can hold cids joined by
		// links this node does not take (signers it does not trust).
		s.log.Debug("fetch answer: dropped claims about cids not asked for", "peer", p, "dropped", unasked)
	}
	if len(claims) == 0 {
		s.met.fetches.WithLabelValues("ok").Inc()
		return fc, nil
	}
	vouchesFirst(claims) // a vouch in the response trusts its signer's claims in it
	res, err := s.cfg.Store.Submit(ctx, claims, store.SubmitOptions{Origin: store.OriginFetch})
	if err != nil {
		return fc, fmt.Errorf("store fetched claims: %w", err)
	}
	bad := 0
	for i, r := range res {
		switch {
		case r.Outcome != store.Rejected:
			fc.taken++
			switch {
			case !onGroup[claims[i].CID]: // a vouch kept for what it decides
			case r.Stored:
				fc.added++
			default:
				fc.held++
			}
		case errors.Is(r.Err, ErrNotInterested):
			// Neutral: not held against the peer, not remembered as refused.
		case errors.Is(r.Err, store.ErrUntrusted):
			s.refused.add(store.SyncItem{TS: claims[i].TS, ID: r.ID}, claims[i].UID, gen)
			fc.untrusted++
		case isInvalid(r.Err):
			bad++
		}
	}
	if bad > 0 {
		s.penalize(p, fmt.Sprintf("fetch: %d invalid claims", bad))
	}
	s.met.fetches.WithLabelValues("ok").Inc()
	return fc, nil
}

// boundToRequest keeps the claims of a fetch answer that the request asked
// for: those about an asked cid or about a cid joined to one by live link
// claims in the same answer (the asked cid's group), and live vouches by
// trusted signers (they decide whose claims count). Everything else is
// dropped, else any peer could push claims about any cid into a node in
// interest mode, which keeps what it fetched. claims have passed
// dropUntrusted, so every link's signer is trusted; a link must also carry
// a valid signature to join cids, else a forged link would pull in
// genuine claims about cids nobody asked for. It returns the kept claims
// (in place), the cids of the asked group among them (the vouches kept
// only for what they decide are not on it) and how many were dropped.
func (s *Swarm) boundToRequest(claims []store.Claim, asked []string) ([]store.Claim, map[string]bool, int) {
	g := cidUnion{}
	var links []store.Claim
	for i := range claims {
		if _, ok := claims[i].LinkTarget(); ok {
			links = append(links, claims[i])
		}
	}
	if len(links) > 0 {
		ids := make([]store.ID, len(links))
		for i := range links {
			ids[i] = links[i].ID()
		}
		for i, err := range store.VerifyAll(links, ids, nil) {
			if err == nil {
				other, _ := links[i].LinkTarget()
				g.join(links[i].CID, other)
			}
		}
	}
	roots := make(map[string]bool, len(asked))
	for _, c := range asked {
		roots[g.find(c)] = true
	}
	out := claims[:0]
	onGroup := make(map[string]bool, len(asked))
	for i := range claims {
		c := &claims[i]
		if roots[g.find(c.CID)] {
			out = append(out, *c)
			onGroup[c.CID] = true
		} else if _, ok := liveVouch(c); ok && s.cfg.Store.Trusted(c.UID) {
			out = append(out, *c)
		}
	}
	return out, onGroup, len(claims) - len(out)
}

// cidUnion is a union-find over cids: the groups that links join.
type cidUnion map[string]string

func (u cidUnion) find(c string) string {
	for {
		p, ok := u[c]
		if !ok || p == c {
			return c
		}
		if gp, ok := u[p]; ok && gp != p {
			u[c] = gp // path halving
		}
		c = p
	}
}

func (u cidUnion) join(a, b string) {
	if ra, rb := u.find(a), u.find(b); ra != rb {
		u[ra] = rb
	}
}

// readFetch sends the request and reads the response.
func readFetch(ctx context.Context, st network.Stream, cids []string) (_ []store.Claim, err error) {
	stop := context.AfterFunc(ctx, func() { _ = st.Reset() })
	defer stop()
	defer func() {
		if err != nil {
			_ = st.Reset()
			return
		}
		_ = st.Close()
	}()
	_ = st.SetDeadline(time.Now().Add(fetchTimeout))
	fw := newFrameWriter(st)
	if err := fw.write(appendFetch(nil, cids)); err != nil {
		return nil, err
	}
	if err := fw.flush(); err != nil {
		return nil, err
	}
	_ = st.CloseWrite()
	fr := newFrameReader(st)
	var claims []store.Claim
	size := 0
	for {
		frame, err := fr.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: response without END", errProtocol)
			}
			return nil, err
		}
		switch frame[0] {
		case frameClaims:
			cs, err := decodeClaims(frame[1:], maxFrame/minWireClaim)
			if err != nil {
				return nil, err
			}
			if size += len(frame); len(claims)+len(cs) > maxFetchClaims || size > maxFetchBytes+maxFrame {
				return nil, fmt.Errorf("%w: more than %d claims or %d bytes", errProtocol, maxFetchClaims, maxFetchBytes)
			}
			claims = append(claims, cs...)
		case frameEnd:
			return claims, nil
		case frameError:
			return nil, decodeError(frame)
		default:
			return nil, fmt.Errorf("%w: unexpected frame type %#x", errProtocol, frame[0])
		}
	}
}

// Interest fetches are bounded per peer. The scheduler fetches from a peer
// when it connects and from one peer every interestEvery sync periods; each
// time, at most maxInterestFetches requests of maxFetchCIDs cids (4096 cids
// of 256 each) go to that peer, so a node with a huge interest list asks one
// peer for a bounded amount of work per connection and per interval, and
// the responder's answer is bounded by maxFetchClaims per request anyway.
// The head of the list (the node puts the peer-id cids of the signers it
// trusts directly first: their vouches decide whose claims count) is asked
// every time; the rest is covered by a window that starts at a random place
// each time, so every cid is asked within a few intervals on average.
const maxInterestFetches = 16

// fetchInterest fetches the claims of the interest cids from p, in
// batches, bounded as above (interest mode).
func (s *Swarm) fetchInterest(ctx context.Context, p peer.ID) {
	cids, err := s.cfg.Interest(ctx)
	if err != nil {
		s.log.Warn("interest cids", "err", err)
		return
	}
	for _, batch := range interestBatches(cids, rand.IntN(max(len(cids), 1))) {
		if _, err := s.fetchFrom(ctx, p, batch); err != nil {
			s.log.Debug("interest fetch", "peer", p, "err", err)
			return
		}
	}
}

// interestBatches picks the cids of one interest fetch: all of them when
// they fit in maxInterestFetches requests; else the first request's worth
// (the head) and a window of the rest that starts at off (modulo its length)
// and wraps around.
func interestBatches(cids []string, off int) [][]string {
	var out [][]string
	if len(cids) <= maxInterestFetches*maxFetchCIDs {
		for chunk := range slices.Chunk(cids, maxFetchCIDs) {
			out = append(out, chunk)
		}
		return out
	}
	out = append(out, cids[:maxFetchCIDs])
	rest := cids[maxFetchCIDs:]
	start := off % len(rest)
	window := make([]string, 0, (maxInterestFetches-1)*maxFetchCIDs)
	window = append(window, rest[start:min(len(rest), start+cap(window))]...)
	window = append(window, rest[:cap(window)-len(window)]...)
	for chunk := range slices.Chunk(window, maxFetchCIDs) {
		out = append(out, chunk)
	}
	return out
}

// Lookup finds peers that hold claims about cid, fetches, verifies and
// stores the claims of its group, and returns how many new ones were
// stored (0 when the store turned out to hold them already).
// ErrNotFound when no peer knows it within the lookup timeout; wrapping
// ErrOnlyUntrusted too when peers answered, but only with claims by
// signers this node does not trust.
//
// Provider records are unauthenticated (anyone can announce itself at any
// address), so none may cost the lookup its budget: providers already
// connected are asked at once, the others are dialed concurrently, each
// within lookupDial and without the diagnosis path of dial, and the
// connected peers are asked once the providers are exhausted or after
// lookupDial (at most half the budget), whichever comes first. The first
// peer whose answer stores something new about the cid's group ends the
// lookup (see lookup.answered).
func (s *Swarm) Lookup(ctx context.Context, cid string) (int, error) {
	if !s.isOpen() {
		return 0, errNotOpen
	}
	if err := store.CheckCID(cid); err != nil {
		return 0, fmt.Errorf("lookup: %w", err)
	}
	budget := s.cfg.LookupTimeout
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	l := &lookup{s: s, cid: cid, parent: parent, asked: map[peer.ID]bool{s.host.ID(): true},
		dials: make(chan struct{}, lookupParallel), found: make(chan int, 1)}
	defer func() { cancel(); l.wg.Wait() }() // every ask ends with ctx
	provsDone := make(chan struct{})
	if s.dht != nil && s.dht.RoutingTable().Size() > 0 {
		l.wg.Go(func() {
			var provs sync.WaitGroup
			for ai := range s.dht.FindProvidersAsync(ctx, provideKey(s.cfg.Name, cid), lookupProviders) {
				l.ask(ctx, &provs, ai, true) // drained to the end: the query stops when ctx ends
			}
			provs.Wait()
			close(provsDone)
		})
	} else {
		close(provsDone)
	}
	patience := time.NewTimer(min(budget/2, lookupDial))
	defer patience.Stop()
	select {
	case n := <-l.found:
		return l.done(n)
	case <-ctx.Done():
		return l.notFound()
	case <-provsDone:
	case <-patience.C:
	}
	// Ask a few connected peers directly (a small swarm may have no DHT
	// servers yet, and a peer at hand may hold it without having said so).
	var fallback sync.WaitGroup
	for _, p := range s.host.Network().Peers() {
		l.ask(ctx, &fallback, peer.AddrInfo{ID: p}, false)
	}
	allDone := make(chan struct{})
	l.wg.Go(func() { // ends with the asks, which end with ctx
		fallback.Wait()
		<-provsDone
		close(allDone)
	})
	select {
	case n := <-l.found:
		return l.done(n)
	case <-ctx.Done():
	case <-allDone:
	}
	select { // an answer that came in with the end of the budget
	case n := <-l.found:
		return l.done(n)
	default:
	}
	return l.notFound()
}

// lookup is the state of one Lookup: the peers asked so far (each at most
// once) and the first answer.
type lookup struct {
	s         *Swarm
	cid       string
	parent    context.Context // the caller's, for the last look at the store
	wg        sync.WaitGroup  // every ask
	dials     chan struct{}   // provider dials at once
	mu        sync.Mutex
	asked     map[peer.ID]bool
	fallbacks int
	untrusted atomic.Int64
	found     chan int // the first answer's count
}

// ask asks p in a goroutine counted in wg and l.wg; a provider that is
// not connected is dialed first. Unconnected peers from the fallback are
// skipped (it only asks peers at hand), and the fallback asks at most
// lookupFallback peers.
func (l *lookup) ask(ctx context.Context, wg *sync.WaitGroup, ai peer.AddrInfo, provider bool) {
	l.mu.Lock()
	if l.asked[ai.ID] || (!provider && l.fallbacks >= lookupFallback) {
		l.mu.Unlock()
		return
	}
	l.asked[ai.ID] = true
	if !provider {
		l.fallbacks++
	}
	l.mu.Unlock()
	s := l.s
	wg.Add(1)
	l.wg.Go(func() {
		defer wg.Done()
		if s.penalties.isBlocked(ai.ID) { // connected or not: its answers are not taken
			return
		}
		if s.host.Network().Connectedness(ai.ID) != network.Connected {
			if !provider || l.dialProvider(ctx, ai) != nil {
				return
			}
		}
		fc, err := s.fetchCounting(ctx, ai.ID, []string{l.cid})
		if err != nil {
			s.log.Debug("lookup fetch", "peer", ai.ID, "cid", l.cid, "err", err)
		}
		l.untrusted.Add(int64(fc.untrusted))
		if err != nil || !l.answered(ctx, fc) {
			return
		}
		n := fc.added
		select {
		case l.found <- n:
			if provider {
				s.counters.dhtFound.Add(1)
			}
		default: // another peer answered first
		}
	})
}

// answered reports whether an answer ends the lookup: it stored something
// new about the asked cid's group, or it held only what the store had
// already and the store now holds the cid (another lookup or gossip brought
// it meanwhile). Vouches and copies of claims already held are otherwise
// neutral: any peer can replay them at once, and ending the lookup on them
// would cancel the honest peers' answers (trust review R7-T7).
func (l *lookup) answered(ctx context.Context, fc fetchCount) bool {
	if fc.added > 0 {
		return true
	}
	if fc.held == 0 {
		return false
	}
	has, err := l.s.cfg.Store.HasCID(ctx, l.cid)
	return err == nil && has
}

// dialProvider connects to a provider within lookupDial, after waiting for
// one of lookupParallel dial slots.
func (l *lookup) dialProvider(ctx context.Context, ai peer.AddrInfo) error {
	select {
	case l.dials <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l.dials }()
	dctx, cancel := context.WithTimeout(ctx, lookupDial)
	defer cancel()
	return l.s.host.Connect(dctx, ai)
}

func (l *lookup) done(n int) (int, error) {
	l.s.met.lookups.WithLabelValues("found").Inc()
	return n, nil
}

func (l *lookup) notFound() (int, error) {
	// No answer stored it, yet the store may hold the cid by now: a sync
	// session or gossip brought it while the lookup ran (an answer of the
	// same claims cut off by the budget, or a peer not asked). The caller
	// reads the store next; "no peer knows" would make that a 404.
	if has, err := l.s.cfg.Store.HasCID(l.parent, l.cid); err == nil && has {
		return l.done(0)
	}
	l.s.met.lookups.WithLabelValues("notfound").Inc()
	if u := l.untrusted.Load(); u > 0 {
		return 0, fmt.Errorf("lookup %s: %w: %w (%d claims refused)", l.cid, ErrNotFound, ErrOnlyUntrusted, u)
	}
	return 0, fmt.Errorf("lookup %s: %w", l.cid, ErrNotFound)
}
