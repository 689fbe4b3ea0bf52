package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/metanode/metanode/store"
)

// SSE framing (http-api.md "Events"):
//
//	id: <ms13>-<seq10>\nevent: <type>\ndata: <JSON>\n\n
//
// A gap frame has no id line; the heartbeat is the comment ":keep-alive".

const (
	flushAt       = 32 << 10 // bytes of frames buffered before a write during a snapshot
	maxBatch      = 256      // events drained from the subscription per write
	keepAliveLine = ":keep-alive\n\n"
	gapReason     = "retention" // the gap frame's reason, as upstream sends it
	gapReset      = "reset"     // the stream started over: drop what you hold, read from 0-0
)

// appendFrame appends one SSE frame. id and typ lose any line break (they
// could otherwise forge frames); data is split into one data line per line.
func appendFrame(b []byte, id, typ string, data []byte) []byte {
	if id != "" {
		b = append(b, "id: "...)
		b = appendOneLine(b, id)
		b = append(b, '\n')
	}
	if typ == "" {
		typ = "message"
	}
	b = append(b, "event: "...)
	b = appendOneLine(b, typ)
	b = append(b, '\n')
	if bytes.IndexByte(data, '\r') >= 0 {
		data = bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
	}
	for {
		line, rest, more := bytes.Cut(data, []byte("\n"))
		b = append(b, "data: "...)
		b = append(b, line...)
		b = append(b, '\n')
		if !more {
			break
		}
		data = rest
	}
	return append(b, '\n')
}

func appendOneLine(b []byte, s string) []byte {
	if strings.ContainsAny(s, "\r\n") {
		s = strings.NewReplacer("\r", "", "\n", "").Replace(s)
	}
	return append(b, s...)
}

func (s *Server) handleEventsMeta(w http.ResponseWriter, r *http.Request) error {
	return s.serveEvents(w, r, store.StreamMeta, "meta")
}

func (s *Server) handleEventsFiles(w http.ResponseWriter, r *http.Request) error {
	return s.serveEvents(w, r, store.StreamFiles, "files")
}

// sseWriter writes frames with a deadline per write, so a consumer that
// stopped reading ends its own stream instead of holding a goroutine.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (sw *sseWriter) write(b []byte) error {
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout))
	if _, err := sw.w.Write(b); err != nil {
		return errWritten(err)
	}
	return errWritten(sw.rc.Flush())
}

func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, stream store.Stream, label string) error {
	last := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	meta := stream == store.StreamMeta
	// A meta consumer that starts over (0-0) gets the snapshot; one whose
	// cursor is past a gap gets the whole state again (replayState), with
	// a del for each key it may hold that is gone.
	snapshot := meta && (last == "0" || last == "0-0")
	replay, goneAfter := false, ""

	var (
		sub *store.Subscription
		gap *store.Gap // written right after the headers
	)
	if !snapshot {
		var err error
		sub, err = s.cfg.Store.Subscribe(stream, last)
		if errors.Is(err, store.ErrMalformed) { // the only input is the cursor
			// As upstream: an id that does not parse counts as 0-0, older
			// than anything retained, so a gap and then everything (meta:
			// the snapshot; files: every retained event). A consumer with
			// a corrupt cursor ("undefined" from JS) heals instead of
			// retrying into a 400 forever; resumeFrom 0-0 redoes this.
			gap = &store.Gap{Requested: last, ResumeFrom: "0-0"}
			if meta {
				snapshot, err = true, nil
			} else {
				sub, err = s.cfg.Store.Subscribe(stream, "0-0")
			}
		}
		if err != nil {
			return err // before any byte: a clean envelope (503 when storage is down)
		}
		if sub != nil {
			defer sub.Close()
			if sub.Gap != nil {
				g := *sub.Gap
				if gap != nil { // 0-0 is past retention too: one gap, naming what the client sent
					g.Requested = gap.Requested
					if g.ResumeFrom == "" {
						g.ResumeFrom = gap.ResumeFrom
					}
				}
				gap = &g
				if meta {
					// Not the retained tail: the whole state. resumeFrom is
					// the cursor itself, so a consumer cut off before the
					// replay's last event (the one with an id) gets it again.
					sub.Close()
					sub, replay, goneAfter = nil, true, last
					gap.ResumeFrom = last
				}
			}
		}
	}
	if st, ok := w.(*statusWriter); ok {
		st.stream = true
	}
	s.metrics.subscribers.WithLabelValues(label).Inc()
	defer s.metrics.subscribers.WithLabelValues(label).Dec()

	rc := http.NewResponseController(w)
	out := &sseWriter{w: w, rc: rc, timeout: s.cfg.SSEWriteTimeout}
	// begin sends the headers, once: after Subscribe, or for a snapshot at
	// its first event, so that a store that is down still gets a 503.
	begun := false
	begin := func() error {
		if begun {
			return nil
		}
		begun = true
		_ = rc.SetReadDeadline(time.Time{}) // a stream outlives the server's request deadlines
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("Connection", "keep-alive")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		if gap != nil {
			return s.writeGap(out, *gap)
		}
		return out.write(nil) // flush the headers right away
	}
	events := s.metrics.events.WithLabelValues(label)

	if snapshot || replay {
		if replay { // the gap goes out before the wait for a rebuild
			if err := begin(); err != nil {
				return err
			}
		}
		var err error
		if sub, err = s.replayState(r, out, begin, events, replay, goneAfter); err != nil || sub == nil {
			return err
		}
		defer sub.Close()
	} else if err := begin(); err != nil {
		return err
	}
	return s.streamLive(r, out, sub, label, events)
}

