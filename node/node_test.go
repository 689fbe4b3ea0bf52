package node_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

func TestNode_OpenServeClose(t *testing.T) {
	dir := dataDir(t, "home")
	cfg := testConfig(t, dir)
	cfg.HTTPAllowed = []string{"metanode"}
	n := node.New(cfg)
	ctx := context.Background()
	if err := n.Open(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.Ready():
	default:
		t.Fatal("Ready not closed after Open")
	}
	// The API answers the allowed name, not another (DNS rebinding).
	for host, want := range map[string]int{"metanode:9000": http.StatusOK, "rebind.example:9000": http.StatusForbidden} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.APIURL()+"/health", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("GET /health with Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
	cl := api.NewClient(n.APIURL())
	defer cl.Close()
	h, err := cl.Health(ctx)
	if err != nil || h.Status != "ok" {
		t.Fatalf("health = %+v, %v", h, err)
	}
	st, err := cl.SwarmStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.UID != n.UID() || st.PeerID != n.PeerID() || len(st.Addrs) == 0 || st.Trust != "list" || st.Replicate != "all" {
		t.Fatalf("status = %+v", st)
	}
	// The uid and the peer id come from one key.
	pid, err := node.PeerID(mustLoad(t, filepath.Join(dir, node.KeyFile)))
	if err != nil || pid.String() != n.PeerID() {
		t.Fatalf("peer id from node.key = %s (%v), node says %s", pid, err, n.PeerID())
	}
	uid := n.UID()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); !errors.Is(err, node.ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
	for name, mode := range map[string]os.FileMode{".": 0o700, node.KeyFile: 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != mode {
			t.Fatalf("%s: %v, %v; want mode %v", name, fi, err, mode)
		}
	}
	// Reopening keeps the identity.
	n2 := openNode(t, testConfig(t, dir))
	if n2.UID() != uid {
		t.Fatalf("uid after reopen = %s, want %s", n2.UID(), uid)
	}
}

func mustLoad(t *testing.T, path string) *store.Signer {
	t.Helper()
	s, err := store.LoadSigner(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestNode_PartialStartUnwinds: when the API cannot listen, Open fails and
// closes what it opened (goleak in TestMain checks the goroutines; the data
// directory opens again at once).
func TestNode_PartialStartUnwinds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := dataDir(t, "home")
	cfg := testConfig(t, dir)
	cfg.HTTPAddr = ln.Addr().String()
	n := node.New(cfg)
	err = n.Open(context.Background())
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("Open with the API port taken = %v, want EADDRINUSE", err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("Close after a failed Open = %v", err)
	}
	openNode(t, testConfig(t, dir))

	// A bad swarm key fails before the swarm starts, naming the file.
	cfg = testConfig(t, dataDir(t, "other"))
	cfg.SwarmKeyPath = filepath.Join(t.TempDir(), "swarm.key")
	if err := os.WriteFile(cfg.SwarmKeyPath, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n = node.New(cfg)
	if err := n.Open(context.Background()); err == nil {
		t.Fatal("Open with a garbage swarm key: no error")
	}
	n.Close()
}

// TestNode_AutoTrust: a local writer is trusted and vouched for; with
// auto-trust off it is rejected; a signer the owner distrusted is not
// trusted again by writing.
func TestNode_AutoTrust(t *testing.T) {
	ctx := context.Background()
	n := openNode(t, testConfig(t, dataDir(t, "home")))
	plugin := signer(t)
	res, err := n.SubmitClaims(ctx, []store.Claim{plugin.Text(testCID(1), "title", "Heat", nowMS())})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != store.Accepted {
		t.Fatalf("local write by a new signer: %v %v", res[0].Outcome, res[0].Err)
	}
	if !n.Store().Trusted(plugin.UID()) {
		t.Fatal("local writer not trusted after its write")
	}
	tl, err := n.TrustList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !listed(tl, plugin.UID()) {
		t.Fatalf("trust list %+v lacks the plugin", tl)
	}
	vouches := allClaims(t, n.Store(), mustPeerCID(t, n.UID()))
	if !hasVouch(vouches, n.UID(), plugin.UID(), store.KindText) {
		t.Fatalf("no vouch for the plugin among %d claims on the node's cid", len(vouches))
	}
	// A garbage signature does not get its uid trusted.
	forged := signer(t).Text(testCID(2), "title", "x", nowMS())
	forged.Sig[10] ^= 1
	res, err = n.SubmitClaims(ctx, []store.Claim{forged})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != store.Rejected || n.Store().Trusted(forged.UID) {
		t.Fatalf("forged claim: %v %v, trusted %v", res[0].Outcome, res[0].Err, n.Store().Trusted(forged.UID))
	}

	// Distrust: the vouch is withdrawn and the next write is refused.
	if err := n.Distrust(ctx, plugin.UID()); err != nil {
		t.Fatal(err)
	}
	res, err = n.SubmitClaims(ctx, []store.Claim{plugin.Text(testCID(1), "year", "1995", nowMS())})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != store.Rejected || !errors.Is(res[0].Err, store.ErrUntrusted) {
		t.Fatalf("write after distrust: %v %v", res[0].Outcome, res[0].Err)
	}
	vouches = allClaims(t, n.Store(), mustPeerCID(t, n.UID()))
	if !hasVouch(vouches, n.UID(), plugin.UID(), store.KindRetraction) {
		t.Fatal("vouch not withdrawn after distrust")
	}
	// Trusting again lifts the block.
	if err := n.Trust(ctx, plugin.UID()); err != nil {
		t.Fatal(err)
	}
	res, err = n.SubmitClaims(ctx, []store.Claim{plugin.Text(testCID(1), "year", "1995", nowMS())})
	if err != nil || res[0].Outcome != store.Accepted {
		t.Fatalf("write after trust again: %+v %v", res, err)
	}

	// Auto-trust off: a new local signer is refused.
	cfg := testConfig(t, dataDir(t, "strict"))
	cfg.NoAutoTrust = true
	strict := openNode(t, cfg)
	res, err = strict.SubmitClaims(ctx, []store.Claim{signer(t).Text(testCID(3), "title", "x", nowMS())})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != store.Rejected || !errors.Is(res[0].Err, store.ErrUntrusted) {
		t.Fatalf("auto-trust off: %v %v", res[0].Outcome, res[0].Err)
	}
}

func listed(tl api.TrustList, uid string) bool {
	for _, e := range tl.Trusted {
		if e.UID == uid {
			return true
		}
	}
	return false
}

func mustPeerCID(t *testing.T, uid string) string {
	t.Helper()
	c, err := store.PeerIDCID(uid)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// allClaims returns every shared claim about cid (tombstones included),
// read through the sync range API, which covers policy claims too.
func allClaims(t *testing.T, st *store.Store, cid string) []store.Claim {
	t.Helper()
	all, err := st.ClaimsInRange(context.Background(), store.MinSyncItem, store.MaxSyncItem, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Claim
	for _, c := range all {
		if c.CID == cid {
			out = append(out, c)
		}
	}
	return out
}

func hasVouch(claims []store.Claim, by, target string, kind store.Kind) bool {
	for _, c := range claims {
		if c.UID == by && c.Key == store.VouchPrefix+target && c.Kind == kind {
			return true
		}
	}
	return false
}

// TestNode_TwoHomesShareClaims: two homes on loopback, B joining through A,
// each trusting the other's node uid. A plugin's write on A reaches B (B
// trusts it through A's vouch) and a write on B reaches A.
func TestNode_TwoHomesShareClaims(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig(t, dataDir(t, "a")))
	b := joinHome(t, a, testConfig(t, dataDir(t, "b")))
	waitFor(t, 30*time.Second, "B connected to A", func() error {
		st, _ := b.SwarmStatus(ctx)
		if st.Peers < 1 {
			return errNo
		}
		return nil
	})

	pluginA, pluginB := signer(t), signer(t)
	cid := testCID(10)
	if _, err := a.SubmitClaims(ctx, []store.Claim{pluginA.Text(cid, "title", "Heat", nowMS())}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "A's plugin claim on B", func() error { return hasField(ctx, b.Store(), cid, "title", "Heat") })
	if _, err := b.SubmitClaims(ctx, []store.Claim{pluginB.Text(cid, "year", "1995", nowMS())}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "B's plugin claim on A", func() error { return hasField(ctx, a.Store(), cid, "year", "1995") })

	peers, err := a.SwarmPeers(ctx)
	if err != nil || len(peers) == 0 || peers[0].PeerID != b.PeerID() {
		t.Fatalf("A's peers = %+v, %v; want B", peers, err)
	}
	waitFor(t, 30*time.Second, "a finished sync with B in A's peers", func() error {
		peers, err := a.SwarmPeers(ctx)
		if err != nil || len(peers) == 0 || peers[0].LastSync == nil || peers[0].LastSync.IsZero() {
			return errNo
		}
		return nil
	})
}

// TestNode_InterestReplication: a home in interest mode keeps peer claims
// about the cids it knows, drops the rest, and gets an unknown cid's record
// on request through a remote lookup.
func TestNode_InterestReplication(t *testing.T) {
	ctx := context.Background()
	a := openNode(t, testConfig(t, dataDir(t, "a")))
	// A's plugin writes before B exists: A vouches for it. B, in interest
	// mode, never asks a peer for what it lacks, so it learns the vouch by
	// fetching A's peer-id cid (its interest list holds the peer-id cids of
	// the signers it trusts directly) once it trusts A.
	pluginA := signer(t)
	if _, err := a.SubmitClaims(ctx, []store.Claim{pluginA.Text(testCID(22), "title", "before B", nowMS())}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, dataDir(t, "b"))
	cfg.Replicate = node.ReplicateInterest
	b := joinHome(t, a, cfg)
	waitFor(t, 30*time.Second, "B trusts A's plugin", func() error {
		if !b.Store().Trusted(pluginA.UID()) {
			return errNo
		}
		return nil
	})
	known, unknown := testCID(20), testCID(21)
	if _, err := b.SubmitClaims(ctx, []store.Claim{signer(t).Text(known, "title", "mine", nowMS())}); err != nil {
		t.Fatal(err)
	}
	ts := nowMS()
	if _, err := a.SubmitClaims(ctx, []store.Claim{
		pluginA.Text(known, "year", "1995", ts),
		pluginA.Text(unknown, "title", "Heat", ts),
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "A's claim about B's cid on B", func() error { return hasField(ctx, b.Store(), known, "year", "1995") })
	if _, err := b.Store().Record(ctx, unknown, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("B kept a claim about a cid it does not know: %v", err)
	}
	st, err := b.SwarmStatus(ctx)
	if err != nil || st.Replicate != "interest" {
		t.Fatalf("B's status: %+v, %v", st, err)
	}
	waitFor(t, 30*time.Second, "B's remote lookup of the unknown cid", func() error {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		rec, err := b.RemoteRecord(lctx, unknown, "")
		if err != nil {
			return err
		}
		if rec.Fields["title"] != "Heat" {
			return errNo
		}
		return nil
	})
	if err := hasField(ctx, b.Store(), unknown, "title", "Heat"); err != nil {
		t.Fatalf("looked-up record not stored on B: %v", err)
	}
}

// TestNode_Files: with a files root the node runs the watcher; a file
// registered through the node gets a record with its midhash, once.
func TestNode_Files(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "plugin", "film.mkv")
	if err := os.WriteFile(path, []byte("not really a film"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, dataDir(t, "home"))
	cfg.FilesRoot = root
	n := openNode(t, cfg)
	waitFor(t, 30*time.Second, "watcher ready", func() error {
		if h := n.Health(ctx); h.Checks["watcher"] != "ok" {
			return fmt.Errorf("health %+v", h)
		}
		return nil
	})
	want, _, err := store.Midhash256File(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := n.RegisterFile(ctx, "plugin/film.mkv")
	if err != nil {
		t.Fatal(err)
	}
	if res.CID != want || res.Root == "" || res.Size != int64(len("not really a film")) {
		t.Fatalf("register = %+v, want cid %s", res, want)
	}
	again, err := n.RegisterFile(ctx, "plugin/film.mkv")
	if err != nil || again.Created || again.Root != res.Root {
		t.Fatalf("register again = %+v, %v", again, err)
	}
	if _, err := n.RegisterFile(ctx, "plugin/missing.mkv"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("register a missing file = %v, want ErrNotExist", err)
	}

	plain := openNode(t, testConfig(t, dataDir(t, "plain")))
	if _, err := plain.RegisterFile(ctx, "plugin/film.mkv"); !errors.Is(err, store.ErrBadPath) {
		t.Fatalf("register without a files root = %v, want ErrBadPath", err)
	}
	if h := plain.Health(ctx); h.Checks["watcher"] != "off" {
		t.Fatalf("health without a files root: %+v", h)
	}
}

// TestNode_DistrustSurvivesRestart: a local signer the owner distrusted is
// not trusted again by writing, after a restart too.
func TestNode_DistrustSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t, "home")
	plugin := signer(t)
	n := openNodeNoCleanup(t, testConfig(t, dir))
	if err := n.Distrust(ctx, plugin.UID()); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = openNode(t, testConfig(t, dir))
	res, err := n.SubmitClaims(ctx, []store.Claim{plugin.Text(testCID(30), "title", "x", nowMS())})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != store.Rejected || !errors.Is(res[0].Err, store.ErrUntrusted) || n.Store().Trusted(plugin.UID()) {
		t.Fatalf("write by a distrusted signer after restart: %v %v", res[0].Outcome, res[0].Err)
	}
	// The owner sees whom they blocked (GET /api/trust, trust ls).
	tl, err := n.TrustList(ctx)
	if err != nil || len(tl.Distrusted) != 1 || tl.Distrusted[0].UID != plugin.UID() {
		t.Fatalf("distrusted in the trust list: %+v %v", tl.Distrusted, err)
	}
}

// TestNode_CloseDuringOpen: a program stopping on a signal may Close a node
// whose Open is still starting it. Close stops that Open and releases
// everything it opened, whatever step it was at: nothing answers after
// Close returned, and a second Close says ErrClosed. Run with -race (Close
// and Open share the list of what to release).
func TestNode_CloseDuringOpen(t *testing.T) {
	for i := range 6 {
		n := node.New(testConfig(t, dataDir(t, fmt.Sprint("n", i))))
		opened := make(chan error, 1)
		go func() { opened <- n.Open(context.Background()) }()
		time.Sleep(time.Duration(i) * 20 * time.Millisecond) // Close at different steps of Open
		cerr := n.Close()
		oerr := <-opened
		t.Logf("round %d: Open: %v; Close: %v", i, oerr, cerr)
		if oerr != nil && !errors.Is(oerr, node.ErrClosed) {
			t.Errorf("round %d: Open stopped by Close: %v, want ErrClosed", i, oerr)
		}
		if again := n.Close(); !errors.Is(again, node.ErrClosed) {
			t.Errorf("round %d: second Close: %v", i, again)
		}
		if st := n.Store(); st != nil {
			if _, err := st.Stats(context.Background()); err == nil {
				t.Fatalf("round %d: the store still answers after Close", i)
			}
		}
	}
}
