package store

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// sqliteErr is an error with SQLite's result code, as the driver's are.
type sqliteErr int

func (e sqliteErr) Error() string { return "database or disk is full" }
func (e sqliteErr) Code() int     { return int(e) }

// TestWriteHealth: a failed write transaction (here SQLite's "full")
// makes WriteHealth report since when and what to do, and the write's
// answer says it too; the next commit clears it.
func TestWriteHealth(t *testing.T) {
	ctx := context.Background()
	s := openQuiet(t)
	sg, _ := GenerateSigner()
	if err := s.WriteHealth(); err != nil {
		t.Fatalf("a new store: %v", err)
	}
	for _, seam := range []*func() error{&s.failTruth, &s.failCache} {
		*seam = func() error { return sqliteErr(sqliteFull) }
		for i := 0; i < 2; i++ {
			_, err := s.Submit(ctx, []Claim{sg.Text(testCID(i), "title", "x", uint64(1+i))}, SubmitOptions{})
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "free space") {
				t.Fatalf("a write on a full disk: %v, want ErrUnavailable saying to free space", err)
			}
		}
		*seam = nil
		err := s.WriteHealth()
		if err == nil || !strings.Contains(err.Error(), "2 in a row") || !strings.Contains(err.Error(), "free space") {
			t.Fatalf("health after two failed writes: %v", err)
		}
		if _, err := s.Submit(ctx, []Claim{sg.Text(testCID(9), "title", "ok", 9)}, SubmitOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteHealth(); err != nil {
			t.Fatalf("health after a commit: %v", err)
		}
	}
}

// TestExplain: what each SQLite failure tells the owner to do.
func TestExplain(t *testing.T) {
	for _, c := range []struct {
		truth bool
		code  int
		want  string
		is    error
	}{
		{true, sqliteFull, "free space there", nil},
		{false, sqliteFull | 3<<8, "free space there", nil}, // an extended code
		{true, sqliteIOErr, "check the disk", nil},
		{true, sqliteCorrupt, "restore truth.db", ErrDamaged},
		{false, sqliteNotADB, "restart the node: the start deletes it", nil},
		{true, 5, "database or disk is full", nil}, // BUSY: as it is
	} {
		err := explain(c.truth, "/data/x.db", sqliteErr(c.code))
		if !strings.Contains(err.Error(), c.want) || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("truth=%v code %d: %v, want %q", c.truth, c.code, err, c.want)
		}
	}
}
