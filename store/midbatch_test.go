package store_test

import (
	"database/sql"
	"errors"
	"log/slog"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestTrust_SignerTrustedMidBatchLeavesNoRecord: a signer trusted for part
// of one batch only (vouched for, then unvouched, in one Submit) has its
// claims stored while it is trusted, yet it ends the batch untrusted, as it
// began. A new cid it alone describes is a group in truth but no record
// (hidden, as a rebuild from the same truth makes it), and a record others
// describe keeps only their votes: the incremental cache equals a rebuild
// with the same trust policy.
func TestTrust_SignerTrustedMidBatchLeavesNoRecord(t *testing.T) {
	own, voucher, guest := storetest.Signer(0), storetest.Signer(1), storetest.Signer(3)
	pc, _ := store.PeerIDCID(voucher.UID())
	vouch := "vouch/" + guest.UID()
	for _, c := range []struct {
		name    string
		unvouch store.Claim
	}{
		{"retraction", voucher.Retraction(pc, vouch, 2)},
		{"false", voucher.Text(pc, vouch, "false", 2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp, cp := paths(t)
			cfg := store.Config{TruthPath: tp, CachePath: cp, Trust: store.TrustList, OwnUID: own.UID()}
			s := reopen(t, cfg)
			defer s.Close()
			if err := s.Trust(ctx, voucher.UID(), ""); err != nil {
				t.Fatal(err)
			}
			lone, shared := storetest.CID(4000), storetest.CID(4001)
			submit(t, s, own.Text(shared, "title", "Kept", 1))
			res := submit(t, s,
				voucher.Text(pc, vouch, "true", 1),
				guest.Text(lone, "title", "vandal", 1),
				guest.Text(shared, "year", "1066", 1),
				c.unvouch,
			)
			for i, r := range res {
				if r.Outcome != store.Accepted {
					t.Fatalf("claim %d: %v %v, want accepted (stored while its signer was trusted)", i, r.Outcome, r.Err)
				}
			}
			if rec, err := s.Record(ctx, lone, ""); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("record of a cid only an untrusted signer describes: %v %v, want ErrNotFound", rec.Fields, err)
			}
			if rec := record(t, s, shared); rec.Fields["title"] != "Kept" || rec.Fields["year"] != "" {
				t.Fatalf("shared record: %v, want the trusted title and no year", rec.Fields)
			}
			for _, g := range res[1:3] {
				if s.SyncSet().Has(store.SyncItem{TS: 1, ID: g.ID}) {
					t.Fatal("an untrusted signer's claim is in the sync set")
				}
			}
			if st, _ := s.Stats(ctx); st.Records != 1 {
				t.Fatalf("records=%d, want 1", st.Records)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			diffMaps(t, dumpCache(t, cp), rebuiltSamePolicy(t, cfg))
		})
	}
}

// rebuiltSamePolicy returns what a full rebuild of cfg's files gives under
// cfg's trust policy: copies of truth and cache (neither is touched), the
// copy's applied_seq removed so that boot rebuilds. (rebuilt() reopens the
// same truth with the default, open policy.)
func rebuiltSamePolicy(t testing.TB, cfg store.Config) map[string]string {
	t.Helper()
	cache, _ := rebuiltWithSync(t, cfg)
	return cache
}

// syncSummary is what a sync set holds, compared whole: its accumulator
// over every item and its size.
type syncSummary struct {
	acc store.Accumulator
	n   int
}

func summarize(set *store.SyncSet) syncSummary {
	return syncSummary{set.Summary(store.MinSyncItem, store.MaxSyncItem), set.Len()}
}

// rebuiltWithSync is rebuiltSamePolicy that also returns the rebuilt
// store's sync set, loaded from truth.
func rebuiltWithSync(t testing.TB, cfg store.Config) (map[string]string, syncSummary) {
	t.Helper()
	dir := t.TempDir()
	tp, cp := dir+"/truth.db", dir+"/cache.db"
	copyFile(t, cfg.TruthPath, tp)
	copyFile(t, cfg.CachePath, cp)
	db, err := sql.Open("sqlite", cp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM kv WHERE k = 'meta:applied_seq'`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	logs := &logSink{}
	c := cfg
	c.TruthPath, c.CachePath, c.Logger = tp, cp, slog.New(logs)
	s := reopen(t, c)
	<-s.SyncReady()
	sync := summarize(s.SyncSet())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !logs.has("rebuilding") {
		t.Fatal("the copy was not rebuilt")
	}
	return dumpCache(t, cp), sync
}
