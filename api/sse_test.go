package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

// waitLimit bounds every wait of these tests; it is a hang guard, not a
// timing assertion.
const waitLimit = 20 * time.Second

// sseStream is one open event stream read by a goroutine into events.
type sseStream struct {
	resp   *http.Response
	events chan store.Event
	done   chan error // the reader's end: io.EOF for a clean end
	cancel context.CancelFunc
}

func (e *env) openStream(t testing.TB, name, lastID string) *sseStream {
	t.Helper()
	return e.openStreamWith(t, http.DefaultClient, name, lastID)
}

func (e *env) openStreamWith(t testing.TB, hc *http.Client, name, lastID string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/api/events/"+name, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" ||
		resp.Header.Get("Cache-Control") != "no-cache" || resp.Header.Get("X-Accel-Buffering") != "no" {
		resp.Body.Close()
		cancel()
		t.Fatalf("stream %s: %d %v", name, resp.StatusCode, resp.Header)
	}
	s := &sseStream{resp: resp, events: make(chan store.Event, 1<<16), done: make(chan error, 1), cancel: cancel}
	go func() {
		defer close(s.events)
		s.done <- api.ReadEvents(resp.Body, func(ev store.Event) error {
			s.events <- ev
			return nil
		})
	}()
	t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
	for range s.events { // let the reader finish
	}
}

// next returns the next event, failing the test if the stream ends or
// nothing comes within waitLimit.
func (s *sseStream) next(t testing.TB) store.Event {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			t.Fatalf("stream ended: %v", <-s.done)
		}
		return ev
	case <-time.After(waitLimit):
		t.Fatal("no event")
	}
	return store.Event{}
}

// until returns events up to and including the first one f accepts.
func (s *sseStream) until(t testing.TB, f func(store.Event) bool) []store.Event {
	t.Helper()
	var out []store.Event
	for {
		ev := s.next(t)
		out = append(out, ev)
		if f(ev) {
			return out
		}
	}
}

type metaData struct {
	Type string `json:"type"`
	Key  string `json:"key"`
	TS   string `json:"ts"` // a string, as upstream's streams sent
}

func metaOf(t testing.TB, ev store.Event) metaData {
	t.Helper()
	var d metaData
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatalf("meta event data %s: %v", ev.Data, err)
	}
	return d
}

func keyIs(t testing.TB, key string) func(store.Event) bool {
	return func(ev store.Event) bool { return ev.Type != "gap" && metaOf(t, ev).Key == key }
}

var eventID = regexp.MustCompile(`^\d{13}-\d{10}$`)

func TestSSE_LiveAndResume(t *testing.T) {
	e := newEnv(t)
	live := e.openStream(t, "meta", "")
	e.post(e.text(cidA, "title", "Inception", e.ts(0)))
	rec, err := e.c.Meta(t.Context(), cidA, api.MetaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	titleKey := "file:" + rec.RID + "/title"
	evs := live.until(t, keyIs(t, titleKey))
	title := evs[len(evs)-1]
	if title.Type != "set" || !eventID.MatchString(title.ID) {
		t.Errorf("title event: %+v", title)
	}
	if d := metaOf(t, title); d.Type != "set" || d.TS == "" {
		t.Errorf("title data %s", title.Data)
	}

	e.post(e.text(cidA, "year", "2010", e.ts(0)))
	yearKey := "file:" + rec.RID + "/year"
	year := live.until(t, keyIs(t, yearKey))
	last := year[len(year)-1]

	// Resume strictly after the title event: the year comes again, the title does not.
	resumed := e.openStream(t, "meta", title.ID)
	got := resumed.until(t, keyIs(t, yearKey))
	prev := title.ID
	for _, ev := range got {
		if ev.ID <= prev {
			t.Errorf("resumed id %s not after %s", ev.ID, prev)
		}
		prev = ev.ID
		if metaOf(t, ev).Key == titleKey {
			t.Errorf("resume replayed the title event %s", ev.ID)
		}
	}
	if got[len(got)-1].ID != last.ID {
		t.Errorf("resumed year event %s, live one %s", got[len(got)-1].ID, last.ID)
	}

	// A vote that changes no merged value emits nothing: the next event
	// after an unchanged title is the genre that follows it.
	other, _ := store.GenerateSigner()
	e.post(other.Text(cidA, "title", "inception", e.ts(1)))
	e.post(e.text(cidA, "genre", "Sci-Fi", e.ts(0)))
	for _, ev := range live.until(t, keyIs(t, "file:"+rec.RID+"/genre")) {
		if metaOf(t, ev).Key == titleKey {
			t.Errorf("a vote that left the merged title alone emitted %s", ev.Data)
		}
	}
}

func TestSSE_FrameFormat(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/api/events/meta", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	e.post(e.text(cidA, "title", "x", e.ts(0)))
	br := bufio.NewReader(resp.Body)
	var frame []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\n" {
			break
		}
		frame = append(frame, line)
	}
	if len(frame) != 3 || !regexp.MustCompile(`^id: \d{13}-\d{10}\n$`).MatchString(frame[0]) ||
		frame[1] != "event: set\n" || !regexp.MustCompile(`^data: \{.*\}\n$`).MatchString(frame[2]) {
		t.Errorf("frame %q", frame)
	}
}

