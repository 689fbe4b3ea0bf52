package store_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// claimsOf returns the live claims on one cid by one signer and key.
func stored(t *testing.T, s *store.Store, cid, key, uid string) []store.Claim {
	t.Helper()
	gc, err := s.Claims(ctx, cid, store.ClaimFilter{Key: key, UID: uid})
	if err != nil {
		t.Fatalf("claims: %v", err)
	}
	return gc.Claims
}

// TestSubmit_Outcomes walks every row of the spec's outcome table.
func TestSubmit_Outcomes(t *testing.T) {
	sg := storetest.Signer(1)
	type step struct {
		name   string
		claim  store.Claim
		want   store.Outcome
		stored bool
	}
	base := sg.Text(cidA, "title", "Inception", 1000)
	// Two claims at the same ts: the greater id wins.
	tieA, tieB := sg.Text(cidA, "title", "Tie one", 5000), sg.Text(cidA, "title", "Tie two", 5000)
	lo, hi := tieA, tieB
	if tieA.ID().Compare(tieB.ID()) > 0 {
		lo, hi = tieB, tieA
	}
	steps := []step{
		{"NewRow", base, store.Accepted, true},
		{"SameID", base, store.Unchanged, false},
		{"OlderTS", sg.Text(cidA, "title", "Older", 999), store.Stale, false},
		{"NewerSameValue", sg.Text(cidA, "title", "Inception", 2000), store.Unchanged, true},
		{"NewerOtherValue", sg.Text(cidA, "title", "Inception (2010)", 3000), store.Accepted, true},
		{"CaseOnlyIsADifferentValue", sg.Text(cidA, "title", "inception (2010)", 3500), store.Accepted, true},
		{"TieLowerIDFirst", lo, store.Accepted, true},
		{"TieHigherIDWins", hi, store.Accepted, true},
		{"TieLowerIDNowStale", lo, store.Stale, false},
		{"Retraction", sg.Retraction(cidA, "title", 6000), store.Accepted, true},
		{"RetractionAgain", sg.Retraction(cidA, "title", 7000), store.Unchanged, true},
		{"CipherAfterRetraction", sg.Cipher(cidA, "title", []byte("x"), 8000), store.Accepted, true},
		{"TextWithSameBytesIsAnotherKind", sg.Text(cidA, "title", "x", 9000), store.Accepted, true},
	}
	s := open(t, store.Config{})
	for _, st := range steps {
		res := submit(t, s, st.claim)[0]
		if res.Outcome != st.want || res.Stored != st.stored || res.Err != nil {
			t.Fatalf("%s: outcome=%v stored=%v err=%v, want %v stored=%v", st.name, res.Outcome, res.Stored, res.Err, st.want, st.stored)
		}
		if res.ID != st.claim.ID() {
			t.Fatalf("%s: result id differs from the claim's", st.name)
		}
	}
	got := stored(t, s, cidA, "title", sg.UID())
	if len(got) != 1 || got[0].ID() != steps[len(steps)-1].claim.ID() {
		t.Fatalf("stored row=%v, want the last claim", got)
	}
}

// TestSubmit_BatchOrder: duplicates and conflicts inside one batch are
// processed in order, and the final row is the (ts, id) maximum whatever
// the order.
func TestSubmit_BatchOrder(t *testing.T) {
	sg := storetest.Signer(1)
	c1, c2, c3 := sg.Text(cidA, "year", "1999", 1), sg.Text(cidA, "year", "2000", 2), sg.Text(cidA, "year", "2001", 3)
	for _, tc := range []struct {
		name  string
		batch []store.Claim
		want  []store.Outcome
	}{
		{"Ascending", []store.Claim{c1, c2, c3}, []store.Outcome{store.Accepted, store.Accepted, store.Accepted}},
		{"Descending", []store.Claim{c3, c2, c1}, []store.Outcome{store.Accepted, store.Stale, store.Stale}},
		{"Duplicates", []store.Claim{c2, c2, c1, c3, c3}, []store.Outcome{store.Accepted, store.Unchanged, store.Stale, store.Accepted, store.Unchanged}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t, store.Config{})
			res := submit(t, s, tc.batch...)
			if got := outcomes(res); !slices.Equal(got, tc.want) {
				t.Fatalf("outcomes=%v, want %v", got, tc.want)
			}
			got := stored(t, s, cidA, "year", "")
			if len(got) != 1 || string(got[0].Value) != "2001" {
				t.Fatalf("row=%v, want 2001", got)
			}
			if v, _ := s.Field(ctx, cidA, "year"); v != "2001" {
				t.Fatalf("merged year=%q, want 2001", v)
			}
		})
	}
}

