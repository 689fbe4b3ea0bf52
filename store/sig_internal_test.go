package store

import (
	"testing"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
)

// TestKeyCache_ParsesOnce: a uid's key is parsed once and then served from
// the cache (the same parsed key), also to Claim.Verify; the cache stays
// bounded.
func TestKeyCache_ParsesOnce(t *testing.T) {
	kc := &keyCache{keys: map[string]*secp256k1.PublicKey{}}
	sg, err := GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	first, err := kc.get(sg.UID())
	if err != nil {
		t.Fatal(err)
	}
	again, _ := kc.get(sg.UID())
	if first != again {
		t.Fatal("the key was parsed again")
	}
	c := sg.Text("bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy", "title", "x", 1)
	if err := kc.verify(&c, c.ID()); err != nil || len(kc.keys) != 1 {
		t.Fatalf("verify through the cache: %v, %d keys", err, len(kc.keys))
	}
	if _, err := kc.get("zbad"); err == nil || len(kc.keys) != 1 {
		t.Fatalf("a bad uid: %v, %d keys (a bad uid must not be cached)", err, len(kc.keys))
	}
	for i := len(kc.keys); i < keyCacheMax; i++ {
		kc.keys[string(rune(i))] = first // stand-ins: only the count matters
	}
	other, _ := GenerateSigner()
	if _, err := kc.get(other.UID()); err != nil || len(kc.keys) > keyCacheMax {
		t.Fatalf("past the bound: %v, %d keys cached, bound %d", err, len(kc.keys), keyCacheMax)
	}
}
