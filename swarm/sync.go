package swarm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/metanode/metanode/store"
)

// ProtocolSync is the catch-up protocol: range-based set reconciliation.
const ProtocolSync protocol.ID = "/metanode/sync/1.0.0"

const (
	maxTurns     = 64               // turns in one session (32 round trips)
	frameTimeout = 30 * time.Second // idle limit for one frame read or write
	// readyTimeout is how long a responder waits for its sync set before
	// it answers ERROR 2 (not ready): within the asker's firstAnswer.
	readyTimeout   = 4 * time.Second
	claimsPage     = 1024    // claims read from the store at once
	submitBatch    = 4096    // claims per Submit call
	submitWorkers  = 2       // Submit calls in flight per session: verify overlaps commit
	maxWantsInTurn = 1 << 20 // wanted claims a peer may ask for in one turn
	// What one turn's RANGES may hold: an honest turn has at most maxOut
	// ranges (each maybe after a skip) and, with id lists and sketches,
	// about 24 MB; a peer must not make a node buffer more.
	maxRangesInTurn     = 1 << 17
	maxRangeBytesInTurn = 32 << 20
	// Claims of signers this node does not trust that one session
	// remembers as refused (they are set aside unverified): past it they
	// are still read and dropped, not remembered, so one peer cannot churn
	// more than a quarter of the refused set. The session goes on: ending
	// it there kept a cold list-mode home behind an open node's backlog of
	// strangers' claims from ever reaching the trusted claims after them.
	// Streaming them buys the peer no session time (work).
	maxRefusedInSession = maxRefused / 4
)

// SyncStats describes one finished sync session.
type SyncStats struct {
	Peer         peer.ID
	Initiator    bool
	RoundTrips   int   // turn pairs
	Turns        int   // messages both ways
	BytesSent    int64 // frames written, length prefixes included
	BytesRecvd   int64
	ClaimBytes   int64 // of which claims in wire form, both ways
	ClaimsSent   int64
	ClaimsRecvd  int64 // received claims new to this node (stored)
	ClaimsMoved  int64 // received claims, whatever the store said
	Refused      int64 // received claims refused as untrusted
	Uninterested int64 // received claims the node's interest filter dropped (ErrNotInterested; neutral)
	Invalid      int64 // received claims with bad signatures or encoding
	Duration     time.Duration
	Err          error
	NoPushToPeer bool // the peer asked not to be sent claims
	// Deferred counts the wants dropped and ranges skipped because another
	// session of this node was asking for them (inflight.go); the session
	// is run again once those have ended.
	Deferred int64
}

// session is one side of one sync session.
type session struct {
	s       *Swarm
	peer    peer.ID
	budget  budgetOf // what its claims sent are charged to
	stream  network.Stream
	fr      *frameReader
	fw      *frameWriter
	rec     reconciler
	sub     *submitter
	stats   SyncStats
	rdec    rangeDecoder
	started time.Time
	guard   *sessionGuard
	hello   bool  // the peer's HELLO arrived
	claimIn int64 // bytes of CLAIMS frames read
	reg     *inflight
	flight  *flight // what this session asks its peer for (inflight.go)
}

// peerTurn is what the peer sent in one turn.
type peerTurn struct {
	hello  *hello
	wants  []shortID
	ranges []rangeEntry
}

func (t *peerTurn) final() bool { return len(t.wants) == 0 && len(t.ranges) == 0 }

// newSession prepares one side of a session; mayDefer lets it leave to
// other sessions of this node the claims they are asking for already.
func (s *Swarm) newSession(ctx context.Context, st network.Stream, initiator, mayDefer bool) *session {
	ss := &session{
		s:       s,
		peer:    st.Conn().RemotePeer(),
		budget:  budgetOfConn(st.Conn()),
		stream:  st,
		fr:      newFrameReader(st),
		fw:      newFrameWriter(st),
		started: time.Now(),
	}
	ss.stats.Peer = ss.peer
	ss.stats.Initiator = initiator
	ss.rec = reconciler{
		view: setView{set: s.cfg.Store.SyncSet(), extra: s.refused.snapshot()},
		p:    s.reconcileParams,
		push: true,
		want: s.cfg.Interest == nil,
	}
	ss.sub = newSubmitter(ctx, s, ss.peer)
	ss.reg = s.flights()
	ss.flight = ss.reg.begin(ss.peer, mayDefer && ss.rec.want && !s.cfg.NoAutoSync)
	return ss
}

func (ss *session) localHello() hello {
	flags := flagSketch
	if !ss.rec.want {
		flags |= flagNoPush
	}
	return hello{version: protoVersion, flags: flags, setLen: uint64(ss.rec.view.set.Len())}
}

