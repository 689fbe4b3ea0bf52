package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// DefaultSubscriberBuffer is how many events a live subscriber may lag
// (published but not yet received) before it is dropped (ErrSlowConsumer);
// it then resumes from its last id, replayed from the cache. It is well
// above the largest single commit (a 10k-claim batch, a file scan), so a
// big commit never drops a subscriber that reads normally.
const DefaultSubscriberBuffer = 65536

// maxChanBuffer caps a subscription's channel: beyond it a lagging
// subscriber is fed from the event rows in the cache, not from memory.
const maxChanBuffer = 4096

// pumpPage is how many events a pump reads from the cache at a time.
const pumpPage = 512

// ErrSlowConsumer closes a subscription that fell too far behind: more than
// SubscriberBuffer events, or past what the stream retains.
var ErrSlowConsumer = errors.New("subscriber too slow: fell too far behind")

type subState uint8

const (
	subReplaying subState = iota // a pump feeds C from the cache (a backlog, or fallen behind)
	subLive                      // the writer feeds C
	subClosing                   // closed by the consumer while replaying
	subClosed
)

// Subscription is a live feed of one stream.
type Subscription struct {
	C   <-chan Event // closed when dropped as too slow, on Close, or when the store closes
	Gap *Gap

	c      chan Event
	h      *hub
	stream Stream
	stop   chan struct{}
	wake   chan struct{} // cap 1: the hub asks the pump to look at overrun and the horizon

	// guarded by h.mu
	state   subState
	skip    string // events up to this id were replayed: not sent again live
	sent    string // id of the last event the writer put into c
	bounded bool   // live at least once: the lag bound applies
	overrun bool   // lagged more than SubscriberBuffer: the pump drops it
	err     error

	// pos is the stream position (count of events published) of the last
	// event put into c; the writer and the pump advance it.
	pos atomic.Int64
}

// Close stops the subscription.
func (sub *Subscription) Close() {
	h := sub.h
	h.mu.Lock()
	defer h.mu.Unlock()
	switch sub.state {
	case subReplaying:
		sub.state = subClosing
		close(sub.stop)
	case subLive:
		h.dropLocked(sub, nil)
	}
}

// Err says why C was closed: ErrSlowConsumer, ErrClosed, or nil after Close.
func (sub *Subscription) Err() error {
	sub.h.mu.Lock()
	defer sub.h.mu.Unlock()
	return sub.err
}

// hub fans committed events out to subscribers. The writer publishes after
// each cache commit and never blocks: when a live subscriber's channel is
// full, the subscriber falls back to a pump that reads the (committed)
// event rows from the cache after its last id, and is dropped only once it
// lags by more than SubscriberBuffer events or its events are trimmed.
type hub struct {
	s       *Store
	mu      sync.Mutex
	subs    map[Stream]map[*Subscription]struct{} // live: fed by the writer
	pumped  map[Stream]map[*Subscription]struct{} // fed by a pump
	last    map[Stream]string                     // newest id published
	n       map[Stream]int64                      // events published
	horizon map[Stream]string
	reset   map[Stream]string // newest marker of the stream starting over
	bound   int64
	chanCap int // maxChanBuffer; tests shrink it to reach the pump cheaply
	closed  bool
}

func newHub(s *Store) *hub {
	return &hub{
		s:       s,
		subs:    map[Stream]map[*Subscription]struct{}{StreamMeta: {}, StreamFiles: {}},
		pumped:  map[Stream]map[*Subscription]struct{}{StreamMeta: {}, StreamFiles: {}},
		last:    map[Stream]string{},
		n:       map[Stream]int64{},
		horizon: map[Stream]string{},
		reset:   map[Stream]string{},
		bound:   int64(s.cfg.SubscriberBuffer),
		chanCap: maxChanBuffer,
	}
}

