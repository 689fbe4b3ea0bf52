package store_test

import (
	"fmt"
	"testing"

	"github.com/metanode/metanode/store"
)

// BenchmarkVerify is the machine's limit that throughput figures are
// divided by: one signature verification (public key cached) per op.
func BenchmarkVerify(b *testing.B) {
	signer, _ := store.GenerateSigner()
	claims := make([]store.Claim, 256)
	for i := range claims {
		claims[i] = signer.Text("bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "title", fmt.Sprint(i), uint64(i))
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if err := claims[i%len(claims)].Verify(); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
