package storetest

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/metanode/metanode/store"
)

// FlipBit flips one bit in the middle of the only occurrence of what in a
// file (a closed store's database), as a failing disk would; it fails the
// test when what is not there exactly once.
func FlipBit(tb testing.TB, path string, what []byte) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	i := bytes.Index(b, what)
	if i < 0 || bytes.Contains(b[i+1:], what) {
		tb.Fatalf("%q is not in %s exactly once", what, path)
	}
	b[i+len(what)/2] ^= 0x04
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// Load stores every claim of d in s without verifying them (they are
// signed: the measurement or the test is about something else), four
// batches of 2,000 at a time.
func Load(tb testing.TB, s *store.Store, d *Dataset) {
	tb.Helper()
	batches := make(chan []store.Claim, 8)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for cs := range batches {
				if _, err := s.Submit(context.Background(), cs, store.SubmitOptions{Verified: true}); err != nil {
					tb.Error(err)
				}
			}
		})
	}
	err := d.Each(2000, func(cs []store.Claim) error {
		batches <- slices.Clone(cs)
		return nil
	})
	close(batches)
	wg.Wait()
	if err != nil {
		tb.Fatal(err)
	}
}

// LoadAvg is the machine's load average over 1, 5 and 15 minutes, where
// the system tells it (Linux), for figures measured on a shared machine.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