// replayRounds bounds how often a replay starts over because the state
// changed under it (a rebuild, a clear, a trim past it); then the stream
// ends and the consumer's reconnect starts one more.
const replayRounds = 3

// replayState sends a meta consumer the whole state: with dels, a del for
// every key it may hold that is gone since goneAfter (store.Gone), then a
// set for every merged key (the snapshot; its last event carries the id
// to resume after), and subscribes after it. It waits for a rebuild that
// runs rather than send half of its state; when the state changed under
// it (the subscription after the snapshot has a gap), it sends that gap
// and starts over. A nil subscription ends the stream.
func (s *Server) replayState(r *http.Request, out *sseWriter, begin func() error, events interface{ Add(float64) }, dels bool, goneAfter string) (*store.Subscription, error) {
	ctx := r.Context()
	for round := 1; ; round++ {
		if err := s.cfg.Store.AwaitRebuild(ctx); err != nil {
			return nil, nil // the client went away, or shutdown
		}
		if dels {
			if err := s.writeGone(ctx, out, begin, events, goneAfter); err != nil {
				return nil, err
			}
		}
		after, err := s.writeSnapshot(r, out, begin, events)
		if err != nil {
			return nil, err
		}
		if err := begin(); err != nil {
			return nil, err
		}
		if after == "" {
			// The stream was empty at the snapshot: whatever it holds now
			// came after it.
			after = "0-0"
		}
		sub, err := s.cfg.Store.Subscribe(store.StreamMeta, after)
		if err != nil {
			s.log.Warn("subscribe after snapshot", "err", err)
			return nil, nil // the client resumes with the snapshot's id
		}
		if sub.Gap == nil {
			return sub, nil
		}
		sub.Close()
		g := *sub.Gap
		g.ResumeFrom = g.Requested
		if err := s.writeGap(out, g); err != nil {
			return nil, err
		}
		if round == replayRounds {
			return nil, nil
		}
		dels, goneAfter = true, after
	}
}

// writeGone writes a del event (no id) for each key store.Gone names.
func (s *Server) writeGone(ctx context.Context, out *sseWriter, begin func() error, events interface{ Add(float64) }, after string) error {
	buf, n := make([]byte, 0, flushAt+4096), 0
	err := s.cfg.Store.Gone(ctx, after, func(ev store.Event) error {
		if err := begin(); err != nil {
			return err
		}
		buf = appendFrame(buf, "", ev.Type, ev.Data)
		if n++; len(buf) >= flushAt {
			if err := out.write(buf); err != nil {
				return err
			}
			events.Add(float64(n))
			buf, n = buf[:0], 0
		}
		return nil
	})
	if err != nil || len(buf) == 0 {
		return err
	}
	if err := out.write(buf); err != nil {
		return err
	}
	events.Add(float64(n))
	return nil
}

