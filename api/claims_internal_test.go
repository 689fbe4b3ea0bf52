package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/metanode/metanode/store"
)

// FuzzClaimsBody feeds arbitrary bodies to the claims decoder: it must
// answer 400/413 or give exactly one slot per array element, never panic.
func FuzzClaimsBody(f *testing.F) {
	signer, err := store.GenerateSigner()
	if err != nil {
		f.Fatal(err)
	}
	c := signer.Text("bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "title", "x", 1)
	good, _ := json.Marshal(map[string]any{"claims": []any{c.ToJSON(false), 42, nil, "x", map[string]any{"ts": -1}}})
	f.Add(good)
	f.Add([]byte(`{"claims":[]}`))
	f.Add([]byte(`{"claims":[{"uid":"z","cid":"b","key":"k","value":{"cipher":"AA=="},"ts":1,"sig":"AA=="}]}`))
	f.Add([]byte(`{"claims":[{"value":"\ud800","ts":1e3}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Add([]byte(`{"x":[1,{"a":"]"}],"claims":[{"uid":"z","cid":"b","key":"k","value":null,"ts":12,"sig":"AA==","id":"x"} , {"UID":"z"}],"y":"\"}"}`))
	f.Add([]byte(`{"claims":[],"CLAIMS":[{}]}`))
	f.Add([]byte(`{"claims":[{"value":"caf\u00e9","ts":1}],"claims":null}`))
	f.Add([]byte("{\"claims\":[{\"value\":\"\xff\xfe\",\"ts\":1.5,\"key\":\"a\",\"key\":\"b\"},{\"value\":\"\xc3\xa9\",\"ts\":7}]}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/api/claims", strings.NewReader(string(body)))
		w := httptest.NewRecorder()
		decoded, err := readClaims(w, r)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || (e.Status != 400 && e.Status != 413) {
				t.Fatalf("body error %v", err)
			}
			return
		}
		// Reading the body whole must find the same slots.
		var whole struct{ Claims []json.RawMessage }
		if err := json.Unmarshal(body, &whole); err != nil {
			t.Fatalf("streaming reader took a body json.Unmarshal refuses: %v", err)
		}
		if len(decoded) != len(whole.Claims) {
			t.Fatalf("%d slots, json.Unmarshal finds %d", len(decoded), len(whole.Claims))
		}
		for i, raw := range whole.Claims {
			want := decodeClaim(raw)
			if !reflect.DeepEqual(decoded[i].claim, want.claim) || decoded[i].id != want.id ||
				fmt.Sprint(decoded[i].err) != fmt.Sprint(want.err) {
				t.Errorf("claim %d: got %+v, want %+v", i, decoded[i], want)
			}
		}
		for i, d := range decoded {
			if d.err != nil {
				if slug := store.Slug(d.err); slug != "schema_violation" && slug != "bad_signature" {
					t.Errorf("claim %d: slug %s for a decode failure (%v)", i, slug, d.err)
				}
				continue
			}
			// A claim that decodes re-encodes to a claim with the same id.
			j := d.claim.ToJSON(true)
			back, err := j.Claim()
			if err != nil || back.ID() != d.claim.ID() || j.ID != d.id {
				t.Errorf("claim %d: round trip %v", i, err)
			}
		}
	})
}

// BenchmarkDecodeClaims is the server's decoding of a 1000-claim body
// (body JSON, then each claim, on all cores), per claim; compare with
// store's BenchmarkVerify.
func BenchmarkDecodeClaims(b *testing.B) {
	signer, err := store.GenerateSigner()
	if err != nil {
		b.Fatal(err)
	}
	js := make([]store.ClaimJSON, 1000)
	for i := range js {
		c := signer.Text("bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "title/"+strings.Repeat("x", i%20), "A title of some length", uint64(i))
		js[i] = c.ToJSON(false)
	}
	body, _ := json.Marshal(ClaimsRequest{Claims: js})
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for range b.N {
		r := httptest.NewRequest(http.MethodPost, "/api/claims", bytes.NewReader(body))
		decoded, err := readClaims(httptest.NewRecorder(), r)
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range decoded {
			if d.err != nil {
				b.Fatal(d.err)
			}
		}
	}
	b.ReportMetric(float64(b.N*len(js))/b.Elapsed().Seconds(), "claims/s")
}
