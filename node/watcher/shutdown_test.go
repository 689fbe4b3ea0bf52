package watcher_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metanode/metanode/node/watcher"
	"github.com/metanode/metanode/store"
)

// stallStore holds its first ApplyFiles until the caller's context ends,
// so a scan is deterministically in progress when the watcher closes.
type stallStore struct {
	*memStore
	entered chan struct{}
	once    sync.Once
}

func (s *stallStore) ApplyFiles(ctx context.Context, ups []store.FileUpdate) ([]store.FileResult, error) {
	s.once.Do(func() { close(s.entered) })
	<-ctx.Done()
	return nil, ctx.Err()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// An initial scan cut short by shutdown logs one line saying so (the
// walkthrough's Ctrl-C during the first scan left no trace in the log).
func TestWatcher_InitialScanCutShort(t *testing.T) {
	root := t.TempDir()
	for i := range 3 {
		writeFile(t, root, fmt.Sprintf("f%d.bin", i), []byte(fmt.Sprint("data ", i)), at(i))
	}
	st := &stallStore{memStore: newMemStore(), entered: make(chan struct{})}
	var logs syncBuffer
	w := watcher.New(watcher.Config{Root: root, Store: st, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Rescan: -1})
	if err := w.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-st.entered:
	case <-time.After(30 * time.Second):
		w.Close()
		t.Fatal("the initial scan never applied its files")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Ready():
		t.Fatal("Ready closed for a scan that did not finish")
	default:
	}
	out := logs.String()
	if n := strings.Count(out, "initial scan cut short by shutdown"); n != 1 || !strings.Contains(out, "files=3") {
		t.Fatalf("%d lines saying the initial scan was cut short, want 1 with files=3:\n%s", n, out)
	}
	if strings.Contains(out, "initial scan done") {
		t.Fatalf("an interrupted scan logged done:\n%s", out)
	}
}
