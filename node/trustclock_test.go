package node_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// The clock steps back (NTP after a boot with a stale clock, a VM snapshot)
// between the auto-trust vouch and the owner's trust rm. The withdrawal
// must still be newer than the vouch, and the trust check must not undo
// the owner's trust rm because the vouch carries a later time.

// steppedNode is a node whose clock reads real time plus *offset.
func steppedNode(t *testing.T, offset *atomic.Int64) (*node.Node, *logBuffer) {
	t.Helper()
	cfg := testConfig(t, dataDir(t, "a"))
	cfg.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	cfg, logs := capturing(t, cfg)
	return openNode(t, cfg), logs
}

// TestTrustClock_DistrustAfterSmallStepBack: the clock goes back 5 minutes
// (within the store's future allowance). trust rm signs its withdrawal
// after the vouch, succeeds, and a check changes nothing.
func TestTrustClock_DistrustAfterSmallStepBack(t *testing.T) {
	ctx := context.Background()
	var offset atomic.Int64
	offset.Store(int64(5 * time.Minute))
	a, _ := steppedNode(t, &offset)
	plugin := signer(t)
	submitAccepted(t, a, plugin.Text(testCID(90), "title", "Heat", nowMS()+uint64((5*time.Minute).Milliseconds())))
	vouch := ownVouch(t, a, plugin.UID())

	offset.Store(0)
	if err := a.Distrust(ctx, plugin.UID()); err != nil {
		t.Fatalf("trust rm: %v", err)
	}
	w := ownVouch(t, a, plugin.UID())
	if w.Kind != store.KindRetraction || w.TS <= vouch.TS {
		t.Fatalf("latest own vouch claim: kind %v ts %d, want a retraction after the vouch's ts %d", w.Kind, w.TS, vouch.TS)
	}
	noChange(t, a)
	if !a.Store().Distrusted(plugin.UID()) || a.Store().Trusted(plugin.UID()) {
		t.Fatal("the plugin the owner removed is trusted again")
	}
	// trust add after it vouches again, after the withdrawal.
	if err := a.Trust(ctx, plugin.UID()); err != nil {
		t.Fatalf("trust add: %v", err)
	}
	if v := ownVouch(t, a, plugin.UID()); v.Kind != store.KindText || v.TS <= w.TS {
		t.Fatalf("after trust add: latest own vouch kind %v ts %d, want a vouch after %d", v.Kind, v.TS, w.TS)
	}
	noChange(t, a)
}

// TestTrustClock_DistrustAfterLargeStepBack: the clock goes back an hour,
// further than the store accepts a future claim, so the withdrawal cannot
// be signed yet. trust rm succeeds here and says (WARN) that the withdrawal
// waits for the clock, the plugin stays distrusted through the checks (one
// WARN line, not one per check), and the check signs the withdrawal once
// the clock is within that allowance of the vouch.
func TestTrustClock_DistrustAfterLargeStepBack(t *testing.T) {
	ctx := context.Background()
	var offset atomic.Int64
	offset.Store(int64(time.Hour))
	a, logs := steppedNode(t, &offset)
	plugin := signer(t)
	submitAccepted(t, a, plugin.Text(testCID(91), "title", "Heat", nowMS()+uint64(time.Hour.Milliseconds())))
	vouch := ownVouch(t, a, plugin.UID())

	offset.Store(0)
	if err := a.Distrust(ctx, plugin.UID()); err != nil {
		t.Fatalf("trust rm with the clock an hour behind the vouch: %v", err)
	}
	if got := warns(logs, "waits for the clock", plugin.UID()); got != 1 {
		t.Fatalf("%d WARN lines saying the withdrawal waits for the clock, want 1", got)
	}
	for range 3 {
		if n, err := node.ReconcileTrust(ctx, a); n != 0 || err != nil {
			t.Fatalf("check with the withdrawal not yet signable: changed %d (%v), want 0, nil", n, err)
		}
		if !a.Store().Distrusted(plugin.UID()) || a.Store().Trusted(plugin.UID()) {
			t.Fatalf("a check trusted again the plugin the owner removed; log:\n%s", logs)
		}
	}
	if got := warns(logs, "trusted a signer again", plugin.UID()); got != 0 {
		t.Fatalf("%d WARN lines re-trusting the plugin", got)
	}
	if got := warns(logs, "dated ahead of its clock", plugin.UID()); got != 1 {
		t.Fatalf("%d WARN lines about the clock, want 1 for three checks", got)
	}

	// The clock has caught up to within the store's allowance of the vouch
	// (the check runs every 30 s, so it gets this 10-minute window).
	offset.Store(int64(time.Hour - 5*time.Minute))
	// The node's own goroutine checks on trust changes too, so the fix may
	// be its; what counts is the state after a check.
	if _, err := node.ReconcileTrust(ctx, a); err != nil {
		t.Fatalf("check after the clock caught up: %v", err)
	}
	if w := ownVouch(t, a, plugin.UID()); w.Kind != store.KindRetraction || w.TS <= vouch.TS {
		t.Fatalf("latest own vouch claim: kind %v ts %d, want a retraction after %d", w.Kind, w.TS, vouch.TS)
	}
	noChange(t, a)
	offset.Store(int64(2 * time.Hour)) // past the vouch: nothing left to fix
	noChange(t, a)
	if !a.Store().Distrusted(plugin.UID()) {
		t.Fatal("the plugin is not distrusted")
	}
}

