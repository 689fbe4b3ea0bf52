package store_test

import (
	"errors"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestRecord_DistrustHidesWhatNothingDescribes: a record only a distrusted
// signer described is no record any more (not found by cid or rid, not
// listed, counted or searched, a del event per row), while a record a
// trusted signer or a local file also describes stays; trusting the
// signer again brings it back; the hidden state survives a restart and
// equals a rebuild. A link target the distrust splits off alone is hidden
// too.
func TestRecord_DistrustHidesWhatNothingDescribes(t *testing.T) {
	a, vandal := storetest.Signer(1), storetest.Signer(3)
	cidD, cidE := storetest.CID(4), storetest.CID(5)
	tp, cp := paths(t)
	s := open(t, store.Config{TruthPath: tp, CachePath: cp})
	submit(t, s, a.Text(cidA, "title", "Amber", 1))
	submit(t, s, vandal.Text(cidA, "year", "1066", 2), vandal.Text(cidB, "title", "Junk", 2),
		vandal.Text(cidC, "title", "Junk with a file", 2), vandal.Text(cidA, "cids/"+cidD, "true", 2))
	if _, err := s.ApplyFiles(ctx, []store.FileUpdate{{Op: store.FileAdd, File: store.LocalFile{Path: "/files/c.mkv", CID: cidC, Size: 7}}}); err != nil {
		t.Fatal(err)
	}
	junk := record(t, s, cidB)
	if st, _ := s.Stats(ctx); st.Records != 3 {
		t.Fatalf("records=%d before the distrust, want 3 (A with D, B, C)", st.Records)
	}
	sub, err := s.Subscribe(store.StreamMeta, "")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	if err := s.Distrust(ctx, vandal.UID()); err != nil {
		t.Fatal(err)
	}
	submit(t, s, a.Text(cidE, "marker", "1", 3))
	for _, h := range []string{cidB, junk.RID, cidD} {
		if _, err := s.Record(ctx, h, ""); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("record %s after the distrust: %v, want ErrNotFound", h, err)
		}
	}
	if r := record(t, s, cidA); r.Fields["title"] != "Amber" || r.Fields["year"] != "" || len(r.CIDs) != 1 {
		t.Fatalf("A after the distrust: %v %v", r.CIDs, r.Fields)
	}
	if r := record(t, s, cidC); r.Fields["filePath"] != "/files/c.mkv" || r.Fields["title"] != "" {
		t.Fatalf("C (a local file) after the distrust: %v", r.Fields)
	}
	if st, _ := s.Stats(ctx); st.Records != 3 {
		t.Fatalf("records=%d after the distrust, want 3 (A, C, E)", st.Records)
	}
	items, total, err := s.List(ctx, 0, 100)
	if err != nil || total != 3 || len(items) != 3 {
		t.Fatalf("list: %d items, total %d, %v", len(items), total, err)
	}
	for _, it := range items {
		if it.RID == junk.RID {
			t.Fatal("the hidden record is listed")
		}
	}
	if _, total, err := s.Search(ctx, store.SearchQuery{Query: junk.RID}); err != nil || total != 0 {
		t.Fatalf("search finds the hidden record: %d %v", total, err)
	}
	got := map[string]bool{}
	for _, e := range drainUntil(t, sub, "/marker") {
		got[e.Type+" "+eventKey(t, e)] = true
	}
	for _, want := range []string{"del file:" + junk.RID + "/title", "del file:" + junk.RID + "/cids/" + cidB} {
		if !got[want] {
			t.Errorf("no event %q in %v", want, got)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	diffMaps(t, dumpCache(t, cp), rebuilt(t, tp, cp))

	s = reopen(t, store.Config{TruthPath: tp, CachePath: cp})
	defer s.Close()
	if _, err := s.Record(ctx, cidB, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("hidden record after a restart: %v", err)
	}
	if err := s.Trust(ctx, vandal.UID(), ""); err != nil {
		t.Fatal(err)
	}
	if r := record(t, s, cidB); r.RID != junk.RID || r.Fields["title"] != "Junk" {
		t.Fatalf("B trusted again: %s %v, want %s Junk", r.RID, r.Fields, junk.RID)
	}
	if r := record(t, s, cidD); r.RID != record(t, s, cidA).RID {
		t.Fatal("D did not join A again")
	}
	if st, _ := s.Stats(ctx); st.Records != 4 {
		t.Fatalf("records=%d trusted again, want 4", st.Records)
	}
}

// TestRecord_HiddenComesBackWithAClaimOrAFile: a hidden group gets its
// record back when a trusted signer writes about it or a local file with
// its cid appears, and loses it when the file goes and nothing else
// describes it.
func TestRecord_HiddenComesBackWithAClaimOrAFile(t *testing.T) {
	a, vandal := storetest.Signer(1), storetest.Signer(3)
	tp, cp := paths(t)
	s := open(t, store.Config{TruthPath: tp, CachePath: cp})
	defer s.Close()
	submit(t, s, vandal.Text(cidA, "title", "Junk", 1), vandal.Text(cidB, "title", "Junk", 1))
	if err := s.Distrust(ctx, vandal.UID()); err != nil {
		t.Fatal(err)
	}
	submit(t, s, a.Text(cidA, "title", "Amber", 2))
	if r := record(t, s, cidA); r.Fields["title"] != "Amber" || len(r.CIDs) != 1 {
		t.Fatalf("A after a trusted claim: %v %v", r.CIDs, r.Fields)
	}
	file := store.LocalFile{Path: "/files/b.mkv", CID: cidB, Size: 3}
	if _, err := s.ApplyFiles(ctx, []store.FileUpdate{{Op: store.FileAdd, File: file}}); err != nil {
		t.Fatal(err)
	}
	if r := record(t, s, cidB); r.Fields["filePath"] != file.Path || r.Fields["title"] != "" {
		t.Fatalf("B with a local file: %v", r.Fields)
	}
	if _, err := s.ApplyFiles(ctx, []store.FileUpdate{{Op: store.FileDelete, File: store.LocalFile{Path: file.Path}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Record(ctx, cidB, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("B after its file went: %v, want ErrNotFound", err)
	}
	if st, _ := s.Stats(ctx); st.Records != 1 {
		t.Fatalf("records=%d, want 1", st.Records)
	}
	// A hidden group that loses a join leaves nothing behind (A's rid is
	// the older one and survives).
	submit(t, s, a.Text(cidA, "cids/"+cidB, "true", 3))
	if r := record(t, s, cidB); r.RID != record(t, s, cidA).RID || r.Fields["title"] != "Amber" {
		t.Fatalf("B linked to A: %s %v", r.RID, r.Fields)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	diffMaps(t, dumpCache(t, cp), rebuilt(t, tp, cp))
}
