package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/metanode/metanode/api"
)

// goInternals are words of Go's own JSON errors that mean nothing to a
// consumer of the HTTP API.
var goInternals = []string{"Go value", "Go struct", "api.", "store.", "json.", "of type", "[]"}

func wantMessage(t *testing.T, where string, msg string, want ...string) {
	t.Helper()
	for _, g := range goInternals {
		if strings.Contains(msg, g) {
			t.Errorf("%s: message %q leaks Go internals (%q)", where, msg, g)
		}
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: message %q does not say %q", where, msg, w)
		}
	}
}

func envelope(t *testing.T, a answer) api.Error {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("%s: %v", a.body, err)
	}
	return e
}

// Error messages say what is wrong in the request's terms (field, JSON
// type, range), not in Go's; before they read "cannot unmarshal array into
// Go value of type api.claimsBody" and the like.
func TestErrorMessages_RequestTerms(t *testing.T) {
	e := newEnv(t)
	bodies := []struct {
		method, path, body string
		want               []string
	}{
		{"POST", "/api/claims", `[]`, []string{"body must be an object, not an array"}},
		{"POST", "/api/claims", `{"claims":{}}`, []string{`field "claims" must be an array, not an object`}},
		{"POST", "/api/merge", `{"claims":{}}`, []string{`field "claims" must be an array, not an object`}},
		{"POST", "/api/merge", `{"claims":[],"as":5}`, []string{`field "as" must be a string, not a number`}},
		{"POST", "/api/metadata/search", `{"limit":"x"}`, []string{`field "limit" must be an integer, not a string`}},
		{"POST", "/api/metadata/search", `{"limit":99999999999999999999}`, []string{`field "limit"`, "99999999999999999999 is out of range", "9223372036854775807"}},
		{"POST", "/api/metadata/search", `{"limit":1.5}`, []string{`field "limit" must be an integer, not 1.5`}},
		{"POST", "/api/metadata/search", `{"filters":[{"values":"x"}]}`, []string{`field "filters.values" must be an array, not a string`}},
		{"POST", "/api/metadata/search", `{"filters":[{"exact":"yes"}]}`, []string{`field "filters.exact" must be true or false, not a string`}},
		{"POST", "/api/metadata/search", `{"query":`, []string{"body is not valid JSON"}},
		{"PUT", "/api/kv/value", `{"key":7,"value":"x"}`, []string{`field "key" must be a string, not a number`}},
	}
	for _, b := range bodies {
		a := e.do(b.method, b.path, strings.NewReader(b.body), "Content-Type", "application/json")
		a.wantError(t, 400, "schema_violation")
		wantMessage(t, b.method+" "+b.path+" "+b.body, envelope(t, a).Message, b.want...)
	}
	for _, q := range []string{"limit=99999999999999999999", "offset=99999999999999999999"} {
		a := e.get("/api/metadata/list?" + q)
		a.wantError(t, 400, "schema_violation")
		wantMessage(t, q, envelope(t, a).Message, "99999999999999999999 is out of range")
	}
	a := e.get("/api/metadata/list?limit=-3")
	a.wantError(t, 400, "schema_violation")
	wantMessage(t, "limit=-3", envelope(t, a).Message, "must be a non-negative integer")

	// A claim slot that does not decode says why in its result.
	c := e.text(cidA, "title", "x", e.ts(0))
	huge := c.ToJSON(false)
	huge.TS = json.RawMessage("18446744073709551616")
	slots := []struct {
		claim any
		want  []string
	}{
		{"not a claim", []string{"claim must be an object, not a string"}},
		{map[string]any{"uid": 5}, []string{`field "uid" must be a string, not a number`}},
		{huge, []string{"ts 18446744073709551616 is out of range", "18446744073709551615"}},
	}
	for _, s := range slots {
		var res api.ClaimsResponse
		e.sendJSON(http.MethodPost, "/api/claims", map[string]any{"claims": []any{s.claim}}).decode(t, &res)
		if len(res.Results) != 1 || res.Results[0].Status != "rejected" || res.Results[0].Error != "schema_violation" {
			t.Fatalf("%v: %+v", s.claim, res)
		}
		wantMessage(t, "claim slot", res.Results[0].Message, s.want...)
	}
}

// The smaller inconsistencies of the probe: a null scratch value is refused
// like a missing one, and POST /api/merge wants its claims array as POST
// /api/claims does.
func TestRequestShapes_Consistent(t *testing.T) {
	e := newEnv(t)
	for _, b := range []string{`{"key":"svc:a","value":null}`, `{"key":"svc:a"}`, `{"key":"svc:a","value":5}`} {
		e.do(http.MethodPut, "/api/kv/value", strings.NewReader(b)).wantError(t, 400, "schema_violation")
	}
	var kv api.KVValue
	e.get("/api/kv/value?key=svc:a").decode(t, &kv)
	if kv.Exists {
		t.Errorf("a refused put stored %+v", kv)
	}
	for _, p := range []string{"/api/claims", "/api/merge"} {
		a := e.do(http.MethodPost, p, strings.NewReader(`{}`))
		a.wantError(t, 400, "schema_violation")
		wantMessage(t, p, envelope(t, a).Message, `{"claims":[…]}`)
	}
	var m api.MergeResponse
	e.do(http.MethodPost, "/api/merge", strings.NewReader(`{"claims":[]}`)).decode(t, &m)
	if len(m.Fields) != 0 || len(m.Rejected) != 0 {
		t.Errorf("empty merge: %+v", m)
	}
}