func TestSSE_Snapshot(t *testing.T) {
	for _, cursor := range []string{"0", "0-0"} {
		t.Run(cursor, func(t *testing.T) {
			e := newSeeded(t)
			e.post(e.text(cidC, "title", "Memento", e.ts(0)))
			want := map[string]bool{}
			for _, h := range []string{cidA, cidC} {
				var r api.RecordResponse
				e.get("/meta/"+h).decode(t, &r)
				for k := range r.Metadata {
					want["file:"+r.HashID+"/"+k] = true
				}
			}
			s := e.openStream(t, "meta", cursor)
			var snapID string
			got := map[string]bool{}
			for snapID == "" {
				ev := s.next(t)
				d := metaOf(t, ev)
				if ev.Type != "set" || d.Type != "set" {
					t.Fatalf("snapshot event %+v", ev)
				}
				got[d.Key] = true
				snapID = ev.ID // only the last carries one
			}
			if len(got) != len(want) {
				t.Errorf("snapshot keys %v, want %v", got, want)
			}
			for k := range want {
				if !got[k] {
					t.Errorf("snapshot lacks %s", k)
				}
			}
			// Then the live tail, after the snapshot's id.
			e.post(e.text(cidC, "year", "2000", e.ts(0)))
			ev := s.next(t)
			if ev.ID <= snapID || !strings.HasSuffix(metaOf(t, ev).Key, "/year") {
				t.Errorf("after the snapshot (%s): %+v", snapID, ev)
			}
		})
	}
}