// TestSubmit_Rejections covers every rejection reason: each is reported
// with its sentinel and slug, and nothing of it is stored, while the good
// claims of the same call are.
func TestSubmit_Rejections(t *testing.T) {
	sg := storetest.Signer(1)
	good := sg.Text(cidA, "title", "ok", 1000)
	mk := func(mod func(c *store.Claim)) store.Claim {
		c := store.Claim{CID: cidA, Key: "title", Kind: store.KindText, Value: []byte("x"), TS: 1000}
		mod(&c)
		sg.Sign(&c)
		return c
	}
	future := uint64(testNow().Add(11 * time.Minute).UnixMilli())
	cases := []struct {
		name  string
		claim store.Claim
		want  error
		slug  string
	}{
		{"BadSignature", func() store.Claim { c := mk(func(*store.Claim) {}); c.Sig[3] ^= 1; return c }(), store.ErrBadSignature, "bad_signature"},
		{"TamperedValue", func() store.Claim { c := mk(func(*store.Claim) {}); c.Value = []byte("y"); return c }(), store.ErrBadSignature, "bad_signature"},
		{"BadUID", func() store.Claim { c := mk(func(*store.Claim) {}); c.UID = "zzz"; return c }(), store.ErrBadUID, "bad_uid"},
		{"BadCID", mk(func(c *store.Claim) { c.CID = "bafy-not-a-cid" }), store.ErrBadCID, "bad_cid"},
		{"NonCanonicalCID", mk(func(c *store.Claim) { c.CID = strings.ToUpper(cidA) }), store.ErrBadCID, "bad_cid"},
		{"BadKey", mk(func(c *store.Claim) { c.Key = "a//b" }), store.ErrBadKey, "bad_key"},
		{"ReservedKey", mk(func(c *store.Claim) { c.Key = "filePath" }), store.ErrReservedKey, "reserved_key"},
		{"DeprecatedKey", mk(func(c *store.Claim) { c.Key = "midhash256" }), store.ErrDeprecatedField, "deprecated_field"},
		{"TooLarge", mk(func(c *store.Claim) { c.Value = bytes.Repeat([]byte("v"), store.MaxValueBytes+1) }), store.ErrTooLarge, "too_large"},
		{"FutureTimestamp", mk(func(c *store.Claim) { c.TS = future }), store.ErrFutureTimestamp, "future_timestamp"},
		{"LinkNotTrue", mk(func(c *store.Claim) { c.Key = "cids/" + cidB; c.Value = []byte("yes") }), store.ErrBadValue, "schema_violation"},
	}
	s := open(t, store.Config{})
	batch := []store.Claim{good}
	for _, c := range cases {
		batch = append(batch, c.claim)
	}
	res := submit(t, s, batch...)
	if res[0].Outcome != store.Accepted {
		t.Fatalf("good claim: %v %v", res[0].Outcome, res[0].Err)
	}
	for i, c := range cases {
		r := res[i+1]
		if r.Outcome != store.Rejected || !errors.Is(r.Err, c.want) || store.Slug(r.Err) != c.slug {
			t.Errorf("%s: outcome=%v err=%v slug=%s, want rejected %v (%s)", c.name, r.Outcome, r.Err, store.Slug(r.Err), c.want, c.slug)
		}
	}
	st, _ := s.Stats(ctx)
	if st.Claims != 1 {
		t.Fatalf("stored claims=%d, want only the good one", st.Claims)
	}

	t.Run("Untrusted", func(t *testing.T) {
		own, other := storetest.Signer(1), storetest.Signer(2)
		s := open(t, store.Config{Trust: store.TrustList, OwnUID: own.UID()})
		res := submit(t, s, own.Text(cidA, "title", "mine", 1), other.Text(cidA, "title", "theirs", 1))
		if res[0].Outcome != store.Accepted {
			t.Fatalf("own claim: %v %v", res[0].Outcome, res[0].Err)
		}
		if res[1].Outcome != store.Rejected || !errors.Is(res[1].Err, store.ErrUntrusted) || store.Slug(res[1].Err) != "untrusted_signer" {
			t.Fatalf("untrusted claim: %v %v", res[1].Outcome, res[1].Err)
		}
		if got := stored(t, s, cidA, "", other.UID()); len(got) != 0 {
			t.Fatalf("untrusted claim stored: %v", got)
		}
	})
}

