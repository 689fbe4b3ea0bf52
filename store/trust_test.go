package store_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

func item(c store.Claim) store.SyncItem { return store.SyncItem{TS: c.TS, ID: c.ID()} }

// signalled reports whether TrustChanges holds a signal, consuming it.
func signalled(s *store.Store) bool {
	select {
	case <-s.TrustChanges():
		return true
	default:
		return false
	}
}

func vouch(t *testing.T, voucher *store.Signer, uid string, ts uint64, live bool) store.Claim {
	t.Helper()
	peer, err := store.PeerIDCID(voucher.UID())
	if err != nil {
		t.Fatal(err)
	}
	if live {
		return voucher.Text(peer, "vouch/"+uid, "true", ts)
	}
	return voucher.Retraction(peer, "vouch/"+uid, ts)
}

func entry(list []store.TrustEntry, uid string) (store.TrustEntry, bool) {
	for _, e := range list {
		if e.UID == uid {
			return e, true
		}
	}
	return store.TrustEntry{}, false
}

func TestTrust_List(t *testing.T) {
	own, x := storetest.Signer(1), storetest.Signer(2)
	s := open(t, store.Config{Trust: store.TrustList, OwnUID: own.UID()})
	<-s.SyncReady()
	if !s.Trusted(own.UID()) || s.Trusted(x.UID()) || s.TrustMode() != store.TrustList {
		t.Fatal("initial trust")
	}
	if r := submit(t, s, x.Text(cidA, "title", "x", 1))[0]; r.Outcome != store.Rejected {
		t.Fatalf("untrusted claim: %v", r.Outcome)
	}
	if err := s.Trust(ctx, x.UID(), "my other home"); err != nil {
		t.Fatal(err)
	}
	if !s.Trusted(x.UID()) || !signalled(s) {
		t.Fatal("Trust did not take effect or did not signal")
	}
	c := x.Text(cidA, "title", "x", 2)
	if r := submit(t, s, c)[0]; r.Outcome != store.Accepted {
		t.Fatalf("trusted claim: %v %v", r.Outcome, r.Err)
	}
	if !s.SyncSet().Has(item(c)) {
		t.Fatal("trusted claim not in the sync set")
	}
	list, _ := s.TrustList(ctx)
	if e, ok := entry(list, x.UID()); !ok || e.Source != "list" || e.Note != "my other home" || e.Added.IsZero() {
		t.Fatalf("trust list entry=%+v", e)
	}
	if e, ok := entry(list, own.UID()); !ok || e.Source != "own" {
		t.Fatalf("own entry=%+v", e)
	}
	if err := s.Distrust(ctx, own.UID()); !errors.Is(err, store.ErrOwnUID) || !errors.Is(err, store.ErrBadUID) {
		t.Fatalf("distrust own: %v", err)
	}
	if err := s.Trust(ctx, "zbad", ""); !errors.Is(err, store.ErrBadUID) {
		t.Fatalf("trust bad uid: %v", err)
	}

	// Distrust: the claims stay in truth but stop counting and leave the
	// sync set; trusting again brings them back.
	if err := s.Distrust(ctx, x.UID()); err != nil {
		t.Fatal(err)
	}
	if s.Trusted(x.UID()) || !s.Distrusted(x.UID()) || !signalled(s) {
		t.Fatal("distrust did not take effect")
	}
	if _, err := s.Field(ctx, cidA, "title"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a distrusted vote still counts: %v", err)
	}
	if s.SyncSet().Has(item(c)) {
		t.Fatal("a distrusted signer's claim is still shared")
	}
	if got, _ := s.ClaimsByItems(ctx, []store.SyncItem{item(c)}); len(got) != 0 {
		t.Fatal("a distrusted signer's claim is still served")
	}
	if st, _ := s.Stats(ctx); st.Claims != 1 {
		t.Fatalf("claims in truth=%d, want 1 (kept)", st.Claims)
	}
	if err := s.Trust(ctx, x.UID(), ""); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Field(ctx, cidA, "title"); v != "x" || !s.SyncSet().Has(item(c)) {
		t.Fatalf("trusting again: title=%q", v)
	}
}

