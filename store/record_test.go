package store_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// TestRecord_Merge: the merged view through the store (spec §5), its
// events, and the as-overlay.
func TestRecord_Merge(t *testing.T) {
	a, b, c := storetest.Signer(1), storetest.Signer(2), storetest.Signer(3)
	s := open(t, store.Config{})
	sub, err := s.Subscribe(store.StreamMeta, "")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	submit(t, s, a.Text(cidA, "title", "The Matrix", 10), c.Text(cidA, "title", "Matrix", 5))
	// c's vote is the oldest: alone against alone it wins.
	if got := record(t, s, cidA).Fields["title"]; got != "Matrix" {
		t.Fatalf("title=%q, want Matrix", got)
	}
	// b joins a's bucket (case and spaces fold): two signers beat one, and
	// the stored text is that of the bucket's oldest vote.
	submit(t, s, b.Text(cidA, "title", "  the matrix", 20))
	rec := record(t, s, cidA)
	if got := rec.Fields["title"]; got != "The Matrix" {
		t.Fatalf("title=%q, want The Matrix", got)
	}
	// A vote that changes no merged value emits nothing: the next event
	// is the marker's.
	submit(t, s, b.Text(cidA, "title", "THE MATRIX", 30))
	submit(t, s, a.Text(cidA, "marker", "1", 40))
	evs := drainUntil(t, sub, "/marker")
	var titles int
	for _, e := range evs {
		if strings.HasSuffix(eventKey(t, e), "/title") {
			titles++
		}
	}
	// set by c, set when a+b took over: exactly two title events.
	if titles != 2 {
		t.Fatalf("title events=%d, want 2: %v", titles, evs)
	}
	// The overlay shows c's own vote; an unknown viewer changes nothing.
	over, err := s.Record(ctx, cidA, c.UID())
	if err != nil || over.Fields["title"] != "Matrix" {
		t.Fatalf("overlay title=%q %v", over.Fields["title"], err)
	}
	if plain := record(t, s, cidA); plain.Fields["title"] != "The Matrix" {
		t.Fatal("the overlay was written to the cache")
	}
	if other, _ := s.Record(ctx, cidA, storetest.Signer(9).UID()); other.Fields["title"] != "The Matrix" {
		t.Fatalf("unknown viewer changed the view: %v", other.Fields)
	}
	// Retractions drop a signer out; ciphertext never counts.
	submit(t, s, a.Retraction(cidA, "title", 50), b.Cipher(cidA, "title", []byte("secret"), 50))
	if got := record(t, s, cidA).Fields["title"]; got != "Matrix" {
		t.Fatalf("after retraction title=%q, want Matrix", got)
	}
	submit(t, s, c.Retraction(cidA, "title", 60))
	if _, ok := record(t, s, cidA).Fields["title"]; ok {
		t.Fatal("title still merged with every vote retracted")
	}
	if _, err := s.Field(ctx, cidA, "title"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("field of a retracted key: %v", err)
	}
}