// TestSubmit_ValueKinds: text keeps its exact bytes and type ("007" is not
// 7), ciphertext (even empty) stays ciphertext, a retraction is a tombstone.
func TestSubmit_ValueKinds(t *testing.T) {
	sg := storetest.Signer(1)
	s := open(t, store.Config{})
	claims := []store.Claim{
		sg.Text(cidA, "code", "007", 1),
		sg.Text(cidA, "empty", "", 1),
		sg.Cipher(cidA, "secret", []byte{}, 1),
		sg.Cipher(cidA, "secret2", []byte{0, 1, 2}, 1),
		sg.Retraction(cidA, "gone", 1),
	}
	submit(t, s, claims...)
	gc, err := s.Claims(ctx, cidA, store.ClaimFilter{})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]store.Claim{}
	for _, c := range gc.Claims {
		byKey[c.Key] = c
		if c.ID() != func() store.ID {
			for _, o := range claims {
				if o.Key == c.Key {
					return o.ID()
				}
			}
			return store.ID{}
		}() {
			t.Fatalf("%s: read back with another id", c.Key)
		}
		if err := c.Verify(); err != nil {
			t.Fatalf("%s: read back does not verify: %v", c.Key, err)
		}
	}
	if c := byKey["code"]; c.Kind != store.KindText || string(c.Value) != "007" {
		t.Fatalf("code=%v %q", c.Kind, c.Value)
	}
	if c := byKey["secret"]; c.Kind != store.KindCipher || len(c.Value) != 0 {
		t.Fatalf("empty cipher read back as %v %q", c.Kind, c.Value)
	}
	if _, ok := byKey["gone"]; ok {
		t.Fatal("Claims lists a tombstone")
	}
	rec := record(t, s, cidA)
	if rec.Fields["code"] != "007" || rec.Fields["empty"] != "" {
		t.Fatalf("merged=%v", rec.Fields)
	}
	if _, ok := rec.Fields["secret"]; ok {
		t.Fatal("ciphertext was merged")
	}
	st, _ := s.Stats(ctx)
	if st.Claims != 4 || st.Tombstones != 1 || st.Signers != 1 || st.Records != 1 {
		t.Fatalf("stats=%+v", st)
	}
}

// TestSubmit_SkipsVerificationOfStoredClaims: once the sync set is loaded,
// a claim already stored is answered unchanged without verifying it again
// (its bytes are the stored claim's; the signature is not part of the id).
func TestSubmit_SkipsVerificationOfStoredClaims(t *testing.T) {
	sg := storetest.Signer(1)
	s := open(t, store.Config{})
	<-s.SyncReady()
	// Stored through the caller-verified path with a signature that does
	// not verify: resubmitting the identical claim is answered from the
	// stored row, so it is not verified again (else it would be rejected).
	c := sg.Text(cidA, "title", "x", 1)
	c.Sig[10] ^= 1
	if res, err := s.Submit(ctx, []store.Claim{c}, store.SubmitOptions{Verified: true}); err != nil || res[0].Outcome != store.Accepted {
		t.Fatalf("caller-verified claim: %v %v", res, err)
	}
	if r := submit(t, s, c)[0]; r.Outcome != store.Unchanged || r.Stored {
		t.Fatalf("resubmitted stored claim: %v %v", r.Outcome, r.Err)
	}
	// A copy with another signature than the stored one is verified: the
	// id does not cover the signature.
	good := sg.Text(cidA, "title", "x", 1)
	if r := submit(t, s, good)[0]; r.Outcome != store.Unchanged || r.Err != nil {
		t.Fatalf("a valid copy with another signature: %v %v", r.Outcome, r.Err)
	}
	broken := good
	broken.Sig[20] ^= 1
	if r := submit(t, s, broken)[0]; r.Outcome != store.Rejected || !errors.Is(r.Err, store.ErrBadSignature) {
		t.Fatalf("a broken copy of a stored claim: %v %v", r.Outcome, r.Err)
	}
	// A broken copy of a stored claim whose row a newer claim replaces in
	// the same batch is still verified, and rejected (not answered stale).
	newer := sg.Text(cidA, "title", "y", 2)
	if r := submit(t, s, newer, broken); r[0].Outcome != store.Accepted || r[1].Outcome != store.Rejected {
		t.Fatalf("a newer claim then a broken copy of the old one: %v %v", outcomes(r), r[1].Err)
	}
	// A claim not stored is still verified.
	other := sg.Text(cidA, "year", "1", 1)
	other.Sig[10] ^= 1
	if r := submit(t, s, other)[0]; r.Outcome != store.Rejected {
		t.Fatalf("bad claim: %v", r.Outcome)
	}
	// The caller's Verified option skips verification altogether.
	res, err := s.Submit(ctx, []store.Claim{sg.Text(cidA, "type", "movie", 1)}, store.SubmitOptions{Verified: true})
	if err != nil || res[0].Outcome != store.Accepted {
		t.Fatalf("verified submit: %v %v", res, err)
	}
}

