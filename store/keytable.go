package store

import (
	mbits "math/bits"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
)

// keyTable holds the multiples j·256^(31-i)·Q of one public key Q for every
// byte position i and byte value j, in affine form. With it u·Q costs at
// most 32 mixed point additions and no doublings: the same fixed-base
// method decred uses for u·G with its built-in table of G. A generic u·Q
// (secp256k1.ScalarMultNonConst) costs about 128 doublings and 85
// additions, three quarters of a verification, so a signer seen often
// verifies about three times cheaper with its table. A table is about 1 MB
// and takes about 15 ms to build, so only frequent signers get one
// (keyCache.noteVerified).
type keyTable [32][256]secp256k1.JacobianPoint

// newKeyTable builds q's table. The 256 doublings of q are put in affine
// form first, so that each of a window's points costs one mixed addition
// (the point of the byte without its lowest bit, plus that bit's doubling);
// then each window is put in affine form (Z = 1), so that mul's additions
// take the mixed path too. Affine forms come from one field inversion per
// batch (toAffineAll): one per point would make a build ten times slower.
func newKeyTable(q *secp256k1.JacobianPoint) *keyTable {
	var dbl [256]secp256k1.JacobianPoint // dbl[n] = 2^n·q
	dbl[0].Set(q)
	for n := 1; n < len(dbl); n++ {
		secp256k1.DoubleNonConst(&dbl[n-1], &dbl[n])
	}
	toAffineAll(dbl[:])
	t := new(keyTable)
	for i := range t {
		w := &t[i]
		bits := dbl[8*(31-i):] // byte i holds the bits 8·(31-i) to 8·(31-i)+7
		// w[0] stays the point at infinity (all zero); mul skips zero bytes.
		for j := 1; j < 256; j++ {
			low := &bits[mbits.TrailingZeros(uint(j))]
			if j&(j-1) == 0 {
				w[j].Set(low)
				continue
			}
			secp256k1.AddNonConst(&w[j&(j-1)], low, &w[j])
		}
		toAffineAll(w[1:])
	}
	return t
}

// toAffineAll puts points (none at infinity) in affine form with a single
// field inversion (Montgomery's trick: invert the product of all Z, then
// peel each inverse off with two multiplications).
func toAffineAll(pts []secp256k1.JacobianPoint) {
	prefix := make([]secp256k1.FieldVal, len(pts)) // prefix[i] = Z_0·…·Z_i
	var acc secp256k1.FieldVal
	acc.SetInt(1)
	for i := range pts {
		acc.Mul(&pts[i].Z)
		prefix[i] = acc
	}
	inv := acc
	inv.Inverse() // 1 / (Z_0·…·Z_last)
	for i := len(pts) - 1; i >= 0; i-- {
		zInv := inv
		if i > 0 {
			zInv.Mul(&prefix[i-1]) // 1 / Z_i
		}
		inv.Mul(&pts[i].Z) // 1 / (Z_0·…·Z_(i-1))
		var zInv2, zInv3 secp256k1.FieldVal
		zInv2.SquareVal(&zInv)
		zInv3.Mul2(&zInv2, &zInv)
		pts[i].X.Mul(&zInv2).Normalize()
		pts[i].Y.Mul(&zInv3).Normalize()
		pts[i].Z.SetInt(1)
	}
}

// mul sets result to k·Q.
func (t *keyTable) mul(k *secp256k1.ModNScalar, result *secp256k1.JacobianPoint) {
	result.X.Zero()
	result.Y.Zero()
	result.Z.Zero()
	kb := k.Bytes()
	for i, b := range kb {
		if b != 0 {
			secp256k1.AddNonConst(result, &t[i][b], result)
		}
	}
}

// orderAsField is the group order N as a field element (N < P).
var orderAsField = func() secp256k1.FieldVal {
	var f secp256k1.FieldVal
	f.SetByteSlice(secp256k1.Params().N.Bytes())
	return f
}()

// verifyTable is ecdsa.Signature.Verify (decred v4, algorithm 4.30 of
// [GECC] with Greg Maxwell's check in Jacobian coordinates) with u2·Q taken
// from Q's table. r and s must be in [1, N-1]; the caller checks that.
// Tests compare it with decred's Verify on valid and invalid signatures.
func verifyTable(t *keyTable, r, s *secp256k1.ModNScalar, hash []byte) bool {
	var e secp256k1.ModNScalar
	e.SetByteSlice(hash)
	w := new(secp256k1.ModNScalar).InverseValNonConst(s)
	u1 := new(secp256k1.ModNScalar).Mul2(&e, w)
	u2 := new(secp256k1.ModNScalar).Mul2(r, w)

	var x, u1G, u2Q secp256k1.JacobianPoint
	secp256k1.ScalarBaseMultNonConst(u1, &u1G)
	t.mul(u2, &u2Q)
	secp256k1.AddNonConst(&u1G, &u2Q, &x)
	if (x.X.IsZero() && x.Y.IsZero()) || x.Z.IsZero() {
		return false // the point at infinity
	}

	// R·z² == X.x (mod P), or (R+N)·z² == X.x when R+N < P: X.x/z² is
	// the affine x, which reduced mod N must equal R.
	z := new(secp256k1.FieldVal).SquareVal(&x.Z)
	var rb [32]byte
	r.PutBytes(&rb)
	var rField secp256k1.FieldVal
	rField.SetBytes(&rb)
	got := new(secp256k1.FieldVal).Mul2(&rField, z).Normalize()
	if got.Equals(&x.X) {
		return true
	}
	if rField.IsGtOrEqPrimeMinusOrder() {
		return false
	}
	rField.Add(&orderAsField)
	got.Mul2(&rField, z).Normalize()
	return got.Equals(&x.X)
}