// A cursor past retention on the meta stream gets upstream's gap frame,
// then the whole state (replay_test.go has what that state is): the gap's
// resumeFrom is the cursor itself, so a consumer cut off before the
// replay's last event gets the replay again.
func TestSSE_Gap(t *testing.T) {
	e := newEnv(t, withStore(func(c *store.Config) { c.EventRetention = 4 }))
	live := e.openStream(t, "meta", "")
	e.post(e.text(cidA, "k", "v", e.ts(0)))
	first := live.next(t)
	// Well past retention (the store trims in chunks of at least 64).
	claims := make([]store.Claim, 150)
	for i := range claims {
		claims[i] = e.text(cidA, "k"+itoa(i), "v", e.ts(0))
	}
	e.post(claims...)
	rec, err := e.c.Meta(t.Context(), cidA, api.MetaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live.until(t, keyIs(t, "file:"+rec.RID+"/k149"))

	s := e.openStream(t, "meta", first.ID)
	gap := s.next(t)
	if gap.Type != "gap" || gap.ID != "" {
		t.Fatalf("first frame %+v, want a gap without id", gap)
	}
	var g struct{ Requested, ResumeFrom, Reason string }
	if err := json.Unmarshal(gap.Data, &g); err != nil || g.Requested != first.ID || g.ResumeFrom != first.ID || g.Reason != "retention" {
		t.Errorf("gap data %s (%v)", gap.Data, err)
	}
	// Upstream's frame, byte for byte in its keys and reason.
	if !strings.HasPrefix(string(gap.Data), `{"requested":`) || !strings.HasSuffix(string(gap.Data), `,"reason":"retention"}`) ||
		!strings.Contains(string(gap.Data), `"resumeFrom"`) {
		t.Errorf("gap data field names: %s", gap.Data)
	}
	replay := s.until(t, func(ev store.Event) bool { return ev.ID != "" })
	if n := len(replay); n != len(rec.Metadata) || replay[n-1].ID <= first.ID {
		t.Errorf("replay of %d events ending at %s, want the %d merged keys", n, replay[n-1].ID, len(rec.Metadata))
	}
}

// TestSSE_GapAfterReset: a cursor from before a clear (the same for a
// rebuilt cache) gets reason "reset", not "retention".
func TestSSE_GapAfterReset(t *testing.T) {
	e := newEnv(t)
	live := e.openStream(t, "meta", "")
	e.post(e.text(cidA, "k", "v", e.ts(0)))
	first := live.next(t)
	if a := e.do(http.MethodPost, "/api/metadata/clear", nil); a.status != http.StatusOK {
		t.Fatalf("clear: %d %s", a.status, a.body)
	}
	gap := e.openStream(t, "meta", first.ID).next(t)
	var g struct{ Requested, ResumeFrom, Reason string }
	if gap.Type != "gap" || json.Unmarshal(gap.Data, &g) != nil || g.Requested != first.ID || g.Reason != "reset" {
		t.Fatalf("gap %+v %s, want reason reset", gap, gap.Data)
	}
}

func TestSSE_KeepAlive(t *testing.T) {
	e := newEnv(t, withAPI(func(c *api.Config) { c.KeepAlive = 20 * time.Millisecond }))
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/api/events/files", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for n := 0; n < 2; { // two heartbeats in a row: the timer re-arms
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("no keep-alive: %v", err)
		}
		if line == ":keep-alive\n" {
			n++
		}
	}
}

