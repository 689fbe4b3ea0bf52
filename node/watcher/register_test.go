package watcher_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/metanode/metanode/node/watcher"
	"github.com/metanode/metanode/store"
)

func TestRegister(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	st := newMemStore()
	// A long debounce keeps the event loop out of the way: Register alone
	// records the file.
	w := open(t, root, st, func(c *watcher.Config) { c.Debounce = time.Hour })
	p := writeFile(t, root, "plugin/out.bin", []byte("plugin output"), at(1))

	lf, res, err := w.Register(t.Context(), "plugin/out.bin")
	if err != nil {
		t.Fatal(err)
	}
	want := store.LocalFile{Path: p, CID: midhash(t, p), Size: 13, MtimeNano: at(1).UnixNano()}
	if lf != want || !res.Created || res.RID == "" {
		t.Fatalf("register: %+v %+v, want %+v created", lf, res, want)
	}
	if d := diffStrings(st.ops(0), []string{"add plugin/out.bin"}); d != "" {
		t.Errorf("ops:\n%s", d)
	}

	t.Run("Again", func(t *testing.T) {
		mark, hashed := st.mark(), w.Stats().Hashed
		lf2, res2, err := w.Register(t.Context(), "plugin/./out.bin")
		if err != nil {
			t.Fatal(err)
		}
		if lf2 != lf || res2.Created || res2.RID != res.RID {
			t.Errorf("second register: %+v %+v, want same file, not created, rid %s", lf2, res2, res.RID)
		}
		if ops := st.ops(mark); len(ops) != 0 {
			t.Errorf("second register wrote %q", ops)
		}
		if w.Stats().Hashed != hashed {
			t.Error("second register hashed an unchanged file")
		}
	})

	t.Run("Touched", func(t *testing.T) {
		// Same content, new mtime: the row changes, the file is not new.
		mark := st.mark()
		writeFile(t, root, "plugin/out.bin", []byte("plugin output"), at(2))
		lf3, res3, err := w.Register(t.Context(), "plugin/out.bin")
		if err != nil {
			t.Fatal(err)
		}
		if res3.Created || lf3.CID != lf.CID || lf3.MtimeNano != at(2).UnixNano() {
			t.Errorf("touched: %+v %+v", lf3, res3)
		}
		if d := diffStrings(st.ops(mark), []string{"change plugin/out.bin"}); d != "" {
			t.Errorf("ops:\n%s", d)
		}
	})

	t.Run("Changed", func(t *testing.T) {
		writeFile(t, root, "plugin/out.bin", []byte("new plugin output"), at(3))
		lf4, res4, err := w.Register(t.Context(), "plugin/out.bin")
		if err != nil {
			t.Fatal(err)
		}
		if !res4.Created || lf4.CID == lf.CID || lf4.CID != midhash(t, p) {
			t.Errorf("changed: %+v %+v", lf4, res4)
		}
	})

	t.Run("Errors", func(t *testing.T) {
		writeFile(t, outside, "secret", []byte("s"), at(4))
		if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "plugin/link")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(root, "plugin/linkdir")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(root, "plugin"), filepath.Join(root, "inlinkdir")); err != nil {
			t.Fatal(err)
		}
		writeFile(t, root, "plugin/.hidden", []byte("h"), at(5))
		if err := os.Mkdir(filepath.Join(root, "plugin/dir"), 0o755); err != nil {
			t.Fatal(err)
		}
		mark := st.mark()
		for _, tt := range []struct {
			rel  string
			want error
		}{
			{"plugin/missing.bin", fs.ErrNotExist},
			{"plugin/nodir/missing.bin", fs.ErrNotExist},
			{"plugin/dir", store.ErrBadPath},
			{"plugin", store.ErrBadPath},
			{"", store.ErrBadPath},
			{".", store.ErrBadPath},
			{"../x", store.ErrBadPath},
			{"plugin/../../x", store.ErrBadPath},
			{"/etc/passwd", store.ErrBadPath},
			{"plugin/link", store.ErrBadPath},
			{"plugin/linkdir/secret", store.ErrBadPath},
			{"inlinkdir/out.bin", store.ErrBadPath},
			{"plugin/.hidden", store.ErrBadPath},
			{"plugin/out.bin\x00", store.ErrBadPath},
		} {
			if _, _, err := w.Register(t.Context(), tt.rel); !errors.Is(err, tt.want) {
				t.Errorf("register %q: got %v, want %v", tt.rel, err, tt.want)
			}
		}
		if ops := st.ops(mark); len(ops) != 0 {
			t.Errorf("failed registers wrote %q", ops)
		}
	})

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Register(t.Context(), "plugin/out.bin"); !errors.Is(err, watcher.ErrClosed) || !errors.Is(err, store.ErrClosed) {
		t.Errorf("register after close: got %v, want ErrClosed (wrapping store.ErrClosed)", err)
	}
}
