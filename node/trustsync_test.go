package node_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// The trust list and the node's own vouches agree after a restore (walk
// report W10): the newer side wins, and a fix is logged.

// logBuffer collects a node's log lines for the test to read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// capturing returns cfg logging to a buffer (printed if the test fails).
func capturing(t *testing.T, cfg node.Config) (node.Config, *logBuffer) {
	t.Helper()
	b := &logBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node log:\n%s", b)
		}
	})
	return cfg, b
}

// warns counts the WARN lines holding msg and uid=<uid>.
func warns(logs *logBuffer, msg, uid string) int {
	n := 0
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, msg) && strings.Contains(line, "uid="+uid) {
			n++
		}
	}
	return n
}

func closeNode(t *testing.T, n *node.Node) {
	t.Helper()
	if err := n.Close(); err != nil {
		t.Fatalf("close node: %v", err)
	}
}

// copyFiles copies dir/<name>* (a database and its -wal, -shm) into to.
func copyFiles(t *testing.T, dir, name, to string) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, name+"*"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no %s in %s: %v", name, dir, err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(p)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// backupTruth copies a stopped node's truth database, as operations.md's
// backup does: one file, which a clean stop leaves with no log beside it.
func backupTruth(t *testing.T, dir string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, node.TruthFile+"-wal")); err == nil {
		t.Fatal("a clean stop left truth.db-wal: truth.db alone is not the whole truth")
	}
	to := t.TempDir()
	b, err := os.ReadFile(filepath.Join(dir, node.TruthFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(to, node.TruthFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return to
}

// restoreTruth puts a backup back as operations.md's restore does: the
// truth database replaced, the cache removed (rebuilt at open).
func restoreTruth(t *testing.T, backup, dir string) {
	t.Helper()
	for _, name := range []string{node.TruthFile, node.CacheFile} {
		paths, _ := filepath.Glob(filepath.Join(dir, name+"*"))
		for _, p := range paths {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyFiles(t, backup, node.TruthFile, dir)
}

// catchUp stores claims in dir's truth database as a peer's catch-up would
// (origin peer, signatures verified by the store), with no node running,
// then runs check on the store.
func catchUp(t *testing.T, dir, ownUID string, check func(*store.Store), claims ...store.Claim) {
	t.Helper()
	ctx := context.Background()
	st := store.New(store.Config{
		TruthPath: filepath.Join(dir, node.TruthFile),
		CachePath: filepath.Join(dir, node.CacheFile),
		OwnUID:    ownUID,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err := st.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	res, err := st.Submit(ctx, claims, store.SubmitOptions{Origin: store.OriginPeer})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !r.Stored {
			t.Fatalf("catch-up claim %d: %v %v", i, r.Outcome, r.Err)
		}
	}
	check(st)
}

// ownVouch is the node's latest vouch claim for uid.
func ownVouch(t *testing.T, n *node.Node, uid string) store.Claim {
	t.Helper()
	var out store.Claim
	for _, c := range allClaims(t, n.Store(), mustPeerCID(t, n.UID())) {
		if c.UID == n.UID() && c.Key == store.VouchPrefix+uid && c.TS >= out.TS {
			out = c
		}
	}
	if out.UID == "" {
		t.Fatalf("the node has no vouch claim for %s", uid)
	}
	return out
}

// listEntry is uid's entry in the node's trust list (trusted or distrusted).
func listEntry(t *testing.T, n *node.Node, uid string) (store.TrustEntry, bool) {
	t.Helper()
	tl, err := n.TrustList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range append(tl.Trusted, tl.Distrusted...) {
		if e.UID == uid {
			return e, true
		}
	}
	return store.TrustEntry{}, false
}

// noChange fails the test unless one more check changes nothing: no uid
// reported changed, no vouch claim signed.
func noChange(t *testing.T, n *node.Node) {
	t.Helper()
	before := ownClaimIDs(t, n)
	changed, err := node.ReconcileTrust(context.Background(), n)
	if err != nil || changed != 0 {
		t.Fatalf("another check changed %d uids (%v), want none", changed, err)
	}
	if !slices.Equal(before, ownClaimIDs(t, n)) {
		t.Fatal("another check signed vouch claims")
	}
}

// ownClaimIDs are the ids of the claims on the node's peer-id cid, sorted.
func ownClaimIDs(t *testing.T, n *node.Node) []store.ID {
	t.Helper()
	var ids []store.ID
	for _, c := range allClaims(t, n.Store(), mustPeerCID(t, n.UID())) {
		ids = append(ids, c.ID())
	}
	slices.SortFunc(ids, func(a, b store.ID) int { return bytes.Compare(a[:], b[:]) })
	return ids
}

// waitMS returns once the clock has passed ts (ms): a later trust change
// then has a strictly later time.
func waitMS(ts uint64) {
	for i := 0; i < 1000 && time.Now().UnixMilli() <= int64(ts); i++ {
		time.Sleep(time.Millisecond)
	}
}

// TestTrustSync_RestoredBackupDistrustsAgain: W10. The owner distrusts a
// local plugin (the node withdraws its vouch), then restores a backup taken
// before that; the withdrawal comes back by catch-up. At open the node
// distrusts the plugin again, says so, and signs nothing: the plugin's
// claims stop counting and a local write does not trust it again. In open
// mode too: its vouch counts at paired list homes, and its distrust is the
// one thing that keeps the plugin out there.
func TestTrustSync_RestoredBackupDistrustsAgain(t *testing.T) {
	for _, mode := range []store.TrustMode{store.TrustList, store.TrustOpen} {
		t.Run(string(mode), func(t *testing.T) { restoredBackupDistrustsAgain(t, mode) })
	}
}

func restoredBackupDistrustsAgain(t *testing.T, mode store.TrustMode) {
	ctx := context.Background()
	dir := dataDir(t, "a")
	cfg := testConfig(t, dir)
	cfg.Trust = mode
	plugin, x := signer(t), testCID(90)

	a := openNodeNoCleanup(t, cfg)
	own := a.UID()
	submitAccepted(t, a, plugin.Text(x, "title", "Heat", nowMS()))
	closeNode(t, a)
	backup := backupTruth(t, dir)

	a = openNodeNoCleanup(t, cfg)
	if err := a.Distrust(ctx, plugin.UID()); err != nil {
		t.Fatal(err)
	}
	withdrawal := ownVouch(t, a, plugin.UID())
	if withdrawal.Kind != store.KindRetraction {
		t.Fatalf("distrust left the vouch %v %q", withdrawal.Kind, withdrawal.Text())
	}
	closeNode(t, a)

	restoreTruth(t, backup, dir)
	catchUp(t, dir, own, func(st *store.Store) {
		// The state W10 found: the restored list trusts the plugin.
		if !st.Trusted(plugin.UID()) || st.Distrusted(plugin.UID()) {
			t.Fatal("the restored trust list does not trust the plugin: nothing to reconcile")
		}
	}, withdrawal)

	cfg, logs := capturing(t, cfg)
	a = openNode(t, cfg)
	if a.Store().Trusted(plugin.UID()) || !a.Store().Distrusted(plugin.UID()) {
		t.Fatal("after open the node still trusts the plugin whose vouch it withdrew")
	}
	if err := lacksKey(ctx, a.Store(), x, "title"); err != nil {
		t.Fatalf("the plugin's claim still counts: %v", err)
	}
	if got := ownVouch(t, a, plugin.UID()); got.ID() != withdrawal.ID() {
		t.Fatalf("the node signed a new vouch claim (%v %q): the withdrawal was the newer decision", got.Kind, got.Text())
	}
	if warns(logs, "trust list: distrusted a signer again", plugin.UID()) != 1 {
		t.Fatal("no WARN line says the plugin was distrusted again")
	}
	res, err := a.SubmitClaims(ctx, []store.Claim{plugin.Text(testCID(91), "title", "Ronin", nowMS())})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, store.ErrUntrusted) {
		t.Fatalf("a local write by the plugin: %v %v, want untrusted", res[0].Outcome, res[0].Err)
	}
	noChange(t, a)
}

// TestTrustSync_WithdrawalArrivesWhileRunning: the same restore, but the
// withdrawal arrives by sync while the node runs. It changes no effective
// trust (the restored list trusts the plugin directly), so only the periodic
// check can see it.
func TestTrustSync_WithdrawalArrivesWhileRunning(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t, "a")
	cfg := testConfig(t, dir)
	plugin := signer(t)

	a := openNodeNoCleanup(t, cfg)
	submitAccepted(t, a, plugin.Text(testCID(92), "title", "Heat", nowMS()))
	closeNode(t, a)
	backup := backupTruth(t, dir)
	a = openNodeNoCleanup(t, cfg)
	if err := a.Distrust(ctx, plugin.UID()); err != nil {
		t.Fatal(err)
	}
	withdrawal := ownVouch(t, a, plugin.UID())
	closeNode(t, a)
	restoreTruth(t, backup, dir)

	cfg, logs := capturing(t, cfg)
	a = node.New(cfg)
	node.SetTrustCheckEvery(a, 100*time.Millisecond)
	if err := a.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeNode(t, a) })
	if !a.Store().Trusted(plugin.UID()) {
		t.Fatal("the restored node does not trust the plugin: nothing to reconcile")
	}
	res, err := a.Store().Submit(ctx, []store.Claim{withdrawal}, store.SubmitOptions{Origin: store.OriginPeer})
	if err != nil || !res[0].Stored {
		t.Fatalf("the withdrawal by sync: %+v %v", res, err)
	}
	// The WARN line follows the distrust: wait for both.
	waitFor(t, 20*time.Second, "the plugin distrusted again", func() error {
		if !a.Store().Distrusted(plugin.UID()) || warns(logs, "trust list: distrusted a signer again", plugin.UID()) == 0 {
			return errNo
		}
		return nil
	})
	noChange(t, a)
	if warns(logs, "trust list: distrusted a signer again", plugin.UID()) != 1 {
		t.Fatal("no single WARN line says the plugin was distrusted again")
	}
}

// TestTrustSync_LocalWriteAfterRestoreStaysRefused: the backup predates the
// plugin (no row, no vouch); the withdrawal arrives by sync and the plugin
// writes through the local API before any periodic check. Auto-trust would
// trust and vouch for it again, undoing the owner's trust rm at every home:
// the node checks first and refuses the write.
func TestTrustSync_LocalWriteAfterRestoreStaysRefused(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t, "a")
	cfg := testConfig(t, dir)
	plugin := signer(t)

	a := openNodeNoCleanup(t, cfg)
	closeNode(t, a)
	backup := backupTruth(t, dir)
	a = openNodeNoCleanup(t, cfg)
	submitAccepted(t, a, plugin.Text(testCID(98), "title", "Heat", nowMS()))
	if err := a.Distrust(ctx, plugin.UID()); err != nil {
		t.Fatal(err)
	}
	withdrawal := ownVouch(t, a, plugin.UID())
	closeNode(t, a)
	restoreTruth(t, backup, dir)

	cfg, logs := capturing(t, cfg)
	a = openNode(t, cfg) // checks every 30 s: not during this test
	if _, ok := listEntry(t, a, plugin.UID()); ok {
		t.Fatal("the restored trust list knows the plugin: not the state under test")
	}
	res, err := a.Store().Submit(ctx, []store.Claim{withdrawal}, store.SubmitOptions{Origin: store.OriginPeer})
	if err != nil || !res[0].Stored {
		t.Fatalf("the withdrawal by sync: %+v %v", res, err)
	}
	res, err = a.SubmitClaims(ctx, []store.Claim{plugin.Text(testCID(99), "title", "Ronin", nowMS())})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, store.ErrUntrusted) || !a.Store().Distrusted(plugin.UID()) {
		t.Fatalf("the plugin's local write after its vouch was withdrawn: %v %v, want untrusted", res[0].Outcome, res[0].Err)
	}
	if got := ownVouch(t, a, plugin.UID()); got.ID() != withdrawal.ID() {
		t.Fatal("the node vouched for the plugin again")
	}
	if warns(logs, "trust list: distrusted a signer again", plugin.UID()) != 1 {
		t.Fatal("no WARN line says the plugin was distrusted again")
	}
}

