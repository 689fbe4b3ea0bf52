package api_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

// The body budget: while a request holds all of it (a chunked claims body
// still arriving), another body waits, then gets 503 busy with
// Retry-After, retryable; requests without a body are served meanwhile;
// once the first is done the budget is free again, and api.Client's
// busy retry gets a refused batch in.
func TestBodyBudget_BusyThenServed(t *testing.T) {
	e := newEnv(t, withAPI(func(c *api.Config) { c.BodyBudget = api.MaxClaimsBody; c.BodyWait = 200 * time.Millisecond }))
	inFlight := func() float64 { return metricValue(t, e, "metanode_http_body_bytes_in_flight", nil) }
	busyAnswers := func() float64 {
		return metricValue(t, e, "metanode_http_requests_total", map[string]string{"route": "/", "code": "503"})
	}

	// A: a body of unknown length (chunked), which reserves the largest
	// size, and has not finished arriving.
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", e.url+"/api/claims", pr)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		status int
		body   string
		err    error
	}
	first := make(chan result, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		first <- result{status: resp.StatusCode, body: string(b)}
	}()
	one := claimsBody(t, e.text(cidA, "title", "big", e.ts(0)))
	head := one[:len(one)-2] // {"claims":[{…}
	if _, err := io.WriteString(pw, head); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the first body to hold the budget", func() bool { return inFlight() == api.MaxClaimsBody })

	a := e.rawReq("POST", "/api/claims", "", claimsBody(t, e.text(cidB, "title", "small", e.ts(1))), "Content-Type", "application/json")
	a.wantError(t, http.StatusServiceUnavailable, api.SlugBusy)
	if a.header.Get("Retry-After") != "1" || !strings.Contains(string(a.body), `"retryable":true`) {
		t.Errorf("busy answer: %v %s", a.header, a.body)
	}
	if a := e.get("/health"); a.status != 200 {
		t.Errorf("a request without a body waited for the budget: %d", a.status)
	}

	// The client's retry: refused once, then in once the budget is free.
	busy := busyAnswers()
	posted := make(chan error, 1)
	go func() {
		_, err := e.c.PostClaims(context.Background(), []store.Claim{e.text(cidN(1), "title", "retried", e.ts(2))})
		posted <- err
	}()
	waitUntil(t, "the client's first try to be refused", func() bool { return busyAnswers() > busy })

	// A ends.
	if _, err := io.WriteString(pw, "]}"); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	r := <-first
	if r.err != nil || r.status != 200 {
		t.Fatalf("the maximum-size body: %v %d %s", r.err, r.status, r.body)
	}
	if err := <-posted; err != nil {
		t.Fatalf("the client's retried batch: %v", err)
	}
	if m, err := e.c.Meta(context.Background(), cidN(1), api.MetaOptions{}); err != nil || m.Metadata["title"] != "retried" {
		t.Errorf("the retried batch: %+v %v", m, err)
	}
	waitUntil(t, "the budget to be free", func() bool { return inFlight() == 0 })
	var ae *api.Error
	if _, err := e.c.PostClaims(context.Background(), []store.Claim{e.text(cidB, "title", "small", e.ts(3))}); errors.As(err, &ae) {
		t.Errorf("after the budget was freed: %v", err)
	}
}

// metricValue is the value of the counter or gauge name whose labels
// include want, 0 when absent.
func metricValue(t *testing.T, e *env, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return 0
}

// waitUntil polls cond every 10 ms for at most 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
