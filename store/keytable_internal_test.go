package store

import (
	"crypto/sha256"
	"math/rand/v2"
	"testing"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
)

// tableKey returns a fresh key pair and its table.
func tableKey(t testing.TB) (*secp256k1.PrivateKey, *keyTable) {
	t.Helper()
	priv, err := secp256k1.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	var q secp256k1.JacobianPoint
	priv.PubKey().AsJacobian(&q)
	return priv, newKeyTable(&q)
}

// edgeScalars are the scalars a window method gets wrong first: zero, the
// ends of the range, single set bytes and bits at window edges, zero bytes
// between set ones, all bytes 0xff.
func edgeScalars() []secp256k1.ModNScalar {
	var out []secp256k1.ModNScalar
	add := func(b [32]byte) {
		var k secp256k1.ModNScalar
		k.SetBytes(&b)
		out = append(out, k)
	}
	add([32]byte{})
	one := [32]byte{31: 1}
	add(one)
	var nMinus1, nMinus2 [32]byte
	n := secp256k1.Params().N
	n.FillBytes(nMinus1[:])
	nMinus1[31]--
	nMinus2 = nMinus1
	nMinus2[31]--
	add(nMinus1)
	add(nMinus2)
	for i := range 32 {
		for _, v := range []byte{1, 0x80, 0xff} {
			var b [32]byte
			b[i] = v
			add(b)
		}
	}
	var sparse, dense [32]byte
	for i := range 32 {
		if i%3 == 0 {
			sparse[i] = byte(i + 1)
		}
		dense[i] = 0xff
	}
	add(sparse)
	add(dense) // above N: SetBytes reduces it
	return out
}

func sameAffine(a, b *secp256k1.JacobianPoint) bool {
	infA := (a.X.IsZero() && a.Y.IsZero()) || a.Z.IsZero()
	infB := (b.X.IsZero() && b.Y.IsZero()) || b.Z.IsZero()
	if infA || infB {
		return infA == infB
	}
	x, y := *a, *b
	x.ToAffine()
	y.ToAffine()
	return x.X.Equals(&y.X) && x.Y.Equals(&y.Y)
}

// TestKeyTable_MatchesScalarMult: k·Q from the table equals decred's
// generic multiplication for edge scalars and random ones, on several keys.
func TestKeyTable_MatchesScalarMult(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3 {
		priv, tab := tableKey(t)
		var q secp256k1.JacobianPoint
		priv.PubKey().AsJacobian(&q)
		scalars := edgeScalars()
		for range 300 {
			var b [32]byte
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			var k secp256k1.ModNScalar
			k.SetBytes(&b)
			scalars = append(scalars, k)
		}
		for i := range scalars {
			var want, got secp256k1.JacobianPoint
			secp256k1.ScalarMultNonConst(&scalars[i], &q, &want)
			tab.mul(&scalars[i], &got)
			if !sameAffine(&want, &got) {
				t.Fatalf("scalar %x: table gives a different point", scalars[i].Bytes())
			}
		}
	}
}

// TestVerifyTable_MatchesDecred: verifyTable accepts exactly what decred's
// Verify accepts: valid signatures, and no signature with a changed r, s,
// hash or key.
func TestVerifyTable_MatchesDecred(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	priv, tab := tableKey(t)
	other, otherTab := tableKey(t)
	check := func(what string, r, s secp256k1.ModNScalar, hash []byte, pk *secp256k1.PublicKey, tb *keyTable, want bool) {
		t.Helper()
		if r.IsZero() || s.IsZero() {
			return // the caller refuses those before verifying
		}
		ref := ecdsa.NewSignature(&r, &s).Verify(hash, pk)
		got := verifyTable(tb, &r, &s, hash)
		if ref != want || got != ref {
			t.Fatalf("%s: decred %v, table %v, want %v", what, ref, got, want)
		}
	}
	for i := range 200 {
		hash := sha256.Sum256([]byte{byte(i), byte(i >> 8), 7})
		sig := ecdsa.Sign(priv, hash[:])
		r, s := sig.R(), sig.S()
		check("valid", r, s, hash[:], priv.PubKey(), tab, true)
		check("other key", r, s, hash[:], other.PubKey(), otherTab, false)
		bad := hash
		bad[rng.IntN(32)] ^= 1 << rng.IntN(8)
		check("changed hash", r, s, bad[:], priv.PubKey(), tab, false)
		var one secp256k1.ModNScalar
		one.SetInt(1)
		r2, s2 := r, s
		r2.Add(&one)
		s2.Add(&one)
		check("r+1", r2, s, hash[:], priv.PubKey(), tab, false)
		check("s+1", r, s2, hash[:], priv.PubKey(), tab, false)
		neg := s
		neg.Negate() // (r, -s) verifies too: ECDSA's malleability, refused earlier by the low-S rule
		check("negated s", r, neg, hash[:], priv.PubKey(), tab, true)
	}
}

// FuzzVerifyTable: on arbitrary r, s and hash, verifyTable and decred's
// Verify agree.
func FuzzVerifyTable(f *testing.F) {
	priv, tab := tableKey(f)
	hash := sha256.Sum256([]byte("seed"))
	sig := ecdsa.Sign(priv, hash[:])
	r, s := sig.R(), sig.S()
	rb, sb := r.Bytes(), s.Bytes()
	f.Add(rb[:], sb[:], hash[:])
	f.Add(make([]byte, 32), sb[:], hash[:])
	f.Fuzz(func(t *testing.T, rIn, sIn, hash []byte) {
		var r, s secp256k1.ModNScalar
		if len(rIn) > 32 || len(sIn) > 32 || r.SetByteSlice(rIn) || s.SetByteSlice(sIn) || r.IsZero() || s.IsZero() {
			return
		}
		ref := ecdsa.NewSignature(&r, &s).Verify(hash, priv.PubKey())
		if got := verifyTable(tab, &r, &s, hash); got != ref {
			t.Fatalf("decred %v, table %v", ref, got)
		}
	})
}

func BenchmarkKeyTable(b *testing.B) {
	priv, tab := tableKey(b)
	hash := sha256.Sum256([]byte("bench"))
	sig := ecdsa.Sign(priv, hash[:])
	r, s := sig.R(), sig.S()
	pk := priv.PubKey()
	b.Run("decred", func(b *testing.B) {
		for b.Loop() {
			if !sig.Verify(hash[:], pk) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("table", func(b *testing.B) {
		for b.Loop() {
			if !verifyTable(tab, &r, &s, hash[:]) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("build", func(b *testing.B) {
		var q secp256k1.JacobianPoint
		pk.AsJacobian(&q)
		for b.Loop() {
			newKeyTable(&q)
		}
	})
}