// TestTrustSync_RestoredBackupTrustsAgain: the symmetric case. The owner
// distrusts a plugin, a backup is taken, the owner trusts it again (the node
// vouches again); the backup is restored and the new vouch comes back by
// catch-up. At open the node trusts the plugin again (note "vouched").
func TestTrustSync_RestoredBackupTrustsAgain(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t, "a")
	cfg := testConfig(t, dir)
	plugin, x := signer(t), testCID(93)

	a := openNodeNoCleanup(t, cfg)
	own := a.UID()
	submitAccepted(t, a, plugin.Text(x, "title", "Heat", nowMS()))
	if err := a.Distrust(ctx, plugin.UID()); err != nil {
		t.Fatal(err)
	}
	closeNode(t, a)
	backup := backupTruth(t, dir)

	a = openNodeNoCleanup(t, cfg)
	if err := a.Trust(ctx, plugin.UID()); err != nil {
		t.Fatal(err)
	}
	vouch := ownVouch(t, a, plugin.UID())
	if vouch.Kind != store.KindText {
		t.Fatal("trust add did not vouch again")
	}
	closeNode(t, a)

	restoreTruth(t, backup, dir)
	catchUp(t, dir, own, func(st *store.Store) {
		if !st.Distrusted(plugin.UID()) {
			t.Fatal("the restored trust list does not distrust the plugin: nothing to reconcile")
		}
	}, vouch)

	cfg, logs := capturing(t, cfg)
	a = openNode(t, cfg)
	if !a.Store().Trusted(plugin.UID()) {
		t.Fatal("after open the node distrusts the plugin it vouched for last")
	}
	if e, ok := listEntry(t, a, plugin.UID()); !ok || e.Source != "list" || e.Note != "vouched" {
		t.Fatalf("trust list entry %+v, want listed with note vouched", e)
	}
	if err := hasField(ctx, a.Store(), x, "title", "Heat"); err != nil {
		t.Fatalf("the plugin's claim does not count: %v", err)
	}
	if got := ownVouch(t, a, plugin.UID()); got.ID() != vouch.ID() {
		t.Fatal("the node signed a new vouch claim: the vouch was the newer decision")
	}
	if warns(logs, "trust list: trusted a signer again", plugin.UID()) != 1 {
		t.Fatal("no WARN line says the plugin was trusted again")
	}
	noChange(t, a)
}

