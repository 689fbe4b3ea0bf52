package swarm

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
)

// BenchmarkSync_RefusedIntake measures what verifying the claims a list
// node refuses would cost it, against what taking them costs now (decode
// the frame, set them aside unverified): the case is an open-trust node
// (any bootstrap) streaming a home the claims of signers it does not trust.
// ns/claim of each; refused_verify_ratio is verify ÷ take.
func BenchmarkSync_RefusedIntake(b *testing.B) {
	const n, signers = 4096, 16
	claims := make([]store.Claim, n)
	var wg sync.WaitGroup
	for s := range signers {
		wg.Go(func() {
			sg, err := store.GenerateSigner()
			if err != nil {
				panic(err)
			}
			for i := s; i < n; i += signers {
				claims[i] = sg.Text(fmt.Sprintf("bafk%06d", i), "title", fmt.Sprintf("title %d", i), 1_700_000_000_000+uint64(i))
			}
		})
	}
	wg.Wait()
	body := binary.AppendUvarint(nil, n)
	for i := range claims {
		body = claims[i].AppendWire(body)
	}
	ids := make([]store.ID, n)
	var take, verify time.Duration
	for b.Loop() {
		t0 := time.Now()
		got, err := decodeClaims(body, n)
		if err != nil || len(got) != n {
			b.Fatalf("decode: %d claims, %v", len(got), err)
		}
		items := make([]store.SyncItem, 0, n)
		for i := range got {
			items = append(items, store.SyncItem{TS: got[i].TS, ID: got[i].ID()})
		}
		t1 := time.Now()
		for i := range got {
			ids[i] = items[i].ID
		}
		for _, err := range store.VerifyAll(got, ids, nil) {
			if err != nil {
				b.Fatal(err)
			}
		}
		take += t1.Sub(t0)
		verify += time.Since(t1)
	}
	per := float64(b.N * n)
	b.ReportMetric(float64(take.Nanoseconds())/per, "take_ns/claim")
	b.ReportMetric(float64(verify.Nanoseconds())/per, "verify_ns/claim")
	b.ReportMetric(float64(verify)/float64(take), "refused_verify_ratio")
}