// TestTrust_Vouches: one hop only; a retraction withdraws the vouch; a
// distrust overrides it.
func TestTrust_Vouches(t *testing.T) {
	own, v, y, z := storetest.Signer(1), storetest.Signer(2), storetest.Signer(3), storetest.Signer(4)
	s := open(t, store.Config{Trust: store.TrustList, OwnUID: own.UID()})
	<-s.SyncReady()
	// own vouches for v: v is trusted.
	submit(t, s, vouch(t, own, v.UID(), 1, true))
	if !s.Trusted(v.UID()) || !signalled(s) {
		t.Fatal("own's vouch did not trust v")
	}
	// v (trusted only by a vouch) vouches for y: one hop only.
	submit(t, s, vouch(t, v, y.UID(), 2, true))
	if s.Trusted(y.UID()) {
		t.Fatal("vouching is transitive")
	}
	// A vouch on someone else's peer cid does not count.
	peer, _ := store.PeerIDCID(own.UID())
	res := submit(t, s, v.Text(peer, "vouch/"+z.UID(), "true", 3))
	if res[0].Outcome != store.Accepted || s.Trusted(z.UID()) {
		t.Fatalf("a vouch on another node's peer cid: %v trusted=%v", res[0].Outcome, s.Trusted(z.UID()))
	}
	list, _ := s.TrustList(ctx)
	if e, ok := entry(list, v.UID()); !ok || e.Source != "vouch" || len(e.VouchedBy) != 1 || e.VouchedBy[0] != own.UID() {
		t.Fatalf("vouch entry=%+v", e)
	}
	// v's votes count while vouched for.
	c := v.Text(cidA, "title", "by v", 4)
	submit(t, s, c)
	if got, _ := s.Field(ctx, cidA, "title"); got != "by v" {
		t.Fatalf("title=%q", got)
	}
	// Withdrawing the vouch: v's votes stop counting, its claims leave the set.
	submit(t, s, vouch(t, own, v.UID(), 5, false))
	if s.Trusted(v.UID()) || !signalled(s) {
		t.Fatal("retracted vouch still trusts v")
	}
	if _, err := s.Field(ctx, cidA, "title"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("title after the vouch was withdrawn: %v", err)
	}
	if s.SyncSet().Has(item(c)) {
		t.Fatal("v's claim still shared")
	}
	// A listed voucher's vouch counts; a distrust overrides it.
	if err := s.Trust(ctx, v.UID(), ""); err != nil {
		t.Fatal(err)
	}
	if !s.Trusted(y.UID()) {
		t.Fatal("a listed signer's vouch does not count")
	}
	if s.Trusted(z.UID()) {
		t.Fatal("a listed signer's vouch on another node's peer cid counts")
	}
	if err := s.Distrust(ctx, y.UID()); err != nil {
		t.Fatal(err)
	}
	if s.Trusted(y.UID()) {
		t.Fatal("distrust did not override the vouch")
	}
	list, _ = s.TrustList(ctx)
	if _, ok := entry(list, y.UID()); ok {
		t.Fatal("a distrusted uid is listed as trusted")
	}
	// The owner can review the block and the vouch it overrides.
	blocked, err := s.DistrustList(ctx)
	if err != nil || len(blocked) != 1 {
		t.Fatalf("distrust list=%+v %v, want y only", blocked, err)
	}
	if e := blocked[0]; e.UID != y.UID() || e.Source != "distrusted" || e.Added.IsZero() || len(e.VouchedBy) != 1 || e.VouchedBy[0] != v.UID() {
		t.Fatalf("distrusted entry=%+v, want y vouched by v", e)
	}
	if err := s.Trust(ctx, y.UID(), ""); err != nil {
		t.Fatal(err)
	}
	if blocked, _ := s.DistrustList(ctx); len(blocked) != 0 {
		t.Fatalf("distrust list after trusting again=%+v", blocked)
	}
}

func TestTrust_OpenModeBlocks(t *testing.T) {
	x := storetest.Signer(2)
	s := open(t, store.Config{Trust: store.TrustOpen})
	if !s.Trusted(x.UID()) {
		t.Fatal("open mode does not trust a stranger")
	}
	submit(t, s, x.Text(cidA, "title", "x", 1))
	if err := s.Distrust(ctx, x.UID()); err != nil {
		t.Fatal(err)
	}
	if r := submit(t, s, x.Text(cidA, "year", "1", 2))[0]; r.Outcome != store.Rejected || !errors.Is(r.Err, store.ErrUntrusted) {
		t.Fatalf("blocked signer: %v", r.Outcome)
	}
	if _, err := s.Field(ctx, cidA, "title"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("a blocked signer's vote counts")
	}
}

