package store_test

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// remergeFixture is a list-mode store with a re-merge chunk of 2 records
// and 12 records whose title the vandal (older vote) wins over the owner on
// 1..8, and alone describes on 9..12: distrusting the vandal changes every
// record, more than one chunk.
type remergeFixture struct {
	s            *store.Store
	cfg          store.Config
	own, vandal  *store.Signer
	hook         func(n int, due int) // the n-th chunk (from 1)
	chunks       atomic.Int32
	logs         *logSink
	cids         []string
	sharedTitles int
}

func newRemergeFixture(t *testing.T) *remergeFixture {
	t.Helper()
	f := &remergeFixture{own: storetest.Signer(0), vandal: storetest.Signer(5), logs: &logSink{}, sharedTitles: 8}
	tp, cp := paths(t)
	f.cfg = store.Config{TruthPath: tp, CachePath: cp, Trust: store.TrustList, OwnUID: f.own.UID(), Logger: slog.New(f.logs)}
	f.s = store.New(f.cfg)
	store.SetRemerge(f.s, 2, func(due int) {
		n := int(f.chunks.Add(1))
		if f.hook != nil {
			f.hook(n, due)
		}
	})
	if err := f.s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.s.Close() })
	if err := f.s.Trust(ctx, f.vandal.UID(), ""); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 12; i++ {
		cid := storetest.CID(7000 + i)
		f.cids = append(f.cids, cid)
		submit(t, f.s, f.vandal.Text(cid, "title", "vandalised", 1))
		if i <= f.sharedTitles {
			submit(t, f.s, f.own.Text(cid, "title", fmt.Sprintf("Title %d", i), 2))
		}
	}
	if got := record(t, f.s, f.cids[0]).Fields["title"]; got != "vandalised" {
		t.Fatalf("before: title %q, want the older vote", got)
	}
	return f
}

