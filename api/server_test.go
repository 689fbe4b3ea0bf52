package api_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

func TestServer_Lifecycle(t *testing.T) {
	st := storetest.Open(t, store.Config{})
	srv := api.NewServer(api.Config{Addr: "127.0.0.1:0", Store: st, Node: &testNode{st: st}, Logger: testLogger(t)})
	if srv.URL() != "" {
		t.Errorf("URL before Open: %q", srv.URL())
	}
	if err := srv.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Open(t.Context()); err == nil {
		t.Error("second Open succeeded")
	}
	url := srv.URL()
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("URL %q", url)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); !errors.Is(err, api.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if _, err := http.Get(url + "/health"); err == nil {
		t.Error("still answering after Close")
	}
	if err := srv.Open(t.Context()); err == nil {
		t.Error("Open after Close succeeded")
	}
	// Required parts.
	if err := api.NewServer(api.Config{Addr: "127.0.0.1:0"}).Open(t.Context()); err == nil {
		t.Error("Open without a store succeeded")
	}
	// Close of a server never opened.
	if err := api.NewServer(api.Config{}).Close(); err != nil {
		t.Errorf("Close unopened: %v", err)
	}
}

// TestServer_CloseDrains: a write in flight when Close starts still gets
// its durable answer; new connections are refused meanwhile.
func TestServer_CloseDrains(t *testing.T) {
	e := newEnv(t)
	e.node.entered, e.node.gate = make(chan struct{}), make(chan struct{})
	c := e.text(cidA, "title", "x", e.ts(0))
	type answer struct {
		res api.ClaimsResponse
		err error
	}
	posted := make(chan answer, 1)
	go func() {
		res, err := e.c.PostClaims(context.Background(), []store.Claim{c})
		posted <- answer{res, err}
	}()
	<-e.node.entered
	closed := make(chan error, 1)
	go func() { closed <- e.srv.Close() }()
	// Close is now waiting for the request; the listener is gone.
	refused := false
	for i := 0; i < 200 && !refused; i++ { // Close runs concurrently: poll, bounded
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := hc.Get(e.url + "/health")
		if err != nil {
			refused = true
		} else {
			resp.Body.Close()
			time.Sleep(5 * time.Millisecond)
		}
	}
	if !refused {
		t.Error("new connections still accepted while draining")
	}
	close(e.node.gate)
	a := <-posted
	if a.err != nil || a.res.Accepted != 1 {
		t.Fatalf("in-flight write: %+v %v", a.res, a.err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := e.st.Record(t.Context(), cidA, ""); err != nil {
		t.Errorf("the drained write is not stored: %v", err)
	}
}

// TestServer_CloseCutsStuckRequests: past ShutdownTimeout, Close cuts what
// is left and says so; the handler sees its context end.
func TestServer_CloseCutsStuckRequests(t *testing.T) {
	e := newEnv(t, withAPI(func(c *api.Config) { c.ShutdownTimeout = 50 * time.Millisecond }))
	e.node.entered, e.node.gate = make(chan struct{}), make(chan struct{})
	posted := make(chan error, 1)
	go func() {
		_, err := e.c.PostClaims(context.Background(), []store.Claim{e.text(cidA, "title", "x", e.ts(0))})
		posted <- err
	}()
	<-e.node.entered
	if err := e.srv.Close(); !errors.Is(err, api.ErrDrainCut) {
		t.Errorf("Close of a stuck request: %v, want api.ErrDrainCut", err)
	}
	close(e.node.gate)
	if err := <-posted; err == nil {
		t.Error("the cut request got an answer")
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	e.post(e.text(cidA, "title", "x", e.ts(0)), e.text("bad", "title", "x", e.ts(0)))
	e.get("/api/meta/" + cidA)
	e.get("/api/meta/" + cidC)
	s := e.openStream(t, "meta", "")
	e.post(e.text(cidA, "year", "1", e.ts(0)))
	s.next(t)
	// The server counts a frame once its write returned, which may be just
	// after the client read it: wait (bounded) for the count.
	text := gatherText(t, e)
	for i := 0; i < 250 && !strings.Contains(text, `metanode_sse_events_total{stream="meta"} 1`); i++ {
		time.Sleep(20 * time.Millisecond)
		text = gatherText(t, e)
	}
	for _, want := range []string{
		`metanode_http_requests_total{code="200",route="GET /api/meta/{cid}"} 1`,
		`metanode_http_requests_total{code="404",route="GET /api/meta/{cid}"} 1`,
		`metanode_http_request_duration_seconds_count{route="POST /api/claims"} 2`,
		`metanode_api_claims_total{outcome="accepted"} 2`,
		`metanode_api_claims_total{outcome="rejected"} 1`,
		`metanode_sse_subscribers{stream="meta"} 1`,
		`metanode_sse_events_total{stream="meta"} 1`, // the year's set, written to the stream
		// Events emitted (the store's count, whoever listens).
		`metanode_store_events_total{stream="meta:events"}`,
		// The store's, from the shared registry.
		`metanode_store_queue_depth`,
		`metanode_store_commit_seconds_count`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !strings.Contains(text, `metanode_http_request_duration_seconds_count{route="GET /api/events/meta"} 0`) {
		t.Error("an SSE stream counted as a request latency")
	}
}

// TestStorageUnavailable: with the store gone, every route answers 503
// storage_unavailable (retryable, Retry-After) instead of failing oddly.
func TestStorageUnavailable(t *testing.T) {
	e := newEnv(t)
	c := e.text(cidA, "title", "x", e.ts(0))
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, a := range []answer{
		e.get("/api/meta/" + cidA),
		e.get("/meta"),
		e.get("/meta/" + cidA + "/title"),
		e.get("/api/stats"),
		e.get("/api/events/meta"),
		e.do(http.MethodGet, "/api/events/meta", nil, "Last-Event-ID", "0-0"),
		e.get("/api/events/files"),
		e.sendJSON(http.MethodPost, "/api/claims", map[string]any{"claims": []any{c.ToJSON(false)}}),
		e.sendJSON(http.MethodPut, "/api/kv/value", map[string]any{"key": "k", "value": "v"}),
	} {
		a.wantError(t, 503, "storage_unavailable")
		if a.header.Get("Retry-After") != "5" {
			t.Errorf("503 without Retry-After: %v", a.header)
		}
	}
	if _, err := e.c.Meta(t.Context(), cidA, api.MetaOptions{}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("client: %v is not store.ErrUnavailable", err)
	}
}
