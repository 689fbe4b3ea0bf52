// Package storetest helps other packages' tests and benchmarks use a real
// store: Open gives an opened store in a temporary directory, Signers and
// Claims build signed claims deterministically and in parallel, Fixture
// gives the reference dataset cached on disk.
//
// It is meant for tests only; everything in it is safe for concurrent use.
package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"

	"github.com/metanode/metanode/store"
)

// Open returns a real store in tb.TempDir(), opened and closed in
// tb.Cleanup. Empty paths are filled, the trust mode defaults to
// TrustOpen, and the store logs warnings and errors to tb.Log.
func Open(tb testing.TB, cfg store.Config) *store.Store {
	tb.Helper()
	dir := tb.TempDir()
	if cfg.TruthPath == "" {
		cfg.TruthPath = filepath.Join(dir, "truth.db")
	}
	if cfg.CachePath == "" {
		cfg.CachePath = filepath.Join(dir, "cache.db")
	}
	if cfg.Trust == "" {
		cfg.Trust = store.TrustOpen
	}
	if cfg.Logger == nil {
		cfg.Logger = Logger(tb, slog.LevelWarn)
	}
	s := store.New(cfg)
	if err := s.Open(context.Background()); err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			tb.Errorf("close store: %v", err)
		}
	})
	return s
}

// Logger returns a logger that writes records at level and above to
// tb.Log, and drops them once the test has finished.
func Logger(tb testing.TB, level slog.Level) *slog.Logger {
	h := &tbHandler{tb: tb, level: level, mu: &sync.Mutex{}, done: new(bool)}
	tb.Cleanup(func() {
		h.mu.Lock()
		*h.done = true
		h.mu.Unlock()
	})
	return slog.New(h)
}

type tbHandler struct {
	tb    testing.TB
	level slog.Level
	attrs []slog.Attr
	mu    *sync.Mutex
	done  *bool
}

func (h *tbHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *tbHandler) Handle(_ context.Context, r slog.Record) error {
	msg := r.Level.String() + " " + r.Message
	for _, a := range h.attrs {
		msg += " " + a.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if !*h.done {
		h.tb.Log(msg)
	}
	return nil
}

func (h *tbHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append(append([]slog.Attr{}, h.attrs...), as...)
	return &n
}

func (h *tbHandler) WithGroup(string) slog.Handler { return h }

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