func (ss *session) applyHello(h hello) {
	ss.rec.sketch = h.flags&flagSketch != 0
	if h.flags&flagNoPush != 0 {
		ss.rec.push = false
		ss.stats.NoPushToPeer = true
	}
}

// SyncWith runs one reconciliation session with a connected peer as the
// initiator and returns its figures (tests and the benchmark use it). It
// asks for everything it finds missing, even what other sessions are
// asking for at the moment (they leave it to this one instead). A peer
// that answers busy (its 2 sessions with this node are taken, by the
// scheduler's own sessions) is asked again, up to 4 times over about 4 s.
func (s *Swarm) SyncWith(ctx context.Context, p peer.ID) (SyncStats, error) {
	for attempt := 0; ; attempt++ {
		st, err := s.syncWith(ctx, p, false)
		var re *remoteError
		if attempt == syncBusyRetries || !errors.As(err, &re) || re.code != errCodeBusy {
			return st, err
		}
		t := time.NewTimer(time.Duration(250<<attempt) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return st, err
		case <-t.C:
		}
	}
}

// syncBusyRetries bounds SyncWith's retries of a busy peer.
const syncBusyRetries = 4

// syncWith is SyncWith; mayDefer (the scheduler's sessions) leaves to
// other live sessions what they ask for, and has the scheduler run it
// again once they have ended.
func (s *Swarm) syncWith(ctx context.Context, p peer.ID, mayDefer bool) (SyncStats, error) {
	if err := s.waitSyncReady(ctx); err != nil {
		return SyncStats{Peer: p, Initiator: true, Err: err}, err
	}
	budgetErr := func() (SyncStats, error) {
		err := fmt.Errorf("sync with %s: %w", p, errSyncBudget)
		return SyncStats{Peer: p, Initiator: true, Err: err}, err
	}
	if s.budgetSpent(budgetOf{peer: p}, "initiator") != "" { // before any stream: the peer sees nothing
		return budgetErr()
	}
	st, err := s.host.NewStream(network.WithNoDial(ctx, "sync"), p, ProtocolSync)
	if err != nil {
		err = fmt.Errorf("sync with %s: %w", p, err)
		return SyncStats{Peer: p, Initiator: true, Err: err}, err
	}
	// The network's, on the connection the stream took, the one its
	// claims would be charged to (a peer may have one per network).
	if s.budgetSpent(budgetOfConn(st.Conn()), "initiator") != "" {
		_ = st.Reset()
		return budgetErr()
	}
	ss := s.newSession(ctx, st, true, mayDefer)
	err = ss.run(ctx, true)
	return ss.finish(err), err
}

// handleSync serves a session a peer started.
func (s *Swarm) handleSync(st network.Stream) {
	if s.penalties.isBlocked(st.Conn().RemotePeer()) { // its connection is being closed
		_ = st.Reset()
		return
	}
	if !s.enterHandler() {
		_ = st.Reset()
		return
	}
	defer s.handlers.Done()
	// Deadlines bound each frame on real streams; this bounds the session
	// (and every session on transports that ignore deadlines).
	ctx, cancel := context.WithTimeout(s.ctx, sessionTimeout)
	defer cancel()
	p := st.Conn().RemotePeer()
	if !s.sessions.enter(p) {
		s.refuseSync(st, errCodeBusy, "busy", "too many sync sessions from this peer")
		return
	}
	defer s.sessions.leave(p)
	if !s.inbound.TryAcquire(1) {
		s.refuseSync(st, errCodeBusy, "busy", "too many sync sessions")
		return
	}
	defer s.inbound.Release(1)
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	err := s.waitSyncReady(rctx)
	cancel()
	if err != nil {
		s.refuseSync(st, errCodeNotReady, "not_ready", "sync set loading")
		return
	}
	// After the set is ready: the budget's size follows it.
	if why := s.budgetSpent(budgetOfConn(st.Conn()), "responder"); why != "" {
		s.refuseSync(st, errCodeBusy, "", why)
		return
	}
	ss := s.newSession(ctx, st, false, true)
	ss.finish(ss.run(ctx, false))
}

// refuseSync refuses a sync session as refuse does and counts it under
// reason (none: counted already).
func (s *Swarm) refuseSync(st network.Stream, code uint64, reason, msg string) {
	if reason != "" {
		s.met.syncRefused.WithLabelValues("responder", reason).Inc()
	}
	s.refuse(st, code, msg)
}

func (s *Swarm) refuse(st network.Stream, code uint64, msg string) {
	fw := newFrameWriter(st)
	_ = st.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if fw.write(appendError(nil, code, msg)) == nil && fw.flush() == nil {
		_ = st.Close()
		return
	}
	_ = st.Reset()
}