// checkDistrusted: the owner's titles on 1..8, no record on 9..12.
func (f *remergeFixture) checkDistrusted(t *testing.T) {
	t.Helper()
	for i, cid := range f.cids {
		rec, err := f.s.Record(ctx, cid, "")
		if i < f.sharedTitles {
			if want := fmt.Sprintf("Title %d", i+1); err != nil || rec.Fields["title"] != want {
				t.Fatalf("record %d: %v %v, want title %q", i+1, rec.Fields, err, want)
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("record %d only the distrusted signer describes: %v %v, want ErrNotFound", i+1, rec.Fields, err)
		}
	}
}

// TestRemerge_WritesGoBetweenChunks: a trust change touching more records
// than a chunk re-merges them in several cache transactions, and a write
// queued meanwhile is answered between two of them, before the trust
// change is; the trust call returns once every record is re-merged, and
// the cache then equals a rebuild, after the distrust and after trusting
// again.
func TestRemerge_WritesGoBetweenChunks(t *testing.T) {
	f := newRemergeFixture(t)
	var trustDone atomic.Bool
	written := make(chan error, 1)
	during := storetest.CID(7100)
	f.hook = func(n, due int) {
		switch n {
		case 1:
			go func() {
				_, err := f.s.Submit(ctx, []store.Claim{f.own.Text(during, "title", "during", 3)}, store.SubmitOptions{})
				written <- err
			}()
			deadline := time.Now().Add(10 * time.Second)
			for store.Queued(f.s) == 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		case 2:
			// The writer waits here: the write is answered by now or never.
			select {
			case err := <-written:
				if err != nil {
					t.Errorf("write during the re-merge: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("a write queued after the first chunk was not answered before the second")
			}
			if trustDone.Load() {
				t.Error("the distrust returned before its re-merge finished")
			}
			if st, err := f.s.Stats(ctx); err != nil || st.AppliedSeq >= st.LastSeq {
				t.Errorf("mid re-merge: applied %d, last %d (%v): a stop now must leave the cache behind truth", st.AppliedSeq, st.LastSeq, err)
			}
		}
	}
	if err := f.s.Distrust(ctx, f.vandal.UID()); err != nil {
		t.Fatal(err)
	}
	trustDone.Store(true)
	if n := f.chunks.Load(); n < 2 {
		t.Fatalf("%d chunks ran after the batch: the re-merge was not split", n)
	}
	if got := record(t, f.s, during).Fields["title"]; got != "during" {
		t.Fatalf("the write made during the re-merge: title %q", got)
	}
	f.checkDistrusted(t)
	if st, err := f.s.Stats(ctx); err != nil || st.AppliedSeq != st.LastSeq {
		t.Fatalf("after: applied %d, last %d (%v)", st.AppliedSeq, st.LastSeq, err)
	}

	f.hook = nil
	f.chunks.Store(0)
	if err := f.s.Trust(ctx, f.vandal.UID(), ""); err != nil {
		t.Fatal(err)
	}
	if n := f.chunks.Load(); n < 2 {
		t.Fatalf("trusting again ran %d chunks", n)
	}
	for i, cid := range f.cids {
		if got := record(t, f.s, cid).Fields["title"]; got != "vandalised" {
			t.Fatalf("record %d trusted again: title %q", i+1, got)
		}
	}
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	diffMaps(t, dumpCache(t, f.cfg.CachePath), rebuiltSamePolicy(t, f.cfg))
}

// TestRemerge_WriteToQueuedRecordMergesItWhole: a record still waiting for
// the re-merge that a write touches is re-merged in full by that write's
// batch: its writer reads the record as the new trust view makes it, not
// with the distrusted signer's old vote beside its own new one.
func TestRemerge_WriteToQueuedRecordMergesItWhole(t *testing.T) {
	f := newRemergeFixture(t)
	last := f.cids[f.sharedTitles-1] // a later chunk's
	checked := make(chan struct{})
	f.hook = func(n, due int) {
		if n != 1 {
			return
		}
		go func() {
			defer close(checked)
			_, err := f.s.Submit(ctx, []store.Claim{f.own.Text(last, "year", "1999", 3)}, store.SubmitOptions{})
			if err != nil {
				t.Errorf("write: %v", err)
				return
			}
			rec, err := f.s.Record(ctx, last, "")
			if err != nil || rec.Fields["year"] != "1999" || rec.Fields["title"] != fmt.Sprintf("Title %d", f.sharedTitles) {
				t.Errorf("the record written during the re-merge: %v %v, want year 1999 and the owner's title", rec.Fields, err)
			}
		}()
	}
	if err := f.s.Distrust(ctx, f.vandal.UID()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-checked:
	case <-time.After(30 * time.Second):
		t.Fatal("the write made during the re-merge was not answered")
	}
	f.checkDistrusted(t)
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	diffMaps(t, dumpCache(t, f.cfg.CachePath), rebuiltSamePolicy(t, f.cfg))
}

// TestRemerge_StopMidQueueRebuildsAtBoot: a store stopped with records
// still due leaves its cache behind truth, so the next boot rebuilds it
// and the distrust holds everywhere.
func TestRemerge_StopMidQueueRebuildsAtBoot(t *testing.T) {
	f := newRemergeFixture(t)
	f.hook = func(n, due int) {
		if n == 1 {
			store.StopWriter(f.s)
		}
	}
	if err := f.s.Distrust(ctx, f.vandal.UID()); err != nil {
		t.Fatalf("a distrust durable in truth, its re-merge cut short by Close: %v", err)
	}
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := f.chunks.Load(); n != 1 {
		t.Fatalf("%d chunks ran after the stop", n)
	}
	logs := &logSink{}
	cfg := f.cfg
	cfg.Logger = slog.New(logs)
	f.s = reopen(t, cfg)
	if !logs.has("rebuilding") {
		t.Fatal("the boot after a stop mid re-merge did not rebuild")
	}
	f.checkDistrusted(t)
}

// TestRemerge_FailedChunkCatchesUp: a chunk whose cache transaction fails
// ends the queue; the trust call reports the cache failure, and the next
// write's catch-up rebuilds the cache to the distrusted view.
func TestRemerge_FailedChunkCatchesUp(t *testing.T) {
	f := newRemergeFixture(t)
	f.hook = func(n, due int) {
		if n == 2 {
			store.FailNextCache(f.s)
		}
	}
	if err := f.s.Distrust(ctx, f.vandal.UID()); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("distrust whose re-merge failed: %v, want ErrUnavailable", err)
	}
	if !f.s.Distrusted(f.vandal.UID()) {
		t.Fatal("the distrust is not in effect")
	}
	submit(t, f.s, f.own.Text(storetest.CID(7200), "title", "next", 3))
	f.checkDistrusted(t)
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	diffMaps(t, dumpCache(t, f.cfg.CachePath), rebuiltSamePolicy(t, f.cfg))
}

// TestRemerge_SplitRecordsAtOnce: the records a distrust splits (the
// distrusted signer's links joined them) are written by the trust
// change's own batch, not queued: mid re-merge each cid is already found
// in its own record with its own fields.
func TestRemerge_SplitRecordsAtOnce(t *testing.T) {
	f := newRemergeFixture(t)
	type pair struct{ a, b string }
	var pairs []pair
	for i := 0; i < 4; i++ {
		p := pair{storetest.CID(7300 + 2*i), storetest.CID(7301 + 2*i)}
		pairs = append(pairs, p)
		submit(t, f.s,
			f.own.Text(p.a, "title", "A "+p.a[len(p.a)-6:], 2),
			f.own.Text(p.b, "title", "B "+p.b[len(p.b)-6:], 2),
			f.vandal.Text(p.a, store.LinkPrefix+p.b, "true", 3))
		if ra, rb := record(t, f.s, p.a), record(t, f.s, p.b); ra.RID != rb.RID {
			t.Fatalf("pair %d not joined by the link", i)
		}
	}
	f.hook = func(n, due int) {
		if n != 1 {
			return
		}
		for i, p := range pairs {
			ra, erra := f.s.Record(ctx, p.a, "")
			rb, errb := f.s.Record(ctx, p.b, "")
			if erra != nil || errb != nil || ra.RID == rb.RID || rb.Fields["title"] != "B "+p.b[len(p.b)-6:] {
				t.Errorf("pair %d mid re-merge: %v %v / %v %v, want two records with their own titles", i, ra.Fields, erra, rb.Fields, errb)
			}
		}
	}
	if err := f.s.Distrust(ctx, f.vandal.UID()); err != nil {
		t.Fatal(err)
	}
	if f.chunks.Load() < 1 {
		t.Fatal("no chunk ran")
	}
	f.checkDistrusted(t)
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	diffMaps(t, dumpCache(t, f.cfg.CachePath), rebuiltSamePolicy(t, f.cfg))
}

// TestRemerge_SmallTrustChangeNotHeld: a trust change that queues nothing
// (trusting a signer with no claims, as the node's auto-trust does for a
// new local writer before its first write), made while another change's
// re-merge is queued, is answered between two chunks, not held for the
// whole queue (review 12).
func TestRemerge_SmallTrustChangeNotHeld(t *testing.T) {
	f := newRemergeFixture(t)
	answered := make(chan error, 1)
	f.hook = func(n, due int) {
		switch n {
		case 1:
			go func() { answered <- f.s.Trust(ctx, storetest.Signer(9).UID(), "local writer") }()
			deadline := time.Now().Add(10 * time.Second)
			for store.Queued(f.s) == 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		case 2:
			select { // the writer waits here: answered by now or only after the queue
			case err := <-answered:
				if err != nil {
					t.Errorf("trust: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("a trust change that queued nothing is held for another change's re-merge")
			}
		}
	}
	if err := f.s.Distrust(ctx, f.vandal.UID()); err != nil {
		t.Fatal(err)
	}
	if f.chunks.Load() < 2 {
		t.Fatal("the re-merge was not split")
	}
	if !f.s.Trusted(storetest.Signer(9).UID()) {
		t.Fatal("the small trust change is not in effect")
	}
}
