package store_test

import (
	"bytes"
	"encoding/base32"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

type vectorFile struct {
	Vectors []struct {
		Name          string          `json:"name"`
		PrivateKeyHex string          `json:"privateKeyHex"`
		Claim         json.RawMessage `json:"claim"`
		PayloadHex    string          `json:"payloadHex"`
		ID            string          `json:"id"`
		WireHex       string          `json:"wireHex"`
	} `json:"vectors"`
}

func loadVectors(t testing.TB) vectorFile {
	t.Helper()
	b, err := os.ReadFile("testdata/mmur2-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vf vectorFile
	if err := json.Unmarshal(b, &vf); err != nil {
		t.Fatal(err)
	}
	if len(vf.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	return vf
}

var vectorTime = time.UnixMilli(1729872000000)

func TestClaim_Vectors(t *testing.T) {
	for _, v := range loadVectors(t).Vectors {
		t.Run(v.Name, func(t *testing.T) {
			var c store.Claim
			if err := json.Unmarshal(v.Claim, &c); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if got, want := hex.EncodeToString(c.Payload()), v.PayloadHex; got != want {
				t.Fatalf("payload=%s, want %s", got, want)
			}
			if got, want := c.ID().String(), v.ID; got != want {
				t.Fatalf("id=%s, want %s", got, want)
			}
			if got, want := hex.EncodeToString(c.Wire()), v.WireHex; got != want {
				t.Fatalf("wire=%s, want %s", got, want)
			}
			if err := c.Check(vectorTime, 0); err != nil {
				t.Fatalf("check: %v", err)
			}
			if err := c.Verify(); err != nil {
				t.Fatalf("verify: %v", err)
			}
			if err := store.VerifyTabled(&c); err != nil {
				t.Fatalf("verify with a key table: %v", err)
			}

			// Signing the same claim with the vector's key reproduces the signature.
			signer, err := store.SignerFromHex(v.PrivateKeyHex)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := signer.UID(), c.UID; got != want {
				t.Fatalf("uid=%s, want %s", got, want)
			}
			again := c
			again.Sig = [64]byte{}
			signer.Sign(&again)
			if again.Sig != c.Sig {
				t.Fatalf("sig=%x, want %x", again.Sig, c.Sig)
			}

			// Wire round trip.
			wire, _ := hex.DecodeString(v.WireHex)
			dec, n, err := store.DecodeWire(wire)
			if err != nil {
				t.Fatalf("decode wire: %v", err)
			}
			if n != len(wire) {
				t.Fatalf("used %d of %d bytes", n, len(wire))
			}
			if !claimsEqual(dec, c) {
				t.Fatalf("decoded %+v, want %+v", dec, c)
			}

			// JSON round trip gives back the vector's JSON fields.
			out, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			var a, b map[string]any
			json.Unmarshal(out, &a)
			json.Unmarshal(v.Claim, &b)
			if ja, jb := mustJSON(a), mustJSON(b); ja != jb {
				t.Fatalf("json=%s, want %s", ja, jb)
			}
		})
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func claimsEqual(a, b store.Claim) bool {
	return a.UID == b.UID && a.CID == b.CID && a.Key == b.Key && a.Kind == b.Kind &&
		bytes.Equal(a.Value, b.Value) && a.TS == b.TS && a.Sig == b.Sig
}

func TestClaim_DERSignatureStoredAsCompact(t *testing.T) {
	v := loadVectors(t).Vectors[0]
	signer, _ := store.SignerFromHex(v.PrivateKeyHex)
	var c store.Claim
	if err := json.Unmarshal(v.Claim, &c); err != nil {
		t.Fatal(err)
	}
	id := c.ID()
	der := ecdsa.Sign(signer.PrivateKey(), id[:]).Serialize()
	var m map[string]any
	json.Unmarshal(v.Claim, &m)
	m["sig"] = base64.StdEncoding.EncodeToString(der)
	var fromDER store.Claim
	if err := json.Unmarshal([]byte(mustJSON(m)), &fromDER); err != nil {
		t.Fatalf("DER sig refused: %v", err)
	}
	if fromDER.Sig != c.Sig {
		t.Fatalf("compact form of DER sig = %x, want %x", fromDER.Sig, c.Sig)
	}
}

func TestClaim_Rejections(t *testing.T) {
	signer, _ := store.SignerFromHex("950e3de4825e825e11a11a6a0a1b137617dadf616ec3b97b36a3e7ea5c3c34b2")
	const cid = "bagacbabaeddealivdfucjicjvwd4g4nfar5gonjvykwimb7cx6sih52zdtbhu"
	const other = "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	ts := uint64(vectorTime.UnixMilli())
	text := func(mod func(c *store.Claim)) store.Claim {
		c := store.Claim{CID: cid, Key: "title", Kind: store.KindText, Value: []byte("x"), TS: ts}
		mod(&c)
		signer.Sign(&c)
		return c
	}
	tests := []struct {
		name  string
		claim store.Claim
		want  error
	}{
		{"BadUID", func() store.Claim { c := text(func(*store.Claim) {}); c.UID = "zNotAKey"; return c }(), store.ErrBadUID},
		{"UIDWithoutZ", func() store.Claim { c := text(func(*store.Claim) {}); c.UID = c.UID[1:]; return c }(), store.ErrBadUID},
		{"CIDv0Accepted", text(func(c *store.Claim) { c.CID = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG" }), nil},
		{"NonCanonicalCID", text(func(c *store.Claim) { c.CID = strings.ToUpper(cid) }), store.ErrBadCID},
		{"GarbageCID", text(func(c *store.Claim) { c.CID = "not-a-cid" }), store.ErrBadCID},
		{"EmptyKey", text(func(c *store.Claim) { c.Key = "" }), store.ErrBadKey},
		{"LeadingSlash", text(func(c *store.Claim) { c.Key = "/title" }), store.ErrBadKey},
		{"TrailingSlash", text(func(c *store.Claim) { c.Key = "title/" }), store.ErrBadKey},
		{"EmptySegment", text(func(c *store.Claim) { c.Key = "a//b" }), store.ErrBadKey},
		{"DotSegment", text(func(c *store.Claim) { c.Key = "a/./b" }), store.ErrBadKey},
		{"DotDotSegment", text(func(c *store.Claim) { c.Key = "a/../b" }), store.ErrBadKey},
		{"ControlChar", text(func(c *store.Claim) { c.Key = "a\x01b" }), store.ErrBadKey},
		{"C1ControlChar", text(func(c *store.Claim) { c.Key = "a\u0085b" }), store.ErrBadKey},
		{"LongKey", text(func(c *store.Claim) { c.Key = strings.Repeat("k", 1025) }), store.ErrBadKey},
		{"MaxKey", text(func(c *store.Claim) { c.Key = strings.Repeat("k", 1024) }), nil},
		{"CidUnderscore", text(func(c *store.Claim) { c.Key = "cid_sha2-256" }), store.ErrDeprecatedField},
		{"Midhash", text(func(c *store.Claim) { c.Key = "midhash256" }), store.ErrDeprecatedField},
		{"CanonicalCID", text(func(c *store.Claim) { c.Key = "canonical_cid" }), store.ErrDeprecatedField},
		{"FilePath", text(func(c *store.Claim) { c.Key = "filePath" }), store.ErrReservedKey},
		{"MtimeNano", text(func(c *store.Claim) { c.Key = "mtimeNano" }), store.ErrReservedKey},
		{"SizeByteAllowed", text(func(c *store.Claim) { c.Key = "sizeByte" }), nil},
		{"TextTooLarge", text(func(c *store.Claim) { c.Value = bytes.Repeat([]byte("v"), 65537) }), store.ErrTooLarge},
		{"TextAtLimit", text(func(c *store.Claim) { c.Value = bytes.Repeat([]byte("v"), 65536) }), nil},
		{"CipherTooLarge", text(func(c *store.Claim) { c.Kind = store.KindCipher; c.Value = make([]byte, 65537) }), store.ErrTooLarge},
		{"InvalidUTF8", text(func(c *store.Claim) { c.Value = []byte{0xff, 0xfe} }), store.ErrBadValue},
		{"FutureTS", text(func(c *store.Claim) { c.TS = ts + uint64(11*time.Minute/time.Millisecond) }), store.ErrFutureTimestamp},
		{"NearFutureTS", text(func(c *store.Claim) { c.TS = ts + uint64(9*time.Minute/time.Millisecond) }), nil},
		{"LinkOK", text(func(c *store.Claim) { c.Key = "cids/" + other; c.Value = []byte("true") }), nil},
		{"LinkRetraction", text(func(c *store.Claim) { c.Key = "cids/" + other; c.Kind = store.KindRetraction; c.Value = nil }), nil},
		{"LinkNotTrue", text(func(c *store.Claim) { c.Key = "cids/" + other; c.Value = []byte("yes") }), store.ErrBadValue},
		{"LinkToSelf", text(func(c *store.Claim) { c.Key = "cids/" + cid; c.Value = []byte("true") }), store.ErrBadKey},
		{"LinkBadTarget", text(func(c *store.Claim) { c.Key = "cids/xyz"; c.Value = []byte("true") }), store.ErrBadKey},
		{"BadSignature", func() store.Claim { c := text(func(*store.Claim) {}); c.Sig[5] ^= 1; return c }(), store.ErrBadSignature},
		{"ValueTampered", func() store.Claim { c := text(func(*store.Claim) {}); c.Value = []byte("y"); return c }(), store.ErrBadSignature},
		{"HighS", func() store.Claim { c := text(func(*store.Claim) {}); return flipS(c) }(), store.ErrBadSignature},
		{"ZeroSig", func() store.Claim { c := text(func(*store.Claim) {}); c.Sig = [64]byte{}; return c }(), store.ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.claim.Check(vectorTime, 0)
			if err == nil {
				err = tt.claim.Verify()
				if tabled := store.VerifyTabled(&tt.claim); !errors.Is(tabled, tt.want) || (tt.want == nil && tabled != nil) {
					t.Fatalf("with a key table: err=%v, want %v", tabled, tt.want)
				}
			}
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("err=%v, want %v", err, tt.want)
			}
			if err != nil && store.Slug(err) == "internal" {
				t.Fatalf("err %v has no slug", err)
			}
		})
	}
}

// flipS replaces s by n - s: the same signature in its malleable high-S form.
func flipS(c store.Claim) store.Claim {
	var s secp256k1.ModNScalar
	s.SetByteSlice(c.Sig[32:])
	s.Negate()
	s.PutBytesUnchecked(c.Sig[32:])
	return c
}

func TestClaim_JSONErrors(t *testing.T) {
	base := `{"uid":"zxjtBGusZUthKPncxSPceaMYhbJagPVN5k9nmp9aUhg9D","cid":"bagacbabaeddealivdfucjicjvwd4g4nfar5gonjvykwimb7cx6sih52zdtbhu","key":"title",` +
		`"sig":"Wzjf2IDGDVEwY+sxHkdATEOxyHxyNeXk+3iE+StM2YZuo8kso7ZH4ynqVDgh5p8U3aHfKdDSsQyFAK0HaTKMXg==",`
	tests := []struct{ name, body string }{
		{"NoValue", base + `"ts":1}`},
		{"NumberValue", base + `"value":5,"ts":1}`},
		{"NegativeTS", base + `"value":"x","ts":-1}`},
		{"FloatTS", base + `"value":"x","ts":1.5}`},
		{"StringTS", base + `"value":"x","ts":"1"}`},
		{"BadCipher", base + `"value":{"cipher":"!!"},"ts":1}`},
		{"CipherExtraField", base + `"value":{"cipher":"AA==","x":1},"ts":1}`},
		{"NotObject", `[1,2]`},
		{"HugeTS", base + `"value":"x","ts":18446744073709551616}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c store.Claim
			if err := json.Unmarshal([]byte(tt.body), &c); err == nil {
				t.Fatalf("accepted %s", tt.body)
			}
		})
	}
	// A ts beyond uint64 is an integer: the error says it is out of range.
	var c store.Claim
	err := json.Unmarshal([]byte(base+`"value":"x","ts":18446744073709551616}`), &c)
	if !errors.Is(err, store.ErrMalformed) || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("huge ts: %v", err)
	}
}

func TestDecodeWire_Rejects(t *testing.T) {
	v := loadVectors(t).Vectors[0]
	wire, _ := hex.DecodeString(v.WireHex)
	// Every truncation fails cleanly.
	for i := range len(wire) {
		if _, _, err := store.DecodeWire(wire[:i]); err == nil {
			t.Fatalf("truncated to %d bytes accepted", i)
		}
	}
	// A non-minimal length prefix is refused (it would change nothing signed
	// but make two encodings of one claim).
	padded := append([]byte{wire[0] | 0x80, 0x81, 0x00}, wire[2:]...)
	if _, _, err := store.DecodeWire(padded); err == nil {
		t.Fatal("non-canonical prefix accepted")
	}
	// Wrong magic.
	bad := bytes.Clone(wire)
	bad[2] = 'X'
	if _, _, err := store.DecodeWire(bad); !errors.Is(err, store.ErrMalformed) {
		t.Fatalf("bad magic: err=%v", err)
	}
}

func FuzzDecodeWire(f *testing.F) {
	for _, v := range loadVectors(f).Vectors {
		w, _ := hex.DecodeString(v.WireHex)
		f.Add(w)
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, n, err := store.DecodeWire(b)
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("used %d of %d bytes", n, len(b))
		}
		// What decodes re-encodes to the same bytes.
		if got := c.Wire(); !bytes.Equal(got, b[:n]) {
			t.Fatalf("re-encoded %x, want %x", got, b[:n])
		}
		_ = c.Check(time.Now(), 0)
	})
}

func FuzzClaimJSON(f *testing.F) {
	for _, v := range loadVectors(f).Vectors {
		f.Add([]byte(v.Claim))
	}
	f.Add([]byte(`{"value":{"cipher":""}}`))
	f.Add([]byte("{\"key\":\"t\xff\",\"value\":\"\\ud800\\udc00\\udc00\"}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c store.Claim
		if err := json.Unmarshal(b, &c); err != nil {
			return
		}

		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back store.Claim
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("round trip of %s: %v", out, err)
		}
		if !claimsEqual(c, back) {
			t.Fatalf("round trip changed %+v into %+v", c, back)
		}
	})
}

func TestVerifyAll(t *testing.T) {
	signer, _ := store.GenerateSigner()
	claims := make([]store.Claim, 100)
	ids := make([]store.ID, len(claims))
	for i := range claims {
		claims[i] = signer.Text("bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "k", strings.Repeat("x", i), uint64(i))
		ids[i] = claims[i].ID()
	}
	claims[17].Sig[3] ^= 1
	claims[42].Sig[3] ^= 1
	skip := make([]bool, len(claims))
	skip[42] = true
	errs := store.VerifyAll(claims, ids, skip)
	for i, err := range errs {
		if (err != nil) != (i == 17) {
			t.Fatalf("claim %d: err=%v", i, err)
		}
	}
}

// urlLocatorCID is a canonical CIDv1 (codec url 0x1006, identity
// multihash) carrying url, as the url-locator vector is.
func urlLocatorCID(url string) string {
	b := []byte{0x01}
	b = binary.AppendUvarint(b, 0x1006)
	b = append(b, 0x00)
	b = binary.AppendUvarint(b, uint64(len(url)))
	b = append(b, url...)
	return "b" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// TestClaim_LongLocatorCID: claims.md sets no cid length limit; the node's
// bound is the longest cid a link key (cids/<cid>, at most 1024 bytes) can
// name, so a signed download url of a few hundred bytes is a valid cid, a
// claim on it round-trips the wire, and a link to it is a valid key.
func TestClaim_LongLocatorCID(t *testing.T) {
	if store.MaxCIDBytes != store.MaxKeyBytes-len(store.LinkPrefix) {
		t.Fatalf("MaxCIDBytes %d, want MaxKeyBytes - len(LinkPrefix)", store.MaxCIDBytes)
	}
	sg := storetest.Signer(0)
	for _, n := range []int{330, 550} {
		c := urlLocatorCID("https://example.org/download?token=" + strings.Repeat("x", n))
		if len(c) <= 512 || len(c) > store.MaxCIDBytes {
			t.Fatalf("test cid of %d bytes", len(c))
		}
		if r := store.CIDRank(c); r != 5 {
			t.Fatalf("rank %d, want 5 (locator)", r)
		}
		cl := sg.Text(c, "title", "x", uint64(vectorTime.UnixMilli()))
		if err := cl.Check(vectorTime, 0); err != nil {
			t.Fatalf("a claim on a %d-byte locator cid: %v", len(c), err)
		}
		back, _, err := store.DecodeWire(cl.Wire())
		if err != nil || back.ID() != cl.ID() {
			t.Fatalf("wire round trip: %v", err)
		}
		link := sg.Text(storetest.CID(1), store.LinkPrefix+c, "true", uint64(vectorTime.UnixMilli()))
		if err := link.Check(vectorTime, 0); err != nil {
			t.Fatalf("a link to a %d-byte cid: %v", len(c), err)
		}
	}
	long := urlLocatorCID("https://example.org/" + strings.Repeat("y", 700))
	if err := store.CheckCID(long); !errors.Is(err, store.ErrBadCID) {
		t.Fatalf("a %d-byte cid: %v, want ErrBadCID", len(long), err)
	}
}