// TestTrustClock_StepForwardPastTheWindow: as above, but the clock comes
// back past the vouch in one step (an NTP step, or the node was stopped
// while it was within the allowance), so no check ran in the window. The
// owner's trust rm, dated after the vouch, still wins: the check withdraws
// the vouch instead of trusting the plugin again.
func TestTrustClock_StepForwardPastTheWindow(t *testing.T) {
	ctx := context.Background()
	var offset atomic.Int64
	offset.Store(int64(time.Hour))
	a, logs := steppedNode(t, &offset)
	plugin := signer(t)
	submitAccepted(t, a, plugin.Text(testCID(94), "title", "Heat", nowMS()+uint64(time.Hour.Milliseconds())))
	offset.Store(0)
	if err := a.Distrust(ctx, plugin.UID()); err != nil {
		t.Fatalf("trust rm: %v", err)
	}
	if _, err := node.ReconcileTrust(ctx, a); err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(2 * time.Hour))
	if _, err := node.ReconcileTrust(ctx, a); err != nil {
		t.Fatalf("check after the step forward: %v", err)
	}
	if w := ownVouch(t, a, plugin.UID()); a.Store().Trusted(plugin.UID()) || w.Kind != store.KindRetraction {
		t.Fatalf("the owner's trust rm was undone (trusted %v, own vouch %v); log:\n%s", a.Store().Trusted(plugin.UID()), w.Kind, logs)
	}
	noChange(t, a)
}

// TestTrustClock_TrustAddPastTheWindow: the mirror: a withdrawal dated an
// hour ahead, the clock stepped back, the owner trusts the plugin again
// (it succeeds: the vouch waits for the clock), and the clock steps past
// the withdrawal: the check vouches again instead of distrusting.
func TestTrustClock_TrustAddPastTheWindow(t *testing.T) {
	ctx := context.Background()
	var offset atomic.Int64
	offset.Store(int64(time.Hour))
	a, logs := steppedNode(t, &offset)
	plugin := signer(t)
	submitAccepted(t, a, plugin.Text(testCID(95), "title", "Heat", nowMS()+uint64(time.Hour.Milliseconds())))
	if err := a.Distrust(ctx, plugin.UID()); err != nil {
		t.Fatal(err)
	}
	offset.Store(0)
	if err := a.Trust(ctx, plugin.UID()); err != nil {
		t.Fatalf("trust add with the clock an hour behind the withdrawal: %v", err)
	}
	if _, err := node.ReconcileTrust(ctx, a); err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(2 * time.Hour))
	if _, err := node.ReconcileTrust(ctx, a); err != nil {
		t.Fatalf("check after the step forward: %v", err)
	}
	if v := ownVouch(t, a, plugin.UID()); !a.Store().Trusted(plugin.UID()) || v.Kind != store.KindText {
		t.Fatalf("the owner's trust add was undone (trusted %v, own vouch %v); log:\n%s", a.Store().Trusted(plugin.UID()), v.Kind, logs)
	}
	noChange(t, a)
}
