package refdata

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"sync"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"

	"github.com/metanode/metanode/store"
)

// The seed strings keep their storetest names: the keys, cids and cached
// fixtures of earlier runs stay valid.

// Signer returns deterministic signer number i (the same key in every run).
func Signer(i int) *store.Signer {
	for k := 0; ; k++ {
		seed := sha256.Sum256(fmt.Appendf(nil, "metanode storetest signer %d/%d", i, k))
		if s, err := store.SignerFromHex(hex.EncodeToString(seed[:])); err == nil {
			return s
		}
	}
}

// Signers returns n deterministic signers: Signer(0) … Signer(n-1).
func Signers(n int) []*store.Signer {
	out := make([]*store.Signer, n)
	for i := range out {
		out[i] = Signer(i)
	}
	return out
}

// CID returns a deterministic sha2-256 raw-leaves cid ("bafkrei…") for i.
func CID(i int) string {
	d := sha256.Sum256(fmt.Appendf(nil, "metanode storetest cid %d", i))
	m, _ := mh.Encode(d[:], mh.SHA2_256)
	return cid.NewCidV1(cid.Raw, m).String()
}

// MidhashCID returns a deterministic midhash256 cid ("bagacbabae…") for i,
// the kind of cid the file watcher gives a file.
func MidhashCID(i int) string {
	d := sha256.Sum256(fmt.Appendf(nil, "metanode storetest midhash %d", i))
	return store.MidhashCID(d[:])
}

// Claims builds n claims with build and signs them in parallel on all
// cores. build must be safe to call concurrently; it returns the signer
// and the claim to sign (UID and Sig are set by signing).
func Claims(n int, build func(i int) (*store.Signer, store.Claim)) []store.Claim {
	out := make([]store.Claim, n)
	parallel(n, func(i int) {
		s, c := build(i)
		s.Sign(&c)
		out[i] = c
	})
	return out
}

// Sign signs prepared claims in parallel: claims[i] with signers[i].
func Sign(signers []*store.Signer, claims []store.Claim) {
	parallel(len(claims), func(i int) { signers[i].Sign(&claims[i]) })
}

func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), max(1, n/64))
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / max(workers, 1)
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				fn(i)
			}
		})
	}
	wg.Wait()
}