func TestSSE_FilesStream(t *testing.T) {
	e := newEnv(t)
	s := e.openStream(t, "files", "")
	writeFile(t, e.root+"/plugin/a.txt", "hello")
	r, err := e.c.RegisterFile(t.Context(), "plugin/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	ev := s.next(t)
	var d map[string]any
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "add" || d["type"] != "add" || d["path"] != "plugin/a.txt" || d["size"] != "5" ||
		d["midhash256"] != r.CID || !eventID.MatchString(ev.ID) {
		t.Errorf("file event %+v %v", ev, d)
	}
	for k, v := range d {
		if _, ok := v.(string); !ok {
			t.Errorf("file event value %s=%v is not a string", k, v)
		}
	}
}

// A Last-Event-ID that does not parse counts as 0-0, as upstream: a gap
// naming it (resumeFrom 0-0), then the meta snapshot or every retained file
// event, then the live tail; never a 400 the consumer retries forever.
func TestSSE_MalformedCursor(t *testing.T) {
	e := newSeeded(t)
	writeFile(t, e.root+"/plugin/a.txt", "hello")
	if _, err := e.c.RegisterFile(t.Context(), "plugin/a.txt"); err != nil {
		t.Fatal(err)
	}
	var ids struct{ HashIDs []string }
	e.get("/meta").decode(t, &ids)
	want := map[string]bool{}
	for _, h := range ids.HashIDs {
		var r api.RecordResponse
		e.get("/meta/"+h).decode(t, &r)
		for k := range r.Metadata {
			want["file:"+r.HashID+"/"+k] = true
		}
	}
	if len(ids.HashIDs) < 2 {
		t.Fatalf("seed: %v", ids.HashIDs)
	}
	for _, cursor := range []string{"undefined", "null", "-1", "1-2-3", "1796039144765-", "garbage", "0x10", "١٢"} {
		t.Run(cursor, func(t *testing.T) {
			wantGap := func(s *sseStream) {
				t.Helper()
				gap := s.next(t)
				var g struct{ Requested, ResumeFrom, Reason string }
				if gap.Type != "gap" || gap.ID != "" || json.Unmarshal(gap.Data, &g) != nil ||
					g.Requested != cursor || g.ResumeFrom != "0-0" || g.Reason != "retention" {
					t.Fatalf("first frame %+v %s, want a gap for %q resuming from 0-0", gap, gap.Data, cursor)
				}
			}
			m := e.openStream(t, "meta", cursor)
			wantGap(m)
			snap := m.until(t, func(ev store.Event) bool { return ev.ID != "" })
			keys := map[string]bool{}
			for _, ev := range snap {
				keys[metaOf(t, ev).Key] = true
			}
			if !maps.Equal(keys, want) {
				t.Errorf("snapshot after the gap: %v, want %v", keys, want)
			}

			f := e.openStream(t, "files", cursor)
			wantGap(f)
			if ev := f.next(t); ev.Type != "add" || !strings.Contains(string(ev.Data), `"plugin/a.txt"`) {
				t.Errorf("files replay after the gap: %+v %s", ev, ev.Data)
			}
		})
	}
}

// Past retention, a malformed cursor gets one gap (not two): the store's,
// naming what the client sent, resuming at the oldest retained event.
func TestSSE_MalformedCursorPastRetention(t *testing.T) {
	e := newEnv(t, withStore(func(c *store.Config) { c.EventRetention = 4 }))
	live := e.openStream(t, "files", "")
	addFiles(t, e, 0, 150) // the store trims in chunks of at least 64
	live.until(t, func(ev store.Event) bool { return strings.Contains(string(ev.Data), `"f149"`) })
	s := e.openStream(t, "files", "undefined")
	gap := s.next(t)
	var g struct{ Requested, ResumeFrom, Reason string }
	if gap.Type != "gap" || json.Unmarshal(gap.Data, &g) != nil || g.Requested != "undefined" ||
		!eventID.MatchString(g.ResumeFrom) || g.Reason != "retention" {
		t.Fatalf("gap %+v %s", gap, gap.Data)
	}
	if ev := s.next(t); ev.Type == "gap" || ev.ID <= g.ResumeFrom {
		t.Errorf("after the gap: %+v, resumeFrom %s", ev, g.ResumeFrom)
	}
}

func TestSSE_ShutdownEndsStreamCleanly(t *testing.T) {
	e := newEnv(t)
	s := e.openStream(t, "meta", "")
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if !errors.Is(err, io.EOF) {
			t.Errorf("stream ended with %v, want a clean end", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("stream still open after Close")
	}
}

// addFiles commits n file events (files from..from+n-1) in one store
// transaction and fails if the writer is held up.
func addFiles(t testing.TB, e *env, from, n int) {
	t.Helper()
	ups := make([]store.FileUpdate, n)
	for i := range ups {
		k := from + i
		ups[i] = store.FileUpdate{Op: store.FileAdd, EventPath: "f" + itoa(k),
			File: store.LocalFile{Path: e.root + "/f" + itoa(k), CID: cidN(k), Size: int64(k), MtimeNano: 1}}
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	if _, err := e.st.ApplyFiles(ctx, ups); err != nil {
		t.Fatalf("writer held up: %v", err)
	}
}

// resumeAll reads a dropped stream to its end, resumes from the last id it
// got and checks that files 0..n-1 each arrive exactly once in all.
func resumeAll(t *testing.T, e *env, body io.Reader, n int) {
	seen := map[string]bool{}
	var lastID string
	err := api.ReadEvents(body, func(ev store.Event) error {
		var d map[string]string
		_ = json.Unmarshal(ev.Data, &d)
		if seen[d["path"]] {
			t.Errorf("%s delivered twice", d["path"])
		}
		seen[d["path"]] = true
		lastID = ev.ID
		return nil
	})
	// A stream cut in the middle of a write ends short; a dropped one cleanly.
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("dropped stream ended with %v", err)
	}
	if lastID == "" {
		t.Fatal("no event before the drop")
	}
	t.Logf("%d of %d events before the drop", len(seen), n)
	s := e.openStream(t, "files", lastID)
	for len(seen) < n {
		ev := s.next(t)
		if ev.Type == "gap" {
			t.Fatalf("gap on resume: %s", ev.Data)
		}
		var d map[string]string
		_ = json.Unmarshal(ev.Data, &d)
		if seen[d["path"]] {
			t.Fatalf("%s delivered twice", d["path"])
		}
		seen[d["path"]] = true
	}
}

// TestSSE_SlowConsumer: a burst larger than a subscriber's buffer drops
// the stream (the writer does not wait), the stream ends cleanly, and the
// consumer resumes from its last id without losing or repeating an event.
// Small socket buffers on both ends and a client that reads only after the
// burst make the drop certain: with the kernel's default buffers the
// handler could drain the subscription as fast as the writer filled it,
// and the stream, never dropped, was read until the test timed out (CI).
func TestSSE_SlowConsumer(t *testing.T) {
	ln, hc := narrowLink(t)
	e := newEnv(t, withStore(func(c *store.Config) { c.SubscriberBuffer = 64 }),
		withAPI(func(c *api.Config) { c.Listener = ln }))
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit) // bounds the reads below
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/api/events/files", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n := 300
	addFiles(t, e, 0, n)
	if !strings.Contains(gatherText(t, e), `metanode_sse_disconnects_total{reason="slow",stream="files"} 1`) {
		// The drop is recorded when the handler sees the closed channel:
		// read the stream first, then look again.
		defer func() {
			if !strings.Contains(gatherText(t, e), `metanode_sse_disconnects_total{reason="slow",stream="files"} 1`) {
				t.Errorf("no slow disconnect counted:\n%s", gatherText(t, e))
			}
		}()
	}
	resumeAll(t, e, resp.Body, n)
}

// narrowLink returns a listener whose connections have a small send buffer
// and a client whose connections have a tiny receive buffer, so that a
// server writing to a client that does not read backs up after a few KiB.
func narrowLink(t *testing.T) (net.Listener, *http.Client) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = setRecvBuffer(fd, 2048) })
		if err != nil {
			return err
		}
		return serr
	}}
	hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	t.Cleanup(hc.CloseIdleConnections)
	return smallSendBuffers{ln}, hc
}