// TestSubmit_Durable: what was answered survives a clean restart.
func TestSubmit_Durable(t *testing.T) {
	tp, cp := paths(t)
	cfg := store.Config{TruthPath: tp, CachePath: cp}
	s := reopen(t, cfg)
	sg := storetest.Signer(1)
	submit(t, s, sg.Text(cidA, "title", "x", 1), sg.Retraction(cidA, "year", 1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("second close: %v, want ErrClosed", err)
	}
	if _, err := s.Submit(ctx, []store.Claim{sg.Text(cidA, "x", "y", 1)}, store.SubmitOptions{}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("submit after close: %v", err)
	}
	s = reopen(t, cfg)
	defer s.Close()
	if v, err := s.Field(ctx, cidA, "title"); err != nil || v != "x" {
		t.Fatalf("title after restart=%q %v", v, err)
	}
	st, _ := s.Stats(ctx)
	if st.Claims != 1 || st.Tombstones != 1 || st.LastSeq != st.AppliedSeq {
		t.Fatalf("stats after restart=%+v", st)
	}
}

// TestSubmit_ConcurrentCallers: many goroutines submitting at once are
// batched together, and every claim gets its own answer.
func TestSubmit_ConcurrentCallers(t *testing.T) {
	s := open(t, store.Config{MaxBatch: 64})
	signers := storetest.Signers(4)
	const per = 40
	claims := storetest.Claims(len(signers)*per, func(i int) (*store.Signer, store.Claim) {
		return signers[i%len(signers)], store.Claim{CID: storetest.CID(i / 7), Key: "k/" + string(rune('a'+i%26)), Kind: store.KindText, Value: []byte{byte('0' + i%10)}, TS: uint64(i + 1)}
	})
	errs := make(chan error, len(claims))
	for i := range claims {
		go func() {
			res, err := s.Submit(ctx, claims[i:i+1], store.SubmitOptions{})
			if err == nil && res[0].Outcome == store.Rejected {
				err = res[0].Err
			}
			errs <- err
		}()
	}
	for range claims {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st, _ := s.Stats(ctx)
	if int(st.Claims) != len(claims) {
		t.Fatalf("claims=%d, want %d", st.Claims, len(claims))
	}
}

// TestSubmit_Vectors stores the spec's vectors and serves them back byte
// for byte.
func TestSubmit_Vectors(t *testing.T) {
	var vf struct {
		Vectors []struct {
			Name    string          `json:"name"`
			Claim   json.RawMessage `json:"claim"`
			WireHex string          `json:"wireHex"`
		} `json:"vectors"`
	}
	b, err := os.ReadFile("testdata/mmur2-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &vf); err != nil {
		t.Fatal(err)
	}
	s := open(t, store.Config{})
	want := map[store.ID]string{}
	for _, v := range vf.Vectors {
		var c store.Claim
		if err := json.Unmarshal(v.Claim, &c); err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if r := submit(t, s, c)[0]; r.Outcome != store.Accepted {
			t.Fatalf("%s: %v %v", v.Name, r.Outcome, r.Err)
		}
		want[c.ID()] = v.WireHex
	}
	// The retraction replaced the first title: every other vector is a row.
	all, err := s.ClaimsInRange(ctx, store.MinSyncItem, store.MaxSyncItem, 100)
	if err != nil || len(all) != len(vf.Vectors)-1 {
		t.Fatalf("stored=%d %v", len(all), err)
	}
	for _, c := range all {
		if got := hex.EncodeToString(c.Wire()); got != want[c.ID()] {
			t.Fatalf("served %s, want %s", got, want[c.ID()])
		}
	}
	// The link joined the two cids of the vectors into one record.
	rec := record(t, s, "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	if len(rec.CIDs) != 2 || rec.Fields["titles/jpn"] != "インセプション" || rec.Fields["genres/Drama"] != "true" {
		t.Fatalf("record=%v", rec.Fields)
	}
	if _, ok := rec.Fields["watched"]; ok {
		t.Fatal("ciphertext merged")
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := open(t, store.Config{Registerer: reg})
	sg := storetest.Signer(1)
	bad := sg.Text(cidA, "x", "y", 1)
	bad.Sig[0] ^= 1
	submit(t, s, sg.Text(cidA, "title", "x", 1), sg.Text(cidA, "title", "x", 1), bad)
	sub, _ := s.Subscribe(store.StreamMeta, "")
	defer sub.Close()
	for outcome, want := range map[string]float64{"accepted": 1, "unchanged": 1, "rejected": 1} {
		if got := metricValue(t, reg, "metanode_store_claims_total", outcome); got != want {
			t.Fatalf("claims_total{%s}=%v, want %v", outcome, got, want)
		}
	}
	if got := metricValue(t, reg, "metanode_store_subscribers", string(store.StreamMeta)); got != 1 {
		t.Fatalf("subscribers=%v", got)
	}
	if got := metricValue(t, reg, "metanode_store_events_total", string(store.StreamMeta)); got != 2 {
		t.Fatalf("meta events=%v, want 2 (title and the cid member)", got)
	}
	for _, name := range []string{"metanode_store_commit_seconds", "metanode_store_batch_claims", "metanode_store_queue_depth"} {
		metricValue(t, reg, name, "")
	}
}

// TestTruthSyncMode: a batch of claims from peers only commits truth
// without fsync; a local write, a trust change or files commit with it.
func TestTruthSyncMode(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := open(t, store.Config{Registerer: reg})
	sg := storetest.Signer(1)
	steps := []struct {
		name string
		do   func() error
		full bool
	}{
		{"peer claim", func() error {
			_, err := s.Submit(ctx, []store.Claim{sg.Text(cidA, "title", "a", 1)}, store.SubmitOptions{Origin: store.OriginPeer})
			return err
		}, false},
		{"local claim", func() error {
			_, err := s.Submit(ctx, []store.Claim{sg.Text(cidA, "title", "b", 2)}, store.SubmitOptions{})
			return err
		}, true},
		{"fetched claim", func() error {
			_, err := s.Submit(ctx, []store.Claim{sg.Text(cidB, "title", "c", 3)}, store.SubmitOptions{Origin: store.OriginFetch})
			return err
		}, false},
		{"trust change", func() error { return s.Trust(ctx, storetest.Signer(2).UID(), "") }, true},
	}
	var full, normal float64
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if st.full {
			full++
		} else {
			normal++
		}
		if full > 0 {
			if got := metricValue(t, reg, "metanode_store_truth_commits_total", "full"); got != full {
				t.Fatalf("after %s: %v full commits, want %v", st.name, got, full)
			}
		}
		if normal > 0 {
			if got := metricValue(t, reg, "metanode_store_truth_commits_total", "normal"); got != normal {
				t.Fatalf("after %s: %v normal commits, want %v", st.name, got, normal)
			}
		}
	}
}

// TestTruthSync_UnchangedAfterPeer: a local claim answered "unchanged"
// because a peer's copy was committed without fsync makes its own commit
// write (so that the fsync happens and covers the peer's frames): the
// truth WAL is written. Without a NORMAL commit before it, it is not.
func TestTruthSync_UnchangedAfterPeer(t *testing.T) {
	tp, cp := paths(t)
	s := reopen(t, store.Config{TruthPath: tp, CachePath: cp})
	defer s.Close()
	walHash := func() [32]byte { // the WAL's bytes: a commit that writes frames changes them
		b, err := os.ReadFile(tp + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b)
	}
	sg := storetest.Signer(1)
	x := sg.Text(cidA, "title", "x", 1)
	if _, err := s.Submit(ctx, []store.Claim{x}, store.SubmitOptions{Origin: store.OriginPeer}); err != nil {
		t.Fatal(err)
	}
	before := walHash()
	res, err := s.Submit(ctx, []store.Claim{x}, store.SubmitOptions{})
	if err != nil || res[0].Outcome != store.Unchanged {
		t.Fatalf("local copy: %+v %v", res, err)
	}
	after := walHash()
	if after == before {
		t.Fatal("truth WAL unchanged: the unchanged answer's commit wrote nothing, so nothing was fsynced")
	}
	// Synced now: the same answer again writes nothing.
	if _, err := s.Submit(ctx, []store.Claim{x}, store.SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	if again := walHash(); again != after {
		t.Fatal("truth WAL written for a second unchanged claim")
	}
}

// metricValue reads one series (by a label value, or the unlabelled one)
// of a registered metric.
func metricValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, lp := range m.GetLabel() {
				match = match || lp.GetValue() == label
			}
			if !match {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("%s{%s} not registered", name, label)
	return 0
}