func (h *hub) publish(evs []streamEvent) {
	if len(evs) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range evs {
		h.last[e.stream] = e.ev.ID
		h.n[e.stream]++
		for sub := range h.subs[e.stream] {
			if sub.skip != "" {
				if e.ev.ID <= sub.skip {
					sub.pos.Store(h.n[e.stream]) // the pump sent it before it was published
					continue
				}
				sub.skip = ""
			}
			select {
			case sub.c <- e.ev:
				sub.sent = e.ev.ID
				sub.pos.Store(h.n[e.stream])
			default:
				h.fallBehindLocked(sub)
			}
		}
	}
	// Lag = published after the last event put into c + what c still holds.
	for st, m := range h.pumped {
		for sub := range m {
			if sub.bounded && !sub.overrun && h.n[st]-sub.pos.Load()+int64(len(sub.c)) > h.bound {
				sub.overrun = true
				sub.poke()
			}
		}
	}
}

// fallBehindLocked hands a live subscription whose channel is full to a
// pump that continues after the last event the writer put into it. The
// events it missed are committed (publish runs after the cache commit).
func (h *hub) fallBehindLocked(sub *Subscription) {
	delete(h.subs[sub.stream], sub)
	sub.state, sub.skip = subReplaying, ""
	h.s.met.behind.WithLabelValues(string(sub.stream)).Inc()
	h.startPumpLocked(sub, sub.sent)
}

// startPumpLocked runs a pump for sub. The hub is open (Close drops every
// live subscription and then refuses new ones), so the store's WaitGroup
// has not been waited on yet.
func (h *hub) startPumpLocked(sub *Subscription, cursor string) {
	h.pumped[sub.stream][sub] = struct{}{}
	h.s.wg.Add(1)
	go h.s.pump(sub, cursor)
}

func (sub *Subscription) poke() {
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

func (h *hub) setHorizons(m map[Stream]string) {
	if len(m) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for st, id := range m {
		h.horizon[st] = id
		if id > h.last[st] {
			h.last[st] = id
		}
		for sub := range h.pumped[st] {
			sub.poke() // a pump holding a trimmed page drops now, not when read again
		}
	}
}

func (h *hub) setReset(st Stream, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reset[st] = id
}

// mustDrop says whether a pumped subscription has to end: it lagged past
// its bound, or events after upTo are gone (so the next read would skip).
func (h *hub) mustDrop(sub *Subscription, upTo string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return sub.overrun || h.horizon[sub.stream] > upTo
}

// dropLocked ends a live subscription.
func (h *hub) dropLocked(sub *Subscription, err error) {
	if sub.state == subClosed {
		return
	}
	delete(h.subs[sub.stream], sub)
	sub.state, sub.err = subClosed, err
	close(sub.c)
	h.s.met.subs.WithLabelValues(string(sub.stream)).Dec()
}

// close ends every live subscription; pumped ones end when their pump sees
// the store's context end.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, m := range h.subs {
		for sub := range m {
			h.dropLocked(sub, ErrClosed)
		}
	}
}

// finish ends a pumped subscription from its pump.
func (h *hub) finish(sub *Subscription, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.pumped[sub.stream], sub)
	if sub.state != subClosed {
		if sub.state == subClosing {
			err = nil
		}
		sub.state, sub.err = subClosed, err
		close(sub.c)
		h.s.met.subs.WithLabelValues(string(sub.stream)).Dec()
	}
}