func TestRecord_Shape(t *testing.T) {
	a := storetest.Signer(1)
	s := open(t, store.Config{})
	sha := "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy" // sha2-256: ranks 30
	mid := storetest.MidhashCID(1)                                       // midhash256: ranks 10
	submit(t, s, a.Text(mid, "title", "x", 1), a.Text(mid, "cids/"+sha, "true", 1))
	rec := record(t, s, sha)
	if rec.CanonicalCID != sha {
		t.Fatalf("canonical=%s, want the sha2-256 cid", rec.CanonicalCID)
	}
	if want := []string{mid, sha}; !slices.Equal(rec.CIDs, sortedCopy(want)) {
		t.Fatalf("cids=%v", rec.CIDs)
	}
	for _, c := range rec.CIDs {
		if rec.Fields["cids/"+c] != "true" {
			t.Fatalf("fields lack cids/%s: %v", c, rec.Fields)
		}
	}
	if !store.IsRID(rec.RID) {
		t.Fatalf("rid %q", rec.RID)
	}
	byRID := record(t, s, rec.RID)
	if !maps.Equal(byRID.Fields, rec.Fields) {
		t.Fatal("record by rid differs from record by cid")
	}
	if rid, err := s.Resolve(ctx, mid); err != nil || rid != rec.RID {
		t.Fatalf("resolve=%s %v", rid, err)
	}
	for _, h := range []string{storetest.CID(99), "00000000000000000000000000", "garbage"} {
		if _, err := s.Record(ctx, h, ""); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("record %q: %v, want ErrNotFound", h, err)
		}
		if _, err := s.Resolve(ctx, h); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("resolve %q: %v", h, err)
		}
	}
	gc, err := s.Claims(ctx, sha, store.ClaimFilter{})
	if err != nil || gc.RID != rec.RID || len(gc.Claims) != 2 {
		t.Fatalf("claims=%+v %v", gc, err)
	}
	gc, _ = s.Claims(ctx, rec.RID, store.ClaimFilter{Key: "title"})
	if len(gc.Claims) != 1 {
		t.Fatalf("claims by key=%v", gc.Claims)
	}
	gc, _ = s.Claims(ctx, rec.RID, store.ClaimFilter{UID: storetest.Signer(5).UID()})
	if len(gc.Claims) != 0 {
		t.Fatalf("claims by unknown uid=%v", gc.Claims)
	}
	if _, err := s.Claims(ctx, storetest.CID(99), store.ClaimFilter{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("claims of unknown cid: %v", err)
	}
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestRecord_Links: links put cids in one group, joins keep the older
// (smaller) rid and emit del for the loser's keys and set for the
// survivor's, and retracting a link never splits.
func TestRecord_Links(t *testing.T) {
	a, b := storetest.Signer(1), storetest.Signer(2)
	s := open(t, store.Config{})
	submit(t, s, a.Text(cidA, "title", "A title", 1))
	submit(t, s, b.Text(cidB, "year", "1999", 1), b.Text(cidB, "title", "B title", 2))
	ra, rb := record(t, s, cidA).RID, record(t, s, cidB).RID
	if ra == rb {
		t.Fatal("two unlinked cids share a record")
	}
	survivor, loser := min(ra, rb), max(ra, rb)
	sub, err := s.Subscribe(store.StreamMeta, "")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	submit(t, s, a.Text(cidA, "cids/"+cidB, "true", 3))
	submit(t, s, a.Text(cidA, "marker", "1", 4))
	evs := drainUntil(t, sub, "/marker")
	dels, sets := map[string]bool{}, map[string]bool{}
	for _, e := range evs {
		k := eventKey(t, e)
		switch {
		case e.Type == "del" && strings.HasPrefix(k, "file:"+loser+"/"):
			dels[strings.TrimPrefix(k, "file:"+loser+"/")] = true
		case e.Type == "set" && strings.HasPrefix(k, "file:"+survivor+"/"):
			sets[strings.TrimPrefix(k, "file:"+survivor+"/")] = true
		default:
			t.Fatalf("unexpected event %s %s", e.Type, k)
		}
	}
	rec := record(t, s, cidB)
	if rec.RID != survivor || record(t, s, cidA).RID != survivor {
		t.Fatalf("rid after join=%s, want the smaller %s", rec.RID, survivor)
	}
	// Every key of the loser was deleted; the survivor gained what it
	// did not hold.
	loserKeys := map[string]bool{"cids/" + cidB: true, "year": true, "title": true}
	if loser == ra {
		loserKeys = map[string]bool{"cids/" + cidA: true, "title": true}
	}
	if !maps.Equal(dels, loserKeys) {
		t.Fatalf("del events=%v, want %v", dels, loserKeys)
	}
	if len(sets) == 0 {
		t.Fatal("no set event for the survivor")
	}
	// Two signers, one vote each on title: the older vote (a's, ts 1) wins.
	if rec.Fields["title"] != "A title" || rec.Fields["year"] != "1999" || len(rec.CIDs) != 2 {
		t.Fatalf("joined record=%v", rec.Fields)
	}
	if _, err := s.Resolve(ctx, loser); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("loser rid still resolves: %v", err)
	}
	// Retracting the link does not split the group.
	submit(t, s, a.Retraction(cidA, "cids/"+cidB, 5))
	if record(t, s, cidA).RID != record(t, s, cidB).RID {
		t.Fatal("a retracted link split the group")
	}
	// A link to a cid nobody knew adds it to the group.
	submit(t, s, b.Text(cidB, "cids/"+cidC, "true", 6))
	rec = record(t, s, cidC)
	if rec.RID != survivor || rec.Fields["cids/"+cidC] != "true" || len(rec.CIDs) != 3 {
		t.Fatalf("after adding cidC: %s %v", rec.RID, rec.CIDs)
	}
	if ok, _ := s.HasCID(ctx, cidC); !ok {
		t.Fatal("HasCID(cidC)=false")
	}
	st, _ := s.Stats(ctx)
	if st.Records != 1 {
		t.Fatalf("records=%d, want 1", st.Records)
	}
	rids, _ := s.RIDs(ctx)
	if !slices.Equal(rids, []string{survivor}) {
		t.Fatalf("rids=%v", rids)
	}
}

