package store

import (
	"errors"
	"testing"
)

// TestKeyCache_ParsesOnce: a uid's key is parsed once and then served from
// the cache (the same parsed key), also to Claim.Verify; the cache stays
// bounded.
func TestKeyCache_ParsesOnce(t *testing.T) {
	kc := newKeyCache(keyTableAfter)
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
		kc.keys[string(rune(i))] = &keyEntry{pk: first} // stand-ins: only the count matters
	}
	other, _ := GenerateSigner()
	if _, err := kc.get(other.UID()); err != nil || len(kc.keys) > keyCacheMax {
		t.Fatalf("past the bound: %v, %d keys cached, bound %d", err, len(kc.keys), keyCacheMax)
	}
}

// TestKeyCache_TableForFrequentSigners: a signer's table is built on its
// tableAfter-th valid verification, is then used (a valid claim passes, a forged
// one fails with ErrBadSignature), and no more than keyTablesMax are built.
func TestKeyCache_TableForFrequentSigners(t *testing.T) {
	kc := newKeyCache(3)
	sg, err := GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	c := sg.Text("bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy", "title", "x", 1)
	e, _ := kc.entry(sg.UID())
	for i := 1; i <= 3; i++ {
		if err := kc.verify(&c, c.ID()); err != nil {
			t.Fatalf("verification %d: %v", i, err)
		}
		if built := e.table.Load() != nil; built != (i == 3) {
			t.Fatalf("after %d verifications: table built %v, want it from the 3rd", i, built)
		}
	}
	if err := kc.verifyWith(&c, c.ID(), false); err != nil {
		t.Fatalf("plain verification: %v", err)
	}
	forged := c
	forged.Value = []byte("y") // same signature, other payload
	if err := kc.verify(&forged, forged.ID()); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("forged claim through the table: %v, want ErrBadSignature", err)
	}
	if kc.tables.Load() != 1 {
		t.Fatalf("%d tables counted, want 1", kc.tables.Load())
	}

	// Forged claims never count towards a table: a key that signed nothing
	// valid cannot take one of the few slots.
	forger, _ := GenerateSigner()
	fc := forger.Text("bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy", "title", "x", 1)
	fc.Value = []byte("y")
	for range 5 {
		if err := kc.verify(&fc, fc.ID()); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("forged claim: %v", err)
		}
	}
	if fe, _ := kc.entry(forger.UID()); fe.table.Load() != nil || kc.tables.Load() != 1 {
		t.Fatalf("forged signatures earned a table (%d counted)", kc.tables.Load())
	}

	kc.tables.Store(keyTablesMax)
	other, _ := GenerateSigner()
	oc := other.Text("bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy", "title", "x", 1)
	for range 5 {
		if err := kc.verify(&oc, oc.ID()); err != nil {
			t.Fatal(err)
		}
	}
	if oe, _ := kc.entry(other.UID()); oe.table.Load() != nil || kc.tables.Load() != keyTablesMax {
		t.Fatalf("a table was built past the bound (%d counted)", kc.tables.Load())
	}
}