// TestTrust_Restart: the list and the vouches are read back from truth.
func TestTrust_Restart(t *testing.T) {
	own, v, x := storetest.Signer(1), storetest.Signer(2), storetest.Signer(3)
	tp, cp := paths(t)
	cfg := store.Config{TruthPath: tp, CachePath: cp, Trust: store.TrustList, OwnUID: own.UID(),
		Now: func() time.Time { return testNow().Add(123456789 * time.Nanosecond) }} // a clock finer than the store keeps
	s := reopen(t, cfg)
	submit(t, s, vouch(t, own, v.UID(), 1, true))
	if err := s.Trust(ctx, x.UID(), "n"); err != nil {
		t.Fatal(err)
	}
	before, err := s.TrustList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, cfg)
	defer s.Close()
	if !s.Trusted(v.UID()) || !s.Trusted(x.UID()) {
		t.Fatal("trust lost across a restart")
	}
	// The list reads the same, to its timestamps (review s11 B5: the
	// added time had nanoseconds until the restart, milliseconds after).
	after, err := s.TrustList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b, a := fmt.Sprint(before), fmt.Sprint(after); b != a {
		t.Fatalf("trust list before a restart:\n%s\nafter:\n%s", b, a)
	}
}

// TestTrust_NoOpVouchRetraction: withdrawing a vouch that was never given
// changes nothing (it once left the writer with an empty trusted set).
func TestTrust_NoOpVouchRetraction(t *testing.T) {
	own, x := storetest.Signer(1), storetest.Signer(2)
	s := open(t, store.Config{Trust: store.TrustList, OwnUID: own.UID()})
	if err := s.Trust(ctx, x.UID(), ""); err != nil {
		t.Fatal(err)
	}
	submit(t, s, x.Text(cidA, "title", "x", 1))
	res := submit(t, s, vouch(t, own, storetest.Signer(3).UID(), 2, false), x.Text(cidA, "year", "1", 2))
	if res[0].Outcome != store.Accepted || res[1].Outcome != store.Accepted {
		t.Fatalf("outcomes %v %v / %v %v", res[0].Outcome, res[0].Err, res[1].Outcome, res[1].Err)
	}
	if r := submit(t, s, x.Text(cidA, "type", "movie", 3))[0]; r.Outcome != store.Accepted {
		t.Fatalf("after a no-op vouch retraction: %v %v", r.Outcome, r.Err)
	}
	if v, err := s.Field(ctx, cidA, "title"); err != nil || v != "x" {
		t.Fatalf("title=%q %v", v, err)
	}
	signalled(s) // drain Trust(x)'s signal
	submit(t, s, vouch(t, own, storetest.Signer(4).UID(), 4, false))
	if signalled(s) {
		t.Fatal("a no-op vouch retraction signalled a trust change")
	}
}

// TestTrustAt: a change time given to TrustAt or DistrustAt is the row's
// (the node dates a change after its own vouch when the clock is behind);
// it survives a restart, and a zero time means now.
func TestTrustAt(t *testing.T) {
	dir := t.TempDir()
	cfg := store.Config{TruthPath: filepath.Join(dir, "t.db"), CachePath: filepath.Join(dir, "c.db"), Trust: store.TrustList}
	x, y := storetest.Signer(2), storetest.Signer(3)
	later := time.UnixMilli(4_102_444_800_000).UTC() // 2100
	s := store.New(cfg)
	if err := s.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.TrustAt(ctx, x.UID(), "owner", later); err != nil {
		t.Fatal(err)
	}
	if err := s.DistrustAt(ctx, y.UID(), later.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, cfg)
	list, _ := s.TrustList(ctx)
	if e, ok := entry(list, x.UID()); !ok || !e.Added.Equal(later) {
		t.Fatalf("trusted at %v: entry %+v", later, e)
	}
	blocked, _ := s.DistrustList(ctx)
	if len(blocked) != 1 || !blocked[0].Added.Equal(later.Add(time.Millisecond)) {
		t.Fatalf("distrusted at %v: %+v", later.Add(time.Millisecond), blocked)
	}
	if err := s.TrustAt(ctx, y.UID(), "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	list, _ = s.TrustList(ctx)
	if e, _ := entry(list, y.UID()); e.Added.IsZero() || !e.Added.Before(later) {
		t.Fatalf("a zero time is now: entry %+v", e)
	}
}