// TestTrustSync_NewerTrustRowIsPublished: a trust add (or rm) that changed
// the trust list but stopped before the node signed its vouch: the row is
// newer, so the node signs the vouch (or withdraws it) itself.
func TestTrustSync_NewerTrustRowIsPublished(t *testing.T) {
	ctx := context.Background()
	cfg, logs := capturing(t, testConfig(t, dataDir(t, "a")))
	a := openNode(t, cfg)
	plugin := signer(t)
	submitAccepted(t, a, plugin.Text(testCID(94), "title", "Heat", nowMS()))
	if err := a.Distrust(ctx, plugin.UID()); err != nil {
		t.Fatal(err)
	}
	withdrawal := ownVouch(t, a, plugin.UID())
	waitMS(withdrawal.TS)

	// Trust add, stopped after the store's part (node.Trust would vouch).
	if err := a.Store().Trust(ctx, plugin.UID(), "owner"); err != nil {
		t.Fatal(err)
	}
	var vouch store.Claim
	waitFor(t, 20*time.Second, "the node vouches again", func() error {
		vouch = ownVouch(t, a, plugin.UID())
		if vouch.Kind != store.KindText || vouch.Text() != "true" || vouch.TS <= withdrawal.TS {
			return errNo
		}
		if warns(logs, "vouched again for a signer", plugin.UID()) == 0 {
			return errNo // logged right after the claim is stored
		}
		return nil
	})
	if !a.Store().Trusted(plugin.UID()) || warns(logs, "vouched again for a signer", plugin.UID()) != 1 {
		t.Fatal("the plugin is not trusted, or no single WARN line says the node vouched again")
	}

	// Trust rm, stopped after the store's part.
	waitMS(vouch.TS)
	if err := a.Store().Distrust(ctx, plugin.UID()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the node withdraws its vouch again", func() error {
		if c := ownVouch(t, a, plugin.UID()); c.Kind != store.KindRetraction || c.TS <= vouch.TS {
			return errNo
		}
		if warns(logs, "withdrew the vouch for a signer again", plugin.UID()) == 0 {
			return errNo
		}
		return nil
	})
	if !a.Store().Distrusted(plugin.UID()) || warns(logs, "withdrew the vouch for a signer again", plugin.UID()) != 1 {
		t.Fatal("the plugin is not distrusted, or no single WARN line says the node withdrew its vouch")
	}
	noChange(t, a)
}