func (s *Swarm) waitSyncReady(ctx context.Context) error {
	select {
	case <-s.cfg.Store.SyncReady():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sync set not ready: %w", context.Cause(ctx))
	}
}

// run drives the session to its end. The stream is reset when ctx ends, so
// no read blocks past shutdown (mocknet streams ignore deadlines).
func (ss *session) run(ctx context.Context, initiator bool) (err error) {
	stop := context.AfterFunc(ctx, func() { _ = ss.stream.Reset() })
	defer stop()
	ss.guard = newSessionGuard(ss.stream, ss.s.sessionLimits, ss.started)
	defer func() {
		ss.guard.stop()
		if err != nil {
			if ss.guard.expired() {
				err = fmt.Errorf("%w: %w", errSessionExpired, err)
			}
			_ = ss.stream.Reset()
			return
		}
		_ = ss.stream.Close()
	}()

	var peerWants []shortID
	if initiator {
		plan := ss.rec.initial()
		ss.claim(&plan)
		h := ss.localHello()
		if err := ss.sendTurn(ctx, &h, plan, nil); err != nil {
			return ss.refusedAtOnce(err)
		}
	}
	for {
		t, err := ss.readTurn(ctx)
		if err != nil {
			return err
		}
		if ss.stats.Turns++; ss.stats.Turns > maxTurns {
			return fmt.Errorf("%w: more than %d turns", errProtocol, maxTurns)
		}
		var h *hello
		if t.hello != nil {
			ss.applyHello(*t.hello)
			if !initiator {
				lh := ss.localHello()
				h = &lh
			}
		}
		if t.final() && h == nil {
			ss.guard.stop()
			return ss.sub.wait()
		}
		peerWants = t.wants
		plan := ss.rec.respond(t.ranges)
		ss.claim(&plan)
		if err := ss.sendTurn(ctx, h, plan, peerWants); err != nil {
			return err
		}
		if plan.final() {
			ss.guard.stop()
			return ss.sub.wait()
		}
	}
}

// claim registers what the turn asks the peer for and leaves out what
// other sessions of this node are asking their peers for (inflight.go).
func (ss *session) claim(plan *turnPlan) {
	if !ss.rec.want {
		return // the peer sends nothing we ask for (noPush)
	}
	plan.wants = compactWants(plan.wants)
	ss.reg.claim(ss.flight, plan)
}

// compactWants sorts wants, drops repeats and keeps what one turn may ask:
// a peer's id lists within the turn's limits can name millions of claims
// we lack (protocol review, F8); the rest come in a later session.
func compactWants(wants []shortID) []shortID {
	slices.SortFunc(wants, shortID.compare)
	wants = slices.Compact(wants)
	return wants[:min(len(wants), maxWantsInTurn)]
}

