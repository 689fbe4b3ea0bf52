package store_test

import (
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestRecord_DistrustSplitsGroups: a signer that stops being trusted stops
// linking records. The groups its links joined split along the links of
// the signers still trusted (a trusted signer's retracted link still
// counts: retracting never splits), the largest part keeps the rid, the
// events say what moved, the cache equals a rebuild, and trusting the
// signer again joins the parts back under the old rid.
func TestRecord_DistrustSplitsGroups(t *testing.T) {
	a, b, vandal := storetest.Signer(1), storetest.Signer(2), storetest.Signer(3)
	tp, cp := paths(t)
	s := open(t, store.Config{TruthPath: tp, CachePath: cp})
	submit(t, s, a.Text(cidA, "title", "Amber", 1))
	submit(t, s, b.Text(cidB, "title", "Basalt", 2), b.Text(cidC, "year", "1999", 2))
	submit(t, s, b.Text(cidB, "cids/"+cidC, "true", 3))
	submit(t, s, b.Retraction(cidB, "cids/"+cidC, 4))
	// The vandal's link arrives after its own retraction: stale, it still
	// joins (arrival order never decides groups).
	submit(t, s, vandal.Retraction(cidA, "cids/"+cidB, 6))
	if r := submit(t, s, vandal.Text(cidA, "cids/"+cidB, "true", 5))[0]; r.Outcome != store.Stale {
		t.Fatalf("older link: %v", r.Outcome)
	}
	joined := record(t, s, cidA)
	if joined.RID != record(t, s, cidC).RID || len(joined.CIDs) != 3 || joined.Fields["title"] != "Amber" {
		t.Fatalf("before the distrust: %s %v %v", joined.RID, joined.CIDs, joined.Fields)
	}
	sub, err := s.Subscribe(store.StreamMeta, "")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	if err := s.Distrust(ctx, vandal.UID()); err != nil {
		t.Fatal(err)
	}
	submit(t, s, a.Text(cidA, "marker", "1", 7))
	ra, rb := record(t, s, cidA), record(t, s, cidB)
	if rb.RID != joined.RID || record(t, s, cidC).RID != joined.RID {
		t.Fatalf("the larger part {B, C} lost the rid: %s, want %s", rb.RID, joined.RID)
	}
	if ra.RID == joined.RID || len(ra.CIDs) != 1 || ra.Fields["title"] != "Amber" {
		t.Fatalf("A after the split: %s %v %v", ra.RID, ra.CIDs, ra.Fields)
	}
	if rb.Fields["title"] != "Basalt" || rb.Fields["year"] != "1999" || len(rb.CIDs) != 2 {
		t.Fatalf("B after the split: %v %v", rb.CIDs, rb.Fields)
	}
	got := map[string]string{}
	for _, e := range drainUntil(t, sub, "/marker") {
		got[e.Type+" "+eventKey(t, e)] = ""
	}
	for _, want := range []string{
		"del file:" + joined.RID + "/cids/" + cidA,
		"set file:" + joined.RID + "/title",
		"set file:" + ra.RID + "/title",
		"set file:" + ra.RID + "/cids/" + cidA,
	} {
		if _, ok := got[want]; !ok {
			t.Errorf("no event %q in %v", want, got)
		}
	}
	if st, _ := s.Stats(ctx); st.Records != 2 {
		t.Fatalf("records=%d, want 2", st.Records)
	}
	if hits, total, err := s.Search(ctx, store.SearchQuery{Query: "Amber"}); err != nil || total != 1 || hits[0].RID != ra.RID {
		t.Fatalf("search after the split: %+v %d %v", hits, total, err)
	}

	if err := s.Trust(ctx, vandal.UID(), ""); err != nil {
		t.Fatal(err)
	}
	if r := record(t, s, cidA); r.RID != joined.RID || len(r.CIDs) != 3 {
		t.Fatalf("trusted again: %s %v, want %s", r.RID, r.CIDs, joined.RID)
	}
	if err := s.Distrust(ctx, vandal.UID()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	diffMaps(t, dumpCache(t, cp), rebuilt(t, tp, cp))
	s = reopen(t, store.Config{TruthPath: tp, CachePath: cp})
	defer s.Close()
	if record(t, s, cidA).RID == record(t, s, cidB).RID {
		t.Fatal("the split did not survive a restart")
	}
	if record(t, s, cidC).RID != joined.RID {
		t.Fatal("C left B's record")
	}
}

// TestRecord_SplitOnOlderTruthFile: a truth file written before group_edge
// gets its live links as edges when opened, so a distrust still splits.
func TestRecord_SplitOnOlderTruthFile(t *testing.T) {
	a, vandal := storetest.Signer(1), storetest.Signer(3)
	tp, cp := paths(t)
	s := reopen(t, store.Config{TruthPath: tp, CachePath: cp})
	submit(t, s, a.Text(cidA, "title", "Amber", 1), a.Text(cidB, "title", "Basalt", 1))
	submit(t, s, vandal.Text(cidA, "cids/"+cidB, "true", 2))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", tp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DROP TABLE group_edge`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = reopen(t, store.Config{TruthPath: tp, CachePath: cp})
	if record(t, s, cidA).RID != record(t, s, cidB).RID {
		t.Fatal("not joined after reopening")
	}
	if err := s.Distrust(ctx, vandal.UID()); err != nil {
		t.Fatal(err)
	}
	if record(t, s, cidA).RID == record(t, s, cidB).RID {
		t.Fatal("distrust did not split a group of an older truth file")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A signer distrusted under the older layout left its groups joined
	// (they never split then): the first boot with group_edge splits them.
	olderLayout(t, tp)
	for _, p := range []string{cp, cp + "-wal", cp + "-shm"} { // the cache follows truth
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	s = reopen(t, store.Config{TruthPath: tp, CachePath: cp})
	defer s.Close()
	if record(t, s, cidA).RID == record(t, s, cidB).RID {
		t.Fatal("the first boot on an older truth file left a distrusted signer's group joined")
	}
}

// TestRecord_TrustFlipInOneBatch: a signer trusted for part of one batch
// (vouched, links, vouch withdrawn) leaves no group joined, as when the
// same claims come in separate batches: batching never decides groups.
func TestRecord_TrustFlipInOneBatch(t *testing.T) {
	for _, oneBatch := range []bool{false, true} {
		own, v := storetest.Signer(1), storetest.Signer(2)
		s := open(t, store.Config{Trust: store.TrustList, OwnUID: own.UID()})
		<-s.SyncReady()
		submit(t, s, own.Text(cidA, "title", "Amber", 1), own.Text(cidB, "title", "Basalt", 1))
		cs := []store.Claim{vouch(t, own, v.UID(), 2, true), v.Text(cidA, "cids/"+cidB, "true", 3), vouch(t, own, v.UID(), 4, false)}
		if oneBatch {
			submit(t, s, cs...)
		} else {
			for _, c := range cs {
				submit(t, s, c)
			}
		}
		if record(t, s, cidA).RID == record(t, s, cidB).RID {
			t.Errorf("one batch %v: joined by the link of a signer untrusted at the end", oneBatch)
		}
	}
}

// TestRecord_TrustPolicyChangeAtBoot: reopening truth with another trust
// mode (or own uid) changes whom the configuration trusts: the links of
// signers no longer trusted stop joining records and their votes leave the
// merged view, at that boot; reopening with the same policy rebuilds
// nothing.
func TestRecord_TrustPolicyChangeAtBoot(t *testing.T) {
	own, stranger := storetest.Signer(1), storetest.Signer(3)
	tp, cp := paths(t)
	s := reopen(t, store.Config{TruthPath: tp, CachePath: cp}) // open trust
	submit(t, s, own.Text(cidA, "title", "Amber", 1), own.Text(cidB, "title", "Basalt", 1))
	submit(t, s, stranger.Text(cidA, "cids/"+cidB, "true", 2), stranger.Text(cidC, "title", "Strange", 2))
	if record(t, s, cidA).RID != record(t, s, cidB).RID {
		t.Fatal("not joined under open trust")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	listCfg := store.Config{TruthPath: tp, CachePath: cp, Trust: store.TrustList, OwnUID: own.UID()}
	s = reopen(t, listCfg)
	if record(t, s, cidA).RID == record(t, s, cidB).RID {
		t.Error("a stranger's link still joins records after the node switched to list trust")
	}
	if _, err := s.Record(ctx, cidC, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a record only a stranger described is still a record after the switch: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	logs := &logSink{}
	listCfg.Logger = slog.New(logs)
	s = reopen(t, listCfg)
	defer s.Close()
	if logs.has("rebuilding") {
		t.Error("a restart with the same trust policy rebuilt the cache")
	}
}

// TestRecord_UpgradeKeepsRetractedJoins: on a truth file from before
// group_edge, a trusted signer's retracted link still holds its records
// together when the first boot splits an untrusted signer's joins (the old
// layout shows they were joined; retracting never splits).
func TestRecord_UpgradeKeepsRetractedJoins(t *testing.T) {
	trusted, vandal := storetest.Signer(1), storetest.Signer(3)
	tp, cp := paths(t)
	s := reopen(t, store.Config{TruthPath: tp, CachePath: cp})
	submit(t, s, trusted.Text(cidA, "title", "Amber", 1), trusted.Text(cidB, "year", "1999", 1), trusted.Text(cidC, "title", "Cobalt", 1))
	submit(t, s, trusted.Text(cidA, "cids/"+cidB, "true", 2))
	submit(t, s, trusted.Retraction(cidA, "cids/"+cidB, 3))
	submit(t, s, vandal.Text(cidB, "cids/"+cidC, "true", 4))
	s = distrustUnderOlderLayout(t, s, vandal.UID(), tp, cp)
	defer s.Close()
	a, b, c := record(t, s, cidA), record(t, s, cidB), record(t, s, cidC)
	if a.RID != b.RID {
		t.Error("the first boot split a join a trusted signer's retracted link made")
	}
	if c.RID == a.RID {
		t.Error("the first boot left the distrusted signer's join")
	}
}

// TestRecord_PolicyChangeWithCacheAhead: a truth file restored from a
// backup one commit behind its cache, started with another trust policy:
// the cache is rebuilt (the regroup's own commit must not make the two
// look level).
func TestRecord_PolicyChangeWithCacheAhead(t *testing.T) {
	own, stranger := storetest.Signer(1), storetest.Signer(3)
	tp, cp := paths(t)
	s := reopen(t, store.Config{TruthPath: tp, CachePath: cp}) // open trust
	submit(t, s, stranger.Text(cidC, "title", "Strange", 2))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", cp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE kv SET v = CAST(v AS INTEGER) + 1 WHERE k = 'meta:applied_seq'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = reopen(t, store.Config{TruthPath: tp, CachePath: cp, Trust: store.TrustList, OwnUID: own.UID()})
	defer s.Close()
	if _, err := s.Record(ctx, cidC, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a record only a stranger described is still a record after the switch to list trust: %v", err)
	}
}

// TestRecord_UpgradeUnlinkVote: on the same upgrade, a trusted signer's
// retraction of a link that only the distrusted signer made (an "unlink"
// vote) does not keep the distrusted signer's join.
func TestRecord_UpgradeUnlinkVote(t *testing.T) {
	trusted, vandal := storetest.Signer(1), storetest.Signer(3)
	tp, cp := paths(t)
	s := reopen(t, store.Config{TruthPath: tp, CachePath: cp})
	submit(t, s, trusted.Text(cidA, "title", "Amber", 1), trusted.Text(cidB, "title", "Basalt", 1))
	submit(t, s, vandal.Text(cidA, "cids/"+cidB, "true", 2), trusted.Retraction(cidA, "cids/"+cidB, 3))
	s = distrustUnderOlderLayout(t, s, vandal.UID(), tp, cp)
	defer s.Close()
	if record(t, s, cidA).RID == record(t, s, cidB).RID {
		t.Error("an unlink vote kept a distrusted signer's join through the upgrade")
	}
}

// olderLayout turns a closed store's truth file into what the layout
// before group_edge left after a distrust: no edges, and every cid in one
// record (that layout never split a group).
func olderLayout(t *testing.T, tp string) {
	t.Helper()
	db, err := sql.Open("sqlite", tp)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rid string
	if err := db.QueryRow(`SELECT rid FROM cid_group WHERE cid = ?`, cidA).Scan(&rid); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TABLE group_edge`, `UPDATE cid_group SET rid = ?`} {
		if _, err := db.Exec(q, rid); err != nil {
			t.Fatal(err)
		}
	}
}

// distrustUnderOlderLayout distrusts uid, closes s, turns its truth file
// into the older layout's result (olderLayout) and reopens it: the first
// boot after an upgrade.
func distrustUnderOlderLayout(t *testing.T, s *store.Store, uid, tp, cp string) *store.Store {
	t.Helper()
	if err := s.Distrust(ctx, uid); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	olderLayout(t, tp)
	return reopen(t, store.Config{TruthPath: tp, CachePath: cp})
}
