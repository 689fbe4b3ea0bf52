package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestSubscribe_FallBehindAndBack: a subscriber that reads in fits and
// starts while the writer commits falls back to the pump and returns to
// the live feed many times, and still gets every event once, in order.
// (The channel is shrunk to 4 so this happens with few events.)
func TestSubscribe_FallBehindAndBack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := New(Config{TruthPath: filepath.Join(dir, "t.db"), CachePath: filepath.Join(dir, "c.db"), Trust: TrustOpen,
		Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry()})
	s.hub.chanCap = 4
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sub, err := s.Subscribe(StreamFiles, "")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	const batches, per = 40, 10
	got := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(1, 2))
		var last string
		for i := range batches * per {
			var e Event
			select {
			case ev, ok := <-sub.C:
				if !ok {
					got <- fmt.Errorf("closed after %d events: %v", i, sub.Err())
					return
				}
				e = ev
			case <-time.After(20 * time.Second):
				got <- fmt.Errorf("no event %d", i)
				return
			}
			want := fmt.Sprintf(`"path":"/f%04d"`, i)
			if !strings.Contains(string(e.Data), want) || e.ID <= last {
				got <- fmt.Errorf("event %d: %s %s after %s", i, e.ID, e.Data, last)
				return
			}
			last = e.ID
			if rng.IntN(8) == 0 {
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond) // fall behind now and then
			}
		}
		got <- nil
	}()
	for b := range batches {
		ups := make([]FileUpdate, per)
		for i := range ups {
			n := b*per + i
			d := sha256.Sum256(fmt.Appendf(nil, "fall behind %d", n))
			ups[i] = FileUpdate{Op: FileAdd, File: LocalFile{Path: fmt.Sprintf("/f%04d", n), CID: MidhashCID(d[:]), Size: 1}}
		}
		if _, err := s.ApplyFiles(ctx, ups); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	var m dto.Metric
	if err := s.met.behind.WithLabelValues(string(StreamFiles)).Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n < 2 {
		t.Fatalf("fell behind %v times: the pump and the hand-back were not exercised", n)
	}
	if sub.Err() != nil {
		t.Fatalf("dropped: %v", sub.Err())
	}
}