// readTurn reads frames up to END; claims go to the submitter as they come.
func (ss *session) readTurn(ctx context.Context) (peerTurn, error) {
	var t peerTurn
	var batch []store.Claim
	rangeBytes := 0
	for {
		ss.guard.progress(ss.work())
		_ = ss.stream.SetReadDeadline(time.Now().Add(ss.guard.readLimit()))
		frame, err := ss.fr.next()
		ss.stats.BytesRecvd = ss.fr.n
		if err != nil {
			return t, fmt.Errorf("read sync frame: %w", err)
		}
		if !ss.hello && frame[0] != frameHello && frame[0] != frameError {
			return t, fmt.Errorf("%w: frame %#x before HELLO", errProtocol, frame[0])
		}
		switch frame[0] {
		case frameHello:
			if ss.hello {
				return t, fmt.Errorf("%w: HELLO out of place", errProtocol)
			}
			h, err := decodeHello(frame)
			if err != nil {
				return t, err
			}
			t.hello = &h
			ss.hello = true
			ss.guard.heardPeer()
		case frameClaims:
			claims, err := decodeClaims(frame[1:], maxFrame/minWireClaim)
			if err != nil {
				ss.s.penalize(ss.peer, "sync: "+err.Error())
				return t, err
			}
			if !ss.rec.want {
				return t, fmt.Errorf("%w: claims pushed after HELLO asked for none", errProtocol)
			}
			ss.stats.ClaimsMoved += int64(len(claims))
			ss.stats.ClaimBytes += int64(len(frame))
			ss.claimIn += int64(len(frame))
			batch = append(batch, claims...)
			if len(batch) >= submitBatch {
				if err := ss.submit(ctx, batch); err != nil {
					return t, err
				}
				batch = nil
			}
		case frameWant:
			w, err := decodeWant(frame)
			switch {
			case err != nil:
			case len(w) == 0: // never sent: a peer holding the session open
				err = fmt.Errorf("%w: empty WANT", errProtocol)
			case len(t.wants)+len(w) > maxWantsInTurn:
				err = fmt.Errorf("%w: more than %d wants in one turn", errProtocol, maxWantsInTurn)
			}
			if err != nil {
				return t, ss.violation(err)
			}
			t.wants = append(t.wants, w...)
		case frameRanges:
			rs, err := ss.rdec.decode(frame)
			rangeBytes += len(frame)
			switch {
			case err != nil:
			case len(rs) == 0:
				err = fmt.Errorf("%w: empty RANGES", errProtocol)
			case len(t.ranges)+len(rs) > maxRangesInTurn || rangeBytes > maxRangeBytesInTurn:
				err = fmt.Errorf("%w: more than %d ranges or %d bytes of them in one turn",
					errProtocol, maxRangesInTurn, maxRangeBytesInTurn)
			}
			if err != nil {
				return t, ss.violation(err)
			}
			t.ranges = append(t.ranges, rs...)
		case frameEnd:
			if len(frame) != 1 {
				return t, fmt.Errorf("%w: END with a body", errProtocol)
			}
			if !ss.hello {
				return t, fmt.Errorf("%w: first turn without HELLO", errProtocol)
			}
			ss.rdec = rangeDecoder{}
			if len(batch) > 0 {
				if err := ss.submit(ctx, batch); err != nil {
					return t, err
				}
			}
			return t, nil
		case frameError:
			return t, decodeError(frame)
		default:
			return t, fmt.Errorf("%w: unexpected frame type %#x", errProtocol, frame[0])
		}
	}
}

// work is the session's bytes that did work, which is what extends its
// lifetime: all it wrote (claims the peer lacked or asked for, answers),
// the peer's HELLO, WANT, RANGES and END (each answered), and the peer's
// CLAIMS in the share of claims stored as new. Claims refused, already
// held or still in the store's queue buy nothing: a peer streaming claims
// of signers this node does not trust (set aside unverified, at no cost to
// the peer) keeps its slot no longer than the base lifetime.
func (ss *session) work() int64 {
	n := ss.fr.n - ss.claimIn + ss.fw.n
	if moved := ss.stats.ClaimsMoved; moved > 0 {
		n += ss.claimIn * min(ss.sub.accepted.Load(), moved) / moved
	}
	return n
}

// violation counts a malformed or oversized WANT or RANGES frame against
// the peer, as a bad CLAIMS frame is: an honest peer never sends one, and
// each costs this node a decode (and a session) the peer could repeat.
func (ss *session) violation(err error) error {
	ss.s.penalize(ss.peer, "sync: "+err.Error())
	return err
}

// submit hands a batch to the submitter; the wait for the store's room is
// this node's, so it does not count as the peer's idle time.
func (ss *session) submit(ctx context.Context, batch []store.Claim) error {
	ss.guard.hold()
	defer func() { ss.guard.progress(ss.work()) }()
	return ss.sub.add(ctx, batch)
}

// refusedAtOnce explains a failed first write: a peer that refuses the
// session (busy, not ready) writes an ERROR frame and closes the stream,
// so the initiator's write can fail before it reads why. The frame is
// still there to read.
func (ss *session) refusedAtOnce(werr error) error {
	_ = ss.stream.SetReadDeadline(time.Now().Add(time.Second))
	frame, err := ss.fr.next()
	if err != nil || len(frame) == 0 || frame[0] != frameError {
		return werr
	}
	var re *remoteError
	if rerr := decodeError(frame); errors.As(rerr, &re) {
		return fmt.Errorf("%w (%v)", re, werr)
	}
	return werr
}

// finish records the session's figures and returns them.
func (ss *session) finish(err error) SyncStats {
	if werr := ss.sub.wait(); err == nil {
		err = werr
	}
	ss.stats.Duration = time.Since(ss.started)
	ss.stats.RoundTrips = (ss.stats.Turns + 1) / 2
	ss.stats.ClaimsRecvd = ss.sub.accepted.Load()
	ss.stats.Refused = ss.sub.refused.Load()
	ss.stats.Invalid = ss.sub.invalid.Load()
	ss.stats.Uninterested = ss.sub.uninterested.Load()
	ss.stats.Err = err
	// Released only now: what the peer sent for our registered spans is
	// stored, so a session that waited for them finds them held.
	ss.stats.Deferred = ss.reg.end(ss.flight)
	ss.s.recordSync(ss.stats)
	return ss.stats
}
