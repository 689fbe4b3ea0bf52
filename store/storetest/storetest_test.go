package storetest_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOpen_SubmitAndRead(t *testing.T) {
	s := storetest.Open(t, store.Config{})
	sg := storetest.Signer(1)
	cid := storetest.CID(1)
	claims := storetest.Claims(3, func(i int) (*store.Signer, store.Claim) {
		return sg, store.Claim{CID: cid, Key: []string{"title", "year", "type"}[i], Kind: store.KindText, Value: []byte("v"), TS: 1000}
	})
	res, err := s.Submit(context.Background(), claims, store.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome != store.Accepted {
			t.Fatalf("claim %d: %v %v", i, r.Outcome, r.Err)
		}
	}
	rec, err := s.Record(context.Background(), cid, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(rec.Fields), 4; got != want {
		t.Fatalf("fields=%d, want %d: %v", got, want, rec.Fields)
	}
}

func TestSigners_Deterministic(t *testing.T) {
	a, b := storetest.Signers(3), storetest.Signers(3)
	for i := range a {
		if a[i].UID() != b[i].UID() {
			t.Fatalf("signer %d differs between calls", i)
		}
	}
	if a[0].UID() == a[1].UID() {
		t.Fatal("signers 0 and 1 are the same")
	}
	if err := store.CheckCID(storetest.CID(7)); err != nil {
		t.Fatal(err)
	}
	if err := store.CheckCID(storetest.MidhashCID(7)); err != nil {
		t.Fatal(err)
	}
}

func TestFixture_CachedAndDeterministic(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	d := storetest.Fixture(t, 500)
	claims, err := d.Claims()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(claims), 500; got != want {
		t.Fatalf("claims=%d, want %d", got, want)
	}
	if len(d.CIDs) < 25 || len(d.CIDs) > 35 {
		t.Fatalf("records=%d for 500 claims, want about 29", len(d.CIDs))
	}
	for i := range claims {
		if err := claims[i].Verify(); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	sum := d.Checksum()
	again := storetest.Fixture(t, 500) // read from the cache
	if again.Checksum() != sum {
		t.Fatal("the cached fixture changed")
	}
	s := storetest.Open(t, store.Config{})
	res, err := s.Submit(context.Background(), claims, store.SubmitOptions{Verified: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome == store.Rejected || r.Outcome == store.Stale {
			t.Fatalf("claim %d: %v %v", i, r.Outcome, r.Err)
		}
	}
}
