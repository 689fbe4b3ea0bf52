package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
)

// rawClaim is a claim's JSON form with one field's JSON replaced by raw
// bytes, as a writer that does not escape (or mis-encodes) would send it.
func rawClaim(t *testing.T, c store.Claim, field, raw string) []byte {
	t.Helper()
	b, err := json.Marshal(c.ToJSON(false))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m[field] = json.RawMessage(`"@RAW@"`)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	return bytes.Replace(b, []byte(`"@RAW@"`), []byte(raw), 1)
}

// TestPostClaims_TextAndBase64AreStrict: through the real server, a
// signed value (or key) that is not valid UTF-8, raw or as an unpaired
// escaped surrogate, is answered with its field's slug, not
// bad_signature; a sig or cipher whose base64 holds a line break, or
// stray bits in its last symbol, is refused (bad_signature, and
// schema_violation for the cipher) instead of decoded leniently. A
// surrogate pair and the plain forms of the same claims are accepted.
func TestPostClaims_TextAndBase64AreStrict(t *testing.T) {
	e := newEnv(t)
	ts := e.ts(0)
	bad := e.signer.Text(cidA, "title", "Heat\xff", ts)
	badKey := e.signer.Text(cidA, "ti\xfftle", "Heat", ts)
	pair := e.text(cidA, "emoji", "🎬", ts)
	ok := e.text(cidA, "title", "Heat", ts)
	sig := ok.ToJSON(false).Sig
	cipher := e.signer.Cipher(cidA, "seek", []byte{1, 2, 3}, ts)
	cj := cipher.ToJSON(false)
	var cv struct{ Cipher string }
	_ = json.Unmarshal(cj.Value, &cv)
	stray := sig[:len(sig)-3] + string(sig[len(sig)-3]+1) + "==" // same bytes, another last symbol

	slots := []struct {
		body       []byte
		status     string
		slug, text string
	}{
		{rawClaim(t, bad, "value", "\"Heat\xff\""), "rejected", "schema_violation", "value is not valid UTF-8"},
		{rawClaim(t, bad, "value", `"Heat\udcff"`), "rejected", "schema_violation", "value is not valid UTF-8"},
		{rawClaim(t, bad, "value", `"\ud83c x"`), "rejected", "schema_violation", "value is not valid UTF-8"},
		{rawClaim(t, badKey, "key", "\"ti\xfftle\""), "rejected", "bad_key", "key is not valid UTF-8"},
		{rawClaim(t, pair, "value", `"\ud83c\udfac"`), "accepted", "", ""},
		{rawClaim(t, ok, "sig", `"`+sig[:40]+`\n`+sig[40:]+`"`), "rejected", "bad_signature", "line break"},
		{rawClaim(t, ok, "sig", `"`+stray+`"`), "rejected", "bad_signature", "not standard base64"},
		{rawClaim(t, cipher, "value", `{"cipher":"`+cv.Cipher[:2]+`\r\n`+cv.Cipher[2:]+`"}`), "rejected", "schema_violation", "line break"},
		{rawClaim(t, ok, "sig", `"`+sig+`"`), "accepted", "", ""},
		{rawClaim(t, cipher, "value", string(cj.Value)), "accepted", "", ""},
	}
	if stray == sig {
		t.Fatal("the stray-bits form is the signature itself")
	}
	var body bytes.Buffer
	body.WriteString(`{"claims":[`)
	for i, s := range slots {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(s.body)
	}
	body.WriteString(`]}`)
	a := e.do(http.MethodPost, "/api/claims", &body, "Content-Type", "application/json")
	var res api.ClaimsResponse
	a.decode(t, &res)
	if len(res.Results) != len(slots) {
		t.Fatalf("%d results for %d claims", len(res.Results), len(slots))
	}
	for i, s := range slots {
		got := res.Results[i]
		if got.Status != s.status || got.Error != s.slug || !strings.Contains(got.Message, s.text) {
			t.Errorf("claim %d: %s %q (%s), want %s %q saying %q", i, got.Status, got.Error, got.Message, s.status, s.slug, s.text)
		}
	}
}
