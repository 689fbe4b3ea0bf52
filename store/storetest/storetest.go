// Package storetest helps other packages' tests and benchmarks use a real
// store: Open gives an opened store in a temporary directory, Logger sends
// a store's logs to the test. Signers, Claims and Fixture are thin wrappers
// of store/refdata (deterministic signed claims, the reference dataset
// cached on disk), which non-test code uses directly.
//
// It is meant for tests only (it imports testing); everything in it is
// safe for concurrent use.
package storetest

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/refdata"
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
func Signer(i int) *store.Signer { return refdata.Signer(i) }

// Signers returns n deterministic signers: Signer(0) … Signer(n-1).
func Signers(n int) []*store.Signer { return refdata.Signers(n) }

// CID returns a deterministic sha2-256 raw-leaves cid ("bafkrei…") for i.
func CID(i int) string { return refdata.CID(i) }

// MidhashCID returns a deterministic midhash256 cid ("bagacbabae…") for i,
// the kind of cid the file watcher gives a file.
func MidhashCID(i int) string { return refdata.MidhashCID(i) }

// Claims builds n claims with build and signs them in parallel on all
// cores (refdata.Claims).
func Claims(n int, build func(i int) (*store.Signer, store.Claim)) []store.Claim {
	return refdata.Claims(n, build)
}

// Sign signs prepared claims in parallel: claims[i] with signers[i].
func Sign(signers []*store.Signer, claims []store.Claim) { refdata.Sign(signers, claims) }

// Dataset is the reference dataset (refdata.Dataset).
type Dataset = refdata.Dataset

// FixtureBase is the first claim timestamp of the dataset (ms).
const FixtureBase = refdata.FixtureBase

// Fixture returns the reference dataset of n claims, generated once and
// cached on disk (refdata.Load); a failure ends the test.
func Fixture(tb testing.TB, n int) *Dataset {
	tb.Helper()
	return refdata.Fixture(tb, n)
}

// HeldSearches holds every search of a store in its slot (through
// store.SetSearchGate) until Release: what a test needs to keep searches
// in flight, deterministically.
type HeldSearches struct {
	in      chan error
	release chan struct{}
	once    sync.Once
}

// HoldSearches makes every search of s, once admitted, wait for Release
// or for its context to end (it then fails with the context's error).
func HoldSearches(s *store.Store) *HeldSearches {
	h := &HeldSearches{in: make(chan error, 64), release: make(chan struct{})}
	store.SetSearchGate(s, func(ctx context.Context) error {
		h.in <- nil
		select {
		case <-h.release:
			return nil
		case <-ctx.Done():
			h.in <- ctx.Err()
			return ctx.Err()
		}
	})
	return h
}

// Wait returns what the next held search told: nil when it entered its
// slot, its context's error when that ended while it was held. It fails
// the test after 10 s.
func (h *HeldSearches) Wait(tb testing.TB) error {
	tb.Helper()
	select {
	case err := <-h.in:
		return err
	case <-time.After(10 * time.Second):
		tb.Fatal("no held search spoke for 10 s")
		return nil
	}
}

// Release lets every held search (and every later one) go on.
func (h *HeldSearches) Release() { h.once.Do(func() { close(h.release) }) }