// TestRecord_LinksOfUntrustedSigners join nothing.
func TestRecord_LinksOfDistrustedSigners(t *testing.T) {
	a, spam := storetest.Signer(1), storetest.Signer(2)
	s := open(t, store.Config{})
	submit(t, s, a.Text(cidA, "title", "A", 1), a.Text(cidB, "title", "B", 1))
	if err := s.Distrust(ctx, spam.UID()); err != nil {
		t.Fatal(err)
	}
	res := submit(t, s, spam.Text(cidA, "cids/"+cidB, "true", 2))
	if res[0].Outcome != store.Rejected {
		t.Fatalf("distrusted link: %v", res[0].Outcome)
	}
	if record(t, s, cidA).RID == record(t, s, cidB).RID {
		t.Fatal("a distrusted signer joined two records")
	}
}

// TestRecord_PeerCIDsFormNoRecord: claims on a node's peer-id cid (vouches)
// are stored and shared, but make no record.
func TestRecord_PeerCIDsFormNoRecord(t *testing.T) {
	a := storetest.Signer(1)
	peer, err := store.PeerIDCID(a.UID())
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, store.Config{})
	res := submit(t, s, a.Text(peer, "vouch/"+storetest.Signer(2).UID(), "true", 1))
	if res[0].Outcome != store.Accepted {
		t.Fatalf("vouch: %v %v", res[0].Outcome, res[0].Err)
	}
	if _, err := s.Record(ctx, peer, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record of a peer cid: %v", err)
	}
	if ok, _ := s.HasCID(ctx, peer); ok {
		t.Fatal("HasCID(peer cid)=true")
	}
	got, err := s.FetchClaims(ctx, peer)
	if err != nil || len(got) != 1 {
		t.Fatalf("fetch=%v %v", got, err)
	}
	gc, err := s.Claims(ctx, peer, store.ClaimFilter{})
	if err != nil || gc.RID != "" || len(gc.Claims) != 1 {
		t.Fatalf("claims of peer cid=%+v %v", gc, err)
	}
	if st, _ := s.Stats(ctx); st.Records != 0 {
		t.Fatalf("records=%d", st.Records)
	}
}

// TestMerge_InMemory: POST /api/merge stores nothing.
func TestMerge_InMemory(t *testing.T) {
	a, b, c := storetest.Signer(1), storetest.Signer(2), storetest.Signer(3)
	s := open(t, store.Config{})
	submit(t, s, c.Text(cidA, "title", "Held by the node", 1))
	bad := a.Text(cidA, "year", "x", 1)
	bad.Sig[0] ^= 1
	in := []store.Claim{
		a.Text(cidA, "title", "Dune", 5), b.Text(cidA, "title", "dune ", 6), c.Text(cidA, "title", "Other", 1),
		bad, a.Text(cidA, "filePath", "/x", 1), a.Text(cidA, "cids/"+cidB, "true", 1),
	}
	res, err := s.Merge(ctx, in, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Fields["title"] != "Dune" || res.NSrc["title"] != 2 {
		t.Fatalf("merge=%v %v", res.Fields, res.NSrc)
	}
	if len(res.Rejected) != 2 || res.Rejected[0].Index != 3 && res.Rejected[1].Index != 3 {
		t.Fatalf("rejected=%v", res.Rejected)
	}
	if _, ok := res.Fields["cids/"+cidB]; ok {
		t.Fatal("a link was merged")
	}
	over, err := s.Merge(ctx, in[:2], c.UID())
	if err != nil || over.Fields["title"] != "Held by the node" {
		t.Fatalf("merge as c=%v %v", over.Fields, err)
	}
	if st, _ := s.Stats(ctx); st.Claims != 1 {
		t.Fatalf("merge stored claims: %d", st.Claims)
	}
}