// TestSSE_StalledConsumer: a client that stops reading altogether is cut
// after SSEWriteTimeout, never holding up the writer, and resumes.
func TestSSE_StalledConsumer(t *testing.T) {
	ln, hc := narrowLink(t)
	e := newEnv(t, withAPI(func(c *api.Config) {
		c.SSEWriteTimeout = 100 * time.Millisecond
		c.Listener = ln
	}))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/api/events/files", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	const batch = 200 // below the subscriber buffer: only the stall can end the stream
	written := 0
	for deadline := time.Now().Add(waitLimit); !streamDropped(t, e, "write") && time.Now().Before(deadline); {
		addFiles(t, e, written, batch)
		written += batch
		time.Sleep(10 * time.Millisecond) // let the handler block on the full socket
	}
	if !streamDropped(t, e, "write") {
		t.Fatalf("stream still open after %d events", written)
	}
	resumeAll(t, e, resp.Body, written)
}

// smallSendBuffers gives each accepted connection a small fixed send
// buffer, so that a stalled reader backs the server up after a few KiB.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

func gatherText(t testing.TB, e *env) string {
	a := e.get("/metrics")
	if a.status != 200 {
		t.Fatalf("metrics: %d", a.status)
	}
	return string(a.body)
}

// streamDropped reports whether the server ended a stream for reason,
// from its own metrics.
func streamDropped(t testing.TB, e *env, reason string) bool {
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "metanode_sse_disconnects_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason && m.GetCounter().GetValue() > 0 {
					return true
				}
			}
		}
	}
	return false
}

func itoa(n int) string { return strconv.Itoa(n) }
