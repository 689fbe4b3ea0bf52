package store_test

import (
	"database/sql"
	"errors"
	"log/slog"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// title is the merged title of cid ("" and false when it has none).
func title(t testing.TB, s *store.Store, cid string) (string, bool) {
	t.Helper()
	rec, err := s.Record(ctx, cid, "")
	if errors.Is(err, store.ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	v, ok := rec.Fields["title"]
	return v, ok
}

// TestHomeVectors_Store: each vector of home-merge-vectors.json through a
// real store: the trust list set, the vouches and votes submitted as
// signed claims (those of untrusted signers are refused), the record's
// merged title read back; and a full rebuild gives the same cache.
func TestHomeVectors_Store(t *testing.T) {
	hv, keys := store.LoadHomeVectors(t)
	cid := storetest.MidhashCID(4242)
	for _, vec := range hv.Vectors {
		t.Run(vec.Name, func(t *testing.T) {
			t.Parallel()
			s, cfg := homeVectorStore(t, vec, keys, cid)
			cp := cfg.CachePath
			check := func(when string) {
				got, ok := title(t, s, cid)
				switch {
				case vec.Want == nil && ok:
					t.Fatalf("%s: title %q, want none", when, got)
				case vec.Want != nil && got != vec.Want.Value:
					t.Fatalf("%s: title %q (present %v), want %q", when, got, ok, vec.Want.Value)
				}
			}
			check("applied")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			want, _ := rebuiltWithSync(t, cfg)
			diffMaps(t, dumpCache(t, cp), want)
		})
	}
}

// sybilHome is home Y's store in the sybil attack: Y's two plugins wrote
// Heat, home X (paired: trusted directly) vouches for five fresh keys that
// then write EVIL, later.
type sybilHome struct {
	s               *store.Store
	cfg             store.Config
	y, x            *store.Signer
	plugins, minted []*store.Signer
	cid             string
}

func newSybilHome(t *testing.T, logger *slog.Logger) *sybilHome {
	t.Helper()
	all := storetest.Signers(9)
	h := &sybilHome{y: all[0], x: all[1], plugins: all[2:4], minted: all[4:9], cid: storetest.MidhashCID(4343)}
	tp, cp := paths(t)
	h.cfg = store.Config{TruthPath: tp, CachePath: cp, Trust: store.TrustList, OwnUID: h.y.UID(), Logger: logger}
	h.s = reopen(t, h.cfg)
	if err := h.s.Trust(ctx, h.x.UID(), "paired"); err != nil {
		t.Fatal(err)
	}
	// Y's local writers: listed and vouched for by Y, as the node does.
	for _, p := range h.plugins {
		if err := h.s.Trust(ctx, p.UID(), "local writer"); err != nil {
			t.Fatal(err)
		}
		submit(t, h.s, vouch(t, h.y, p.UID(), 1_700_000_000_000, true))
	}
	submit(t, h.s, h.plugins[0].Text(h.cid, "title", "Heat", 1_700_000_001_000), h.plugins[1].Text(h.cid, "title", "Heat", 1_700_000_002_000))
	var evil []store.Claim
	for i, m := range h.minted {
		evil = append(evil, vouch(t, h.x, m.UID(), 1_700_000_003_000, true), m.Text(h.cid, "title", "EVIL", 1_700_000_004_000+uint64(i)))
	}
	if _, err := h.s.Submit(ctx, evil, store.SubmitOptions{Origin: store.OriginPeer}); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *sybilHome) want(t *testing.T, when, v string) {
	t.Helper()
	if got, _ := title(t, h.s, h.cid); got != v {
		t.Fatalf("%s: title %q, want %q", when, got, v)
	}
}

// TestHomes_MintedKeysCannotOutvote: the sybil attack on a real store.
// Five keys home X vouched for count as one home against home Y's two
// plugins: Y keeps Heat (the older vote of a one-to-one tie). Trust
// changes that move signers between homes re-merge their records: Y's
// owner trusting one minted key directly makes it a home of its own (two
// homes to one: EVIL, with a set event); distrusting X leaves that one
// key against Y (Heat again).
func TestHomes_MintedKeysCannotOutvote(t *testing.T) {
	h := newSybilHome(t, nil)
	defer h.s.Close()
	h.want(t, "attacked", "Heat")
	sub, err := h.s.Subscribe(store.StreamMeta, "")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := h.s.Trust(ctx, h.minted[0].UID(), ""); err != nil {
		t.Fatal(err)
	}
	h.want(t, "one minted key trusted directly", "EVIL")
	if e := nextEvent(t, sub); e.Type != "set" || eventKey(t, e) == "" {
		t.Fatalf("event %v, want a set of the title", e)
	}
	if err := h.s.Distrust(ctx, h.x.UID()); err != nil {
		t.Fatal(err)
	}
	h.want(t, "X distrusted", "Heat")
	// A minted key that writes through Y's own API becomes Y's (Y vouches
	// for it): it votes inside Y's home, where Y's plugins outnumber it.
	if err := h.s.Trust(ctx, h.x.UID(), ""); err != nil {
		t.Fatal(err)
	}
	submit(t, h.s, vouch(t, h.y, h.minted[0].UID(), 1_700_000_005_000, true))
	h.want(t, "the directly trusted minted key became Y's local writer", "Heat")
}

// TestHomes_UpgradeRemerges: a cache built under the old merge rules
// (no merge_rules row, a value by signer count) is rebuilt at boot, and
// keeps its local files and scratch keys.
func TestHomes_UpgradeRemerges(t *testing.T) {
	logs := &logSink{}
	h := newSybilHome(t, slog.New(logs))
	if _, err := h.s.ApplyFiles(ctx, []store.FileUpdate{{Op: store.FileAdd, File: store.LocalFile{Path: "/m/heat.mkv", CID: h.cid, Size: 7, MtimeNano: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := h.s.KVPut(ctx, "sort/state", "kept"); err != nil {
		t.Fatal(err)
	}
	rec, err := h.s.Record(ctx, h.cid, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.s.Close(); err != nil {
		t.Fatal(err)
	}
	// What the previous build left: the minted keys' title, no rules row.
	db, err := sql.Open("sqlite", h.cfg.CachePath)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DELETE FROM kv WHERE k = 'meta:merge_rules'`,
		`UPDATE kv SET v = 'EVIL' WHERE k = 'file:` + rec.RID + `/title'`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	h.s = reopen(t, h.cfg)
	if !logs.has("rebuilding") {
		t.Fatal("the old cache was not rebuilt")
	}
	h.want(t, "after the upgrade", "Heat")
	if v, ok, err := h.s.KVGet(ctx, "sort/state"); err != nil || !ok || v != "kept" {
		t.Fatalf("scratch key after the upgrade: %q %v %v", v, ok, err)
	}
	rec, err = h.s.Record(ctx, h.cid, "")
	if err != nil || rec.Fields["filePath"] != "/m/heat.mkv" {
		t.Fatalf("local file after the upgrade: %v %v", rec.Fields, err)
	}
	// A second start: nothing to rebuild.
	if err := h.s.Close(); err != nil {
		t.Fatal(err)
	}
	logs2 := &logSink{}
	cfg := h.cfg
	cfg.Logger = slog.New(logs2)
	h.s = reopen(t, cfg)
	defer h.s.Close()
	if logs2.has("rebuilding") {
		t.Fatal("rebuilt again at the next start")
	}
}

// homeVectorStore opens a store with vec's trust list and distrusts, then
// submits its vouches and its votes on cid's title as signed claims.
func homeVectorStore(t *testing.T, vec store.HomeVector, keys map[string]*store.Signer, cid string) (*store.Store, store.Config) {
	t.Helper()
	tp, cp := paths(t)
	cfg := store.Config{TruthPath: tp, CachePath: cp, Trust: vec.Mode, OwnUID: keys[vec.Own].UID()}
	s := reopen(t, cfg)
	for _, l := range vec.Trusted {
		if err := s.Trust(ctx, keys[l].UID(), ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range vec.Distrusted {
		if err := s.Distrust(ctx, keys[l].UID()); err != nil {
			t.Fatal(err)
		}
	}
	var vouches, votes []store.Claim
	for _, p := range vec.Vouches {
		vouches = append(vouches, vouch(t, keys[p[0]], keys[p[1]].UID(), 1_700_000_000_000, true))
	}
	for _, v := range vec.Votes {
		if v.Value == nil {
			votes = append(votes, keys[v.Signer].Retraction(cid, "title", v.TS))
		} else {
			votes = append(votes, keys[v.Signer].Text(cid, "title", *v.Value, v.TS))
		}
	}
	for _, batch := range [][]store.Claim{vouches, votes} {
		if _, err := s.Submit(ctx, batch, store.SubmitOptions{Origin: store.OriginPeer}); err != nil {
			t.Fatal(err)
		}
	}
	return s, cfg
}