// TestTrustSync_NoChurn: when the list and the vouches agree, checks (at
// open, on trust changes, called again and again) write nothing and log
// nothing: no new vouch claims, no trust rows touched.
func TestTrustSync_NoChurn(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t, "a")
	cfg, logs := capturing(t, testConfig(t, dir))
	a := openNodeNoCleanup(t, cfg)
	kept, dropped, back, home := signer(t), signer(t), signer(t), signer(t)
	submitAccepted(t, a,
		kept.Text(testCID(95), "title", "a", nowMS()),
		dropped.Text(testCID(96), "title", "b", nowMS()),
		back.Text(testCID(97), "title", "c", nowMS()))
	if err := a.Distrust(ctx, dropped.UID()); err != nil {
		t.Fatal(err)
	}
	if err := a.Distrust(ctx, back.UID()); err != nil {
		t.Fatal(err)
	}
	if err := a.Trust(ctx, back.UID()); err != nil {
		t.Fatal(err)
	}
	if err := a.Trust(ctx, home.UID()); err != nil { // listed, never vouched for
		t.Fatal(err)
	}

	type snapshot struct {
		claims []store.ID
		list   api.TrustList
	}
	snap := func(n *node.Node) snapshot {
		s := snapshot{claims: ownClaimIDs(t, n)}
		tl, err := n.TrustList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.list = tl
		return s
	}
	same := func(what string, a, b snapshot) {
		t.Helper()
		if !slices.Equal(a.claims, b.claims) {
			t.Fatalf("%s: the node's vouch claims changed: %d then %d", what, len(a.claims), len(b.claims))
		}
		if !slices.EqualFunc(a.list.Trusted, b.list.Trusted, sameEntry) || !slices.EqualFunc(a.list.Distrusted, b.list.Distrusted, sameEntry) {
			t.Fatalf("%s: the trust list changed:\n%+v\n%+v", what, a.list, b.list)
		}
	}
	before := snap(a)
	if len(before.claims) != 3 {
		t.Fatalf("%d vouch claims, want 3 (one per plugin)", len(before.claims))
	}
	for range 3 {
		noChange(t, a)
	}
	same("repeated checks", before, snap(a))
	closeNode(t, a)

	a = openNode(t, cfg) // the check at open
	noChange(t, a)
	same("reopened", before, snap(a))
	if strings.Contains(logs.String(), "level=WARN msg=\"trust list") {
		t.Fatal("a trust list WARN line although the list and the vouches agree")
	}
}

