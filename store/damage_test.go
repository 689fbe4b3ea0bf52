package store_test

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// damageFixture writes and closes a store holding, on cidA by signer 1, a
// title and a year (the claim to damage), and on cidB a title; it returns
// the config to reopen it with and the year claim.
func damageFixture(t *testing.T) (store.Config, store.Claim) {
	t.Helper()
	tp, cp := paths(t)
	cfg := store.Config{TruthPath: tp, CachePath: cp, Scrub: store.ScrubConfig{Period: -1}}
	s := reopen(t, cfg)
	ts := uint64(testNow().UnixMilli()) - 1000
	sg := storetest.Signer(1)
	year := sg.Text(cidA, "year", "Damaged-1995", ts)
	submit(t, s, sg.Text(cidA, "title", "Heat", ts), year, sg.Text(cidB, "title", "Ronin", ts))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return cfg, year
}

// execDB runs a statement on a closed store's database file.
func execDB(t *testing.T, path, q string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// waitFor polls cond (bounded; not a timing assertion).
func waitFor(t testing.TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// served lists every claim the store hands a peer: by range, by item and
// by fetch.
func served(t *testing.T, s *store.Store, c store.Claim) (inRange, byItem, fetched bool) {
	t.Helper()
	item := store.SyncItem{TS: c.TS, ID: c.ID()}
	has := func(cs []store.Claim, err error) bool {
		if err != nil {
			t.Fatal(err)
		}
		for i := range cs {
			if cs[i].CID == c.CID && cs[i].Key == c.Key {
				return true
			}
		}
		return false
	}
	return has(s.ClaimsInRange(ctx, store.SyncItem{}, store.MaxSyncItem, 1000)),
		has(s.ClaimsByItems(ctx, []store.SyncItem{item})),
		has(s.FetchClaims(ctx, c.CID))
}

// TestDamage_FlippedValue: one bit flipped in a claim's value in truth.db
// (the attack of issue 20). The claim is never served to a peer (range,
// items, fetch) nor to an API reader, a cache rebuild does not merge it,
// it is set aside (quarantined) and leaves the sync set, IntegrityHealth
// names it with the remedy, and the genuine claim, sent again (as a peer's
// sync would), takes its place and clears the health.
func TestDamage_FlippedValue(t *testing.T) {
	cfg, year := damageFixture(t)
	storetest.FlipBit(t, cfg.TruthPath, year.Value)
	for _, p := range []string{cfg.CachePath, cfg.CachePath + "-wal", cfg.CachePath + "-shm"} {
		_ = os.Remove(p) // the rebuild at Open reads every row
	}
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	s := reopen(t, cfg)
	defer s.Close()

	rec := record(t, s, cidA)
	if v, ok := rec.Fields["year"]; ok {
		t.Fatalf("the rebuild merged the damaged value: year = %q", v)
	}
	if rec.Fields["title"] != "Heat" {
		t.Fatalf("record %v: the intact claim is missing", rec.Fields)
	}
	if a, b, c := served(t, s, year); a || b || c {
		t.Fatalf("the damaged claim was served (range %v, items %v, fetch %v)", a, b, c)
	}
	gc, err := s.Claims(ctx, cidA, store.ClaimFilter{})
	if err != nil || len(gc.Claims) != 1 || gc.Claims[0].Key != "title" {
		t.Fatalf("API claims %+v, %v: want the title only", gc.Claims, err)
	}
	waitFor(t, "the damaged claim set aside", func() error {
		if h := s.IntegrityHealth(); h == nil {
			return errors.New("IntegrityHealth is nil")
		}
		return nil
	})
	h := s.IntegrityHealth().Error()
	for _, want := range []string{"1 damaged claims in truth.db set aside (quarantined)", "cid " + cidA, `key "year"`,
		"signer " + year.UID, "asks its peers", "restore truth.db from a backup"} {
		if !strings.Contains(h, want) {
			t.Errorf("IntegrityHealth %q does not say %q", h, want)
		}
	}
	q, err := s.Quarantined(ctx, 0)
	if err != nil || len(q) != 1 || q[0].CID != cidA || q[0].Key != "year" || q[0].ID != year.ID() {
		t.Fatalf("Quarantined %+v, %v", q, err)
	}
	<-s.SyncReady()
	if s.SyncSet().Has(store.SyncItem{TS: year.TS, ID: year.ID()}) {
		t.Fatal("the quarantined claim is still in the sync set: peers would never send it back")
	}
	if st, _ := s.Stats(ctx); st.Claims != 2 {
		t.Fatalf("stats count %d live claims, want 2", st.Claims)
	}
	if n := metricValue(t, reg, "metanode_store_quarantined_claims", ""); n != 1 {
		t.Fatalf("metanode_store_quarantined_claims = %v", n)
	}

	res := submit(t, s, year)
	if res[0].Outcome != store.Accepted {
		t.Fatalf("the genuine claim sent again: %v, want accepted", res[0].Outcome)
	}
	if h := s.IntegrityHealth(); h != nil {
		t.Fatalf("the genuine claim is back, IntegrityHealth still says %v", h)
	}
	if q, _ := s.Quarantined(ctx, 0); len(q) != 0 {
		t.Fatalf("quarantine %+v after the genuine claim came back", q)
	}
	if v := record(t, s, cidA).Fields["year"]; v != "Damaged-1995" {
		t.Fatalf("year = %q after the genuine claim came back", v)
	}
	if a, b, c := served(t, s, year); !a || !b || !c {
		t.Fatalf("the genuine claim is not served (range %v, items %v, fetch %v)", a, b, c)
	}
}

// TestDamage_ServedRowFound: with the cache intact (a clean restart, no
// rebuild), the damaged row is found when a peer asks for it: it is left
// out of the answer and set aside, and its record is merged again without
// it.
func TestDamage_ServedRowFound(t *testing.T) {
	cfg, year := damageFixture(t)
	storetest.FlipBit(t, cfg.TruthPath, year.Value)
	s := reopen(t, cfg)
	defer s.Close()
	if _, byItem, _ := served(t, s, year); byItem {
		t.Fatal("the damaged claim was served by item")
	}
	waitFor(t, "the damaged row set aside and its record merged again", func() error {
		if s.IntegrityHealth() == nil {
			return errors.New("IntegrityHealth is nil")
		}
		if v, ok := record(t, s, cidA).Fields["year"]; ok {
			return errors.New("the record still holds year = " + v)
		}
		return nil
	})
}

// TestDamage_NewerClaimOverDamagedRow: a newer claim of the same signer
// on the damaged field, before anything read the row, is accepted (the
// writer sets the damaged row aside in the same transaction) and settles
// the quarantine.
func TestDamage_NewerClaimOverDamagedRow(t *testing.T) {
	cfg, year := damageFixture(t)
	storetest.FlipBit(t, cfg.TruthPath, year.Value)
	s := reopen(t, cfg)
	defer s.Close()
	newer := storetest.Signer(1).Text(cidA, "year", "1996", year.TS+1)
	if res := submit(t, s, newer); res[0].Outcome != store.Accepted {
		t.Fatalf("newer claim: %v (%v)", res[0].Outcome, res[0].Err)
	}
	if h := s.IntegrityHealth(); h != nil {
		t.Fatalf("IntegrityHealth %v: the newer claim settles the damaged one", h)
	}
	if v := record(t, s, cidA).Fields["year"]; v != "1996" {
		t.Fatalf("year = %q", v)
	}
	if st, _ := s.Stats(ctx); st.Claims != 3 {
		t.Fatalf("stats count %d live claims, want 3", st.Claims)
	}
}

// TestDamage_FlippedID: a claim whose id column changed but whose payload
// and signature hold is not lost: the id is written again and the claim is
// served under its real id, with nothing in quarantine.
func TestDamage_FlippedID(t *testing.T) {
	cfg, year := damageFixture(t)
	bad := year.ID()
	bad[7] ^= 0x10
	execDB(t, cfg.TruthPath, `UPDATE claim SET id = ? WHERE key = 'year'`, bad[:])
	s := reopen(t, cfg)
	defer s.Close()
	<-s.SyncReady()
	if _, byItem, _ := served(t, s, year); byItem {
		t.Fatal("a claim was found under its real id before the repair")
	}
	if _, err := s.ClaimsByItems(ctx, []store.SyncItem{{TS: year.TS, ID: bad}}); err != nil {
		t.Fatal(err) // the peer asks for what the sync set holds: the damaged id
	}
	waitFor(t, "the id written again", func() error {
		if _, byItem, _ := served(t, s, year); !byItem {
			return errors.New("not served under its real id")
		}
		// The sync set follows the cache commit, a moment after truth's.
		if !s.SyncSet().Has(store.SyncItem{TS: year.TS, ID: year.ID()}) || s.SyncSet().Has(store.SyncItem{TS: year.TS, ID: bad}) {
			return errors.New("the sync set does not hold the real id instead of the damaged one")
		}
		return nil
	})
	if h := s.IntegrityHealth(); h != nil {
		t.Fatalf("IntegrityHealth %v after a repair", h)
	}
}

// TestDamage_ScrubFindsFlippedSig: a flipped signature leaves the id
// intact, so only a verification finds it: the scrub does, sets the claim
// aside, and counts its progress in the metrics.
func TestDamage_ScrubFindsFlippedSig(t *testing.T) {
	cfg, year := damageFixture(t)
	storetest.FlipBit(t, cfg.TruthPath, year.Sig[:])
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	cfg.Scrub = store.ScrubConfig{Period: time.Millisecond, MaxRate: 1e6, Delay: time.Millisecond}
	s := reopen(t, cfg)
	defer s.Close()
	waitFor(t, "the scrub finds the bad signature", func() error {
		if s.IntegrityHealth() == nil {
			return errors.New("IntegrityHealth is nil")
		}
		return nil
	})
	if q, err := s.Quarantined(ctx, 0); err != nil || len(q) != 1 || q[0].Key != "year" {
		t.Fatalf("Quarantined %+v, %v", q, err)
	}
	waitFor(t, "a scrub pass counted", func() error {
		if n := metricValue(t, reg, "metanode_store_scrub_passes_total", ""); n < 1 {
			return errors.New("no pass yet")
		}
		return nil
	})
	if n := metricValue(t, reg, "metanode_store_scrub_claims_total", ""); n < 3 {
		t.Fatalf("scrub checked %v claims, want at least the 3 stored", n)
	}
	if n := metricValue(t, reg, "metanode_store_scrub_damaged_total", ""); n < 1 {
		t.Fatalf("scrub found %v damaged", n)
	}
}

// TestDamage_QuarantineSurvivesRestart: the quarantine is truth's: after a
// restart it is still named in health, and Damaged signals it so that the
// node asks its peers again.
func TestDamage_QuarantineSurvivesRestart(t *testing.T) {
	cfg, year := damageFixture(t)
	storetest.FlipBit(t, cfg.TruthPath, year.Value)
	s := reopen(t, cfg)
	served(t, s, year)
	waitFor(t, "set aside", func() error {
		if s.IntegrityHealth() == nil {
			return errors.New("IntegrityHealth is nil")
		}
		return nil
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, cfg)
	defer s.Close()
	if s.IntegrityHealth() == nil {
		t.Fatal("the quarantine was forgotten across a restart")
	}
	select {
	case <-s.Damaged():
	default:
		t.Fatal("Damaged not signalled at start with claims in quarantine")
	}
}

// recordsFixture writes and closes a store of the n-claim reference
// dataset, and returns its config (the scrub off, logs from level), every
// record as read then, and their rids.
func recordsFixture(t *testing.T, n int, level slog.Level) (store.Config, map[string]store.Record, []string) {
	t.Helper()
	tp, cp := paths(t)
	cfg := store.Config{TruthPath: tp, CachePath: cp, Trust: store.TrustOpen, Now: testNow,
		Logger: storetest.Logger(t, level), Scrub: store.ScrubConfig{Period: -1}}
	s := reopen(t, cfg)
	storetest.Load(t, s, storetest.Fixture(t, n))
	want := map[string]store.Record{}
	rids, err := s.RIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, rid := range rids {
		want[rid] = record(t, s, rid)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return cfg, want, rids
}

// TestCache_LostRowsComeBack: scattered damage in cache.db (rows of five
// records lost or changed, stray index rows; SQL edits, so that SQLite
// itself sees nothing wrong) made acknowledged cids 404 with the health
// ok. A read of a lost cid now has the record merged again from truth and
// answers it; the writer then checks every record between writes, which
// IntegrityHealth says while it runs, and afterwards every record, the
// listing and its count read as before the damage.
func TestCache_LostRowsComeBack(t *testing.T) {
	cfg, want, rids := recordsFixture(t, 200, slog.LevelError)
	if len(rids) < 6 {
		t.Fatalf("%d records: the fixture needs six", len(rids))
	}
	cp := cfg.CachePath
	s := reopen(t, cfg)
	list, total, err := s.List(ctx, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	r := rids[:5]
	lostCID := want[r[0]].CIDs[0]
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`DELETE FROM kv WHERE k >= 'cid:' AND k < 'cid;' AND v = ?`, []any{r[0]}},
		{`DELETE FROM kv WHERE k >= ? AND k < ?`, []any{"file:" + r[1] + "/", "file:" + r[1] + "0"}},
		{`UPDATE kv SET v = 'garbled' WHERE k = (SELECT min(k) FROM kv WHERE k >= ? AND k < ?)`, []any{"file:" + r[2] + "/", "file:" + r[2] + "0"}},
		{`DELETE FROM kv WHERE k = ?`, []any{"idx:roots/" + r[3]}},
		{`UPDATE kv SET k = k || 'x' WHERE k = (SELECT max(k) FROM kv WHERE k >= ? AND k < ?)`, []any{"file:" + r[4] + "/", "file:" + r[4] + "0"}},
		{`INSERT INTO kv(k, v) VALUES ('idx:roots/01890000-0000-7000-8000-000000000000', '1'), ('cid:` + cidC + `', ?)`, []any{r[4]}},
	} {
		execDB(t, cp, q.sql, q.args...)
	}

	s = store.New(cfg)
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	store.SetRemerge(s, 1, func(int) {
		once.Do(func() { close(reached); <-release })
	})
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	if got := record(t, s, lostCID); !reflect.DeepEqual(got, want[r[0]]) {
		t.Fatalf("the lost cid reads %+v, want %+v", got, want[r[0]])
	}
	<-reached
	h := s.IntegrityHealth()
	if h == nil || !strings.Contains(h.Error(), "cache.db disagreed with truth on record "+r[0]) || !strings.Contains(h.Error(), "left") {
		t.Fatalf("IntegrityHealth during the check: %v", h)
	}
	close(release)
	waitFor(t, "the cache check done", func() error { return s.IntegrityHealth() })
	for _, rid := range rids {
		if got := record(t, s, rid); !reflect.DeepEqual(got, want[rid]) {
			t.Errorf("record %s after the check: %+v, want %+v", rid, got, want[rid])
		}
		for _, cid := range want[rid].CIDs {
			if got, err := s.Resolve(ctx, cid); err != nil || got != rid {
				t.Errorf("cid %s resolves to %q, %v; want %s", cid, got, err, rid)
			}
		}
	}
	list2, total2, err := s.List(ctx, 0, 10000)
	if err != nil || total2 != total || !reflect.DeepEqual(list2, list) {
		t.Fatalf("listing after the check: %d items, total %d, %v; want %d, %d", len(list2), total2, err, len(list), total)
	}
	if _, err := s.Resolve(ctx, cidC); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a stray cid row still resolves: %v", err)
	}
}

// TestCache_ScrubFindsChangedValue: a merged value changed in cache.db
// reads like any other, so no read finds it; the scrub's comparison of
// records with truth does, and the value comes back.
func TestCache_ScrubFindsChangedValue(t *testing.T) {
	cfg, _ := damageFixture(t)
	execDB(t, cfg.CachePath, `UPDATE kv SET v = 'Heap' WHERE v = 'Heat'`)
	cfg.Scrub = store.ScrubConfig{Period: time.Millisecond, MaxRate: 1e6, Delay: time.Millisecond}
	s := reopen(t, cfg)
	defer s.Close()
	waitFor(t, "the title back and the check done", func() error {
		if v := record(t, s, cidA).Fields["title"]; v != "Heat" {
			return errors.New("title " + v)
		}
		return s.IntegrityHealth()
	})
}

// TestCache_ScatteredFlips is issue 20's cache attack on a real file: bits
// flipped at random places in a closed cache.db. Once the scrub has
// compared every record with truth, each acknowledged cid reads its record
// as it was, or the store's health says the cache is damaged (and then a
// restart, which rebuilds it, brings every record back): never a wrong or
// missing record with the health ok.
func TestCache_ScatteredFlips(t *testing.T) {
	cfg, want, rids := recordsFixture(t, 2000, slog.LevelError+1)
	truth, err := os.ReadFile(cfg.TruthPath)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := os.ReadFile(cfg.CachePath)
	if err != nil {
		t.Fatal(err)
	}
	// bad counts the acknowledged cids that do not read their record.
	bad := func(s *store.Store) int {
		n := 0
		for _, rid := range rids {
			for _, cid := range want[rid].CIDs {
				if got, err := s.Record(ctx, cid, ""); err != nil || !reflect.DeepEqual(got, want[rid]) {
					n++
				}
			}
		}
		return n
	}
	damaged := 0
	for seed := range 8 {
		dir := t.TempDir()
		c := bytes.Clone(cache)
		r := rand.New(rand.NewPCG(uint64(seed), 9))
		for range 20 {
			c[8192+r.IntN(len(c)-8192)] ^= 1 << r.IntN(8)
		}
		cfg := cfg
		cfg.TruthPath, cfg.CachePath = filepath.Join(dir, "truth.db"), filepath.Join(dir, "cache.db")
		cfg.Scrub = store.ScrubConfig{Period: time.Millisecond, MaxRate: 1e6, Delay: time.Millisecond}
		reg := prometheus.NewRegistry()
		cfg.Registerer = reg
		for p, b := range map[string][]byte{cfg.TruthPath: truth, cfg.CachePath: c} {
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		s := reopen(t, cfg)
		waitFor(t, "the scrub compares every record", func() error {
			if n := metricValue(t, reg, "metanode_store_scrub_records_total", ""); n < float64(len(rids)) && s.ReadHealth() == nil {
				return fmt.Errorf("%v records compared", n)
			}
			return s.IntegrityHealth() // a check under way: let it end
		})
		n := bad(s)
		health := errors.Join(s.ReadHealth(), s.WriteHealth(), s.IntegrityHealth())
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		switch {
		case n > 0 && health == nil:
			t.Errorf("seed %d: %d cids do not read their record, and the health is ok", seed, n)
		case health != nil:
			damaged++
			cfg.Registerer = nil
			s := reopen(t, cfg)
			if n := bad(s); n > 0 {
				t.Errorf("seed %d: after a restart (health said %v), %d cids still do not read their record", seed, health, n)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d of 8 damaged caches needed a restart", damaged)
}

// TestCache_LoneRecordRepaired: the check after a repair ends even when
// the repaired record was the only one (nothing else to queue).
func TestCache_LoneRecordRepaired(t *testing.T) {
	tp, cp := paths(t)
	cfg := store.Config{TruthPath: tp, CachePath: cp, Scrub: store.ScrubConfig{Period: -1}}
	s := reopen(t, cfg)
	submit(t, s, storetest.Signer(1).Text(cidA, "title", "Heat", uint64(testNow().UnixMilli())))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	execDB(t, cp, `DELETE FROM kv WHERE k = ?`, "cid:"+cidA)
	s = reopen(t, cfg)
	defer s.Close()
	if v := record(t, s, cidA).Fields["title"]; v != "Heat" {
		t.Fatalf("title %q", v)
	}
	waitFor(t, "the check ended", s.IntegrityHealth)
}