// Subscribe follows a stream. after == "": live tail only; a known id:
// replay strictly after it, then live; an id older than retention, or
// newer than any the stream issued: the subscription's Gap is set and
// replay starts at the oldest retained event. "0" and "0-0" replay
// everything retained.
func (s *Store) Subscribe(stream Stream, after string) (*Subscription, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if stream != StreamMeta && stream != StreamFiles {
		return nil, fmt.Errorf("%w: unknown stream %q", ErrMalformed, stream)
	}
	h := s.hub
	sub := &Subscription{c: make(chan Event, min(s.cfg.SubscriberBuffer, h.chanCap)), h: h, stream: stream,
		stop: make(chan struct{}), wake: make(chan struct{}, 1)}
	sub.C = sub.c
	cursor := ""
	if after != "" {
		ms, seq, ok := parseEventID(after)
		if !ok {
			return nil, fmt.Errorf("%w: event id %q is not <ms>-<seq>", ErrMalformed, after)
		}
		cursor = formatEventID(ms, seq)
		h.mu.Lock()
		hz, last, rz := h.horizon[stream], h.last[stream], h.reset[stream]
		h.mu.Unlock()
		reason, reset := "", false
		switch {
		case rz != "" && cursor < rz:
			reason, reset = "the stream started over since this cursor (cache rebuilt or cleared, or files reset)", true
		case hz != "" && cursor < hz:
			reason = "events before this cursor are no longer retained"
		case cursor > last && cursor > zeroEventID:
			// The hub learns of ids after their commit, and a snapshot or a
			// pump hands out committed ones: only a cursor past what the
			// cache committed was never issued by this stream.
			issued, err := s.issuedID(context.Background(), stream)
			if err != nil {
				return nil, fmt.Errorf("subscribe: %w", err)
			}
			if cursor > issued {
				reason = "this stream never issued that cursor (a deleted cache, or an id from elsewhere)"
				reset = rz != "" // it may be the old stream's
			}
		}
		if reason != "" {
			// Replay what is retained after the horizon (everything when
			// there is none), as for a cursor older than retention.
			from := max(hz, zeroEventID)
			// resumeFrom is the horizon, not the first event replayed: a
			// consumer that saves it before that event arrives resumes
			// strictly after it, and so still gets the event.
			sub.Gap = &Gap{Requested: after, ResumeFrom: from, Reason: reason, Reset: reset}
			cursor = from
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	s.met.subs.WithLabelValues(string(stream)).Inc()
	if after == "" {
		sub.state, sub.bounded, sub.sent = subLive, true, h.last[stream]
		sub.pos.Store(h.n[stream])
		h.subs[stream][sub] = struct{}{}
		return sub, nil
	}
	sub.state = subReplaying
	h.startPumpLocked(sub, cursor)
	return sub, nil
}

// pump feeds a subscription from the cache strictly after cursor, page by
// page (a backlog it asked for, or events it fell behind on), then hands
// it back to the writer's live feed once nothing newer than its cursor is
// published. It drops the subscription when the hub flags it as overrun
// or the events it still needs are trimmed.
func (s *Store) pump(sub *Subscription, cursor string) {
	defer s.wg.Done()
	h := sub.h
	for {
		evs, err := s.readEvents(s.ctx, sub.stream, cursor, pumpPage)
		if err != nil {
			h.finish(sub, ErrClosed)
			return
		}
		if h.mustDrop(sub, cursor) { // lagged too far, or the backlog was trimmed under us
			h.finish(sub, ErrSlowConsumer)
			return
		}
		for i := 0; i < len(evs); {
			select {
			case sub.c <- evs[i]:
				cursor = evs[i].ID
				sub.pos.Add(1)
				i++
			case <-sub.wake:
				// The page in hand is intact even if trimmed since: drop only
				// when what comes after it is gone.
				if h.mustDrop(sub, evs[len(evs)-1].ID) {
					h.finish(sub, ErrSlowConsumer)
					return
				}
			case <-sub.stop:
				h.finish(sub, nil)
				return
			case <-s.ctx.Done():
				h.finish(sub, ErrClosed)
				return
			}
		}
		if len(evs) == pumpPage {
			continue
		}
		h.mu.Lock()
		switch {
		case sub.state == subClosing:
			h.mu.Unlock()
			h.finish(sub, nil)
			return
		case h.closed:
			h.mu.Unlock()
			h.finish(sub, ErrClosed)
			return
		case sub.overrun:
			h.mu.Unlock()
			h.finish(sub, ErrSlowConsumer)
			return
		case h.last[sub.stream] <= cursor:
			// Events up to cursor that the writer has yet to publish were
			// sent already: skip them when they are.
			delete(h.pumped[sub.stream], sub)
			if !sub.bounded { // a replay's count means nothing: every published event is delivered
				sub.pos.Store(h.n[sub.stream])
			}
			sub.state, sub.skip, sub.sent, sub.bounded = subLive, cursor, cursor, true
			h.subs[sub.stream][sub] = struct{}{}
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
	}
}