// sameEntry compares trust entries; times to the ms the table keeps.
func sameEntry(a, b store.TrustEntry) bool {
	return a.UID == b.UID && a.Source == b.Source && a.Note == b.Note &&
		a.Added.UnixMilli() == b.Added.UnixMilli() && slices.Equal(a.VouchedBy, b.VouchedBy)
}

// TestTrustSync_TwoHomesAgreeAfterRestore: W10 end to end. Home A distrusts
// its plugin (B stops trusting it too), then A restores a backup taken
// before; A's withdrawal comes back from B by catch-up, and A distrusts the
// plugin again: a new write by the plugin on A is refused, as B refuses it.
func TestTrustSync_TwoHomesAgreeAfterRestore(t *testing.T) {
	ctx := context.Background()
	dirA := dataDir(t, "a")
	cfgA := testConfig(t, dirA)
	a := openNodeNoCleanup(t, cfgA)
	b := joinHome(t, a, testConfig(t, dataDir(t, "b")))
	plugin, x := signer(t), testCID(100)
	submitAccepted(t, a, plugin.Text(x, "title", "Heat", nowMS()))
	waitFor(t, 30*time.Second, "A's plugin's claim on B", func() error {
		return hasField(ctx, b.Store(), x, "title", "Heat")
	})
	closeNode(t, a)
	backup := backupTruth(t, dirA)

	cfgA.Bootstrap = b.Addrs()[:1]
	a = openNodeNoCleanup(t, cfgA)
	if err := a.Distrust(ctx, plugin.UID()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "B stops trusting the plugin", func() error {
		if b.Store().Trusted(plugin.UID()) {
			return errNo
		}
		return nil
	})
	closeNode(t, a)

	restoreTruth(t, backup, dirA)
	cfgA, logs := capturing(t, cfgA)
	a = node.New(cfgA)
	node.SetTrustCheckEvery(a, 200*time.Millisecond)
	if err := a.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeNode(t, a) })
	waitFor(t, 30*time.Second, "A distrusts the plugin again once its withdrawal is back", func() error {
		if !a.Store().Distrusted(plugin.UID()) || warns(logs, "trust list: distrusted a signer again", plugin.UID()) == 0 {
			return errNo
		}
		return nil
	})
	res, err := a.SubmitClaims(ctx, []store.Claim{plugin.Text(testCID(101), "title", "Rashomon", nowMS())})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, store.ErrUntrusted) {
		t.Fatalf("the plugin's write on A: %v %v, want untrusted", res[0].Outcome, res[0].Err)
	}
	if err := lacksKey(ctx, a.Store(), x, "title"); err != nil {
		t.Fatalf("A still counts the plugin: %v", err)
	}
	if b.Store().Trusted(plugin.UID()) {
		t.Fatal("B trusts the plugin again")
	}
}
