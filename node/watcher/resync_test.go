package watcher_test

import (
	"slices"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestStore_ResyncAfterClear: a clear wipes local_file behind the
// watcher's back; Resync makes the watcher add every file still on disk
// again (without hashing the unchanged ones), after the clear's reset
// event (probe r_api3 F3: the files stayed missing until a restart).
func TestStore_ResyncAfterClear(t *testing.T) {
	s := storetest.Open(t, store.Config{})
	root := t.TempDir()
	writeFile(t, root, "a.bin", []byte("alpha"), at(1))
	writeFile(t, root, "sub/b.bin", []byte("bravo"), at(2))
	w := open(t, root, s)
	want := rowsOf(t, s, root)
	if len(want) != 2 {
		t.Fatalf("rows %v", want)
	}
	ev := follow(t, s)
	waitFor(t, "the initial adds", func() bool { return ev.len() == 2 })
	hashed := w.Stats().Hashed

	if _, err := s.Clear(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := w.Resync(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the files back in the store", func() bool { return slices.Equal(rowsOf(t, s, root), want) })
	waitFor(t, "reset and two adds", func() bool { return ev.len() >= 5 })
	got := ev.ops(2)
	if got[0] != "reset " {
		t.Errorf("first event after the clear %q, want reset", got[0])
	}
	adds := got[1:]
	slices.Sort(adds)
	if d := diffStrings(adds, []string{"add a.bin", "add sub/b.bin"}); d != "" {
		t.Errorf("events after the reset:\n%s", d)
	}
	if h := w.Stats().Hashed; h != hashed {
		t.Errorf("hashed %d files again, want none (their size and mtime did not change)", h-hashed)
	}
	for _, rel := range []string{"a.bin", "sub/b.bin"} {
		if _, err := s.Resolve(t.Context(), midhash(t, root+"/"+rel)); err != nil {
			t.Errorf("%s: cid not known after the resync: %v", rel, err)
		}
	}

}