// streamLive writes the subscription's events as they come, with the
// heartbeat, until the client goes, the server closes or the store ends
// the subscription.
func (s *Server) streamLive(r *http.Request, out *sseWriter, sub *store.Subscription, label string, events interface{ Add(float64) }) error {
	buf := make([]byte, 0, 4096)
	timer := time.NewTimer(s.cfg.KeepAlive)
	defer timer.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-s.streams.Done():
			s.metrics.dropped.WithLabelValues(label, "shutdown").Inc()
			return nil
		case <-timer.C:
			if err := out.write([]byte(keepAliveLine)); err != nil {
				s.metrics.dropped.WithLabelValues(label, "write").Inc()
				return err
			}
			timer.Reset(s.cfg.KeepAlive)
		case ev, ok := <-sub.C:
			n, closed := 0, !ok
			buf = buf[:0]
			for ok {
				buf = appendFrame(buf, ev.ID, ev.Type, ev.Data)
				if n++; n == maxBatch {
					break
				}
				select { // take what is already queued: one write for a burst
				case ev, ok = <-sub.C:
					closed = !ok
				default:
					ok = false
				}
			}
			if closed && errors.Is(sub.Err(), store.ErrSlowConsumer) {
				// Consumers ignore comments; this one helps whoever debugs.
				buf = append(buf, ": dropped as too slow; reconnect with Last-Event-ID\n\n"...)
			}
			if len(buf) > 0 {
				if err := out.write(buf); err != nil {
					s.metrics.dropped.WithLabelValues(label, "write").Inc()
					return err
				}
				events.Add(float64(n))
			}
			if closed {
				reason := "closed"
				if errors.Is(sub.Err(), store.ErrSlowConsumer) {
					reason = "slow"
				}
				s.metrics.dropped.WithLabelValues(label, reason).Inc()
				s.log.Debug("event stream ended", "stream", label, "reason", sub.Err())
				return nil
			}
			timer.Reset(s.cfg.KeepAlive)
		}
	}
}

// writeGap writes a gap frame (no id line). The reason is upstream's
// "retention" when only events were trimmed, the one value consumers have
// seen, and "reset" when the stream started over (the store's own wording
// is for people).
func (s *Server) writeGap(out *sseWriter, g store.Gap) error {
	g.Reason = gapReason
	if g.Reset {
		g.Reason = gapReset
	}
	data, _ := json.Marshal(g)
	return out.write(appendFrame(nil, "", "gap", data))
}

// writeSnapshot writes one set event per merged key; only the last carries
// an id (the stream position to resume after), which it returns.
func (s *Server) writeSnapshot(r *http.Request, out *sseWriter, begin func() error, events interface{ Add(float64) }) (string, error) {
	var (
		buf     = make([]byte, 0, flushAt+4096)
		held    store.Event
		holding bool
		n       int
	)
	after, err := s.cfg.Store.Snapshot(r.Context(), func(ev store.Event) error {
		if err := begin(); err != nil {
			return err
		}
		if holding {
			buf = appendFrame(buf, "", held.Type, held.Data)
			n++
		}
		held, holding = ev, true
		held.Data = append([]byte(nil), ev.Data...) // fn's event may reuse its buffer
		if len(buf) >= flushAt {
			if err := out.write(buf); err != nil {
				return err
			}
			events.Add(float64(n))
			buf, n = buf[:0], 0
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if holding {
		buf = appendFrame(buf, after, held.Type, held.Data)
		n++
	}
	if len(buf) > 0 {
		if err := out.write(buf); err != nil {
			return "", err
		}
		events.Add(float64(n))
	}
	return after, nil
}
