package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/store/storetest"
)

// testNode is the wiring of api.Node over a real store, as the node does it
// minus the swarm: local writes go to Submit with OriginLocal, files are
// hashed and applied like POST /api/files/register, and the swarm parts
// answer fixed values.
type testNode struct {
	st   *store.Store
	root string // files root

	mu      sync.Mutex
	remotes int // RemoteRecord calls

	// gate, when set, holds SubmitClaims after it signals entered, until
	// gate is closed: a request kept in flight for shutdown tests.
	entered chan struct{}
	gate    chan struct{}
}

var _ api.Node = (*testNode)(nil)

func (n *testNode) SubmitClaims(ctx context.Context, claims []store.Claim) ([]store.Result, error) {
	return n.ImportClaims(ctx, claims, store.SubmitOptions{})
}

func (n *testNode) ImportClaims(ctx context.Context, claims []store.Claim, opt store.SubmitOptions) ([]store.Result, error) {
	if n.gate != nil {
		n.entered <- struct{}{}
		select {
		case <-n.gate:
		case <-ctx.Done(): // as the store does
			return nil, ctx.Err()
		}
	}
	opt.Origin = store.OriginLocal
	return n.st.Submit(ctx, claims, opt)
}

func (n *testNode) RemoteRecord(ctx context.Context, cid, as string) (store.Record, error) {
	n.mu.Lock()
	n.remotes++
	n.mu.Unlock()
	rec, err := n.st.Record(ctx, cid, as)
	if !errors.Is(err, store.ErrNotFound) {
		return rec, err
	}
	// As node.RemoteRecord: the swarm's lookup refuses a cid that is not
	// canonical before asking anyone.
	if err := store.CheckCID(cid); err != nil {
		return store.Record{}, fmt.Errorf("remote lookup: lookup: %w", err)
	}
	return store.Record{}, fmt.Errorf("%w: no peer knows %s", store.ErrNotFound, cid)
}

func (n *testNode) RegisterFile(ctx context.Context, rel string) (api.RegisterResult, error) {
	abs := filepath.Join(n.root, filepath.FromSlash(rel))
	fi, err := os.Stat(abs)
	if err != nil {
		return api.RegisterResult{}, err
	}
	if !fi.Mode().IsRegular() {
		return api.RegisterResult{}, fmt.Errorf("%w: %s is not a regular file", store.ErrBadPath, rel)
	}
	cid, size, err := store.Midhash256File(abs)
	if err != nil {
		return api.RegisterResult{}, err
	}
	res, err := n.st.ApplyFiles(ctx, []store.FileUpdate{{
		Op:        store.FileAdd,
		File:      store.LocalFile{Path: abs, CID: cid, Size: size, MtimeNano: fi.ModTime().UnixNano()},
		EventPath: rel,
	}})
	if err != nil {
		return api.RegisterResult{}, err
	}
	return api.RegisterResult{Root: res[0].RID, CID: cid, Created: res[0].Created, Path: abs, Size: size}, nil
}

func (n *testNode) SwarmStatus(ctx context.Context) (api.SwarmStatus, error) {
	return api.SwarmStatus{PeerID: "12D3KooWtest", UID: "zOwn", Swarm: "metamesh", Trust: string(n.st.TrustMode()),
		Replicate: "all", DHT: api.DHTStatus{Mode: "client"}}, nil
}

func (n *testNode) SwarmPeers(ctx context.Context) ([]api.PeerInfo, error) {
	return []api.PeerInfo{{PeerID: "12D3KooWpeer", Addrs: []string{}}}, nil // connected, never synced
}

func (n *testNode) TrustList(ctx context.Context) (api.TrustList, error) {
	l, err := n.st.TrustList(ctx)
	return api.TrustList{Mode: string(n.st.TrustMode()), Trusted: l}, err
}

func (n *testNode) Trust(ctx context.Context, uid string) error    { return n.st.Trust(ctx, uid, "") }
func (n *testNode) Distrust(ctx context.Context, uid string) error { return n.st.Distrust(ctx, uid) }
func (n *testNode) Health(ctx context.Context) api.Health          { return api.Health{Status: "ok"} }
func (n *testNode) Info(ctx context.Context) api.NodeInfo {
	return api.NodeInfo{Name: "testhost", UID: "zOwn", PeerID: "12D3KooWtest", Swarm: "metamesh", Trust: string(n.st.TrustMode())}
}
func (n *testNode) Join(ctx context.Context, code string) (api.JoinStatus, error) {
	return api.JoinStatus{}, &api.Error{Status: 409, Slug: "conflict", Message: "the test node joins nothing"}
}
func (n *testNode) JoinStatus() api.JoinStatus { return api.JoinStatus{State: api.JoinIdle} }
func (n *testNode) Neighbors(all bool) api.NeighborsResponse {
	return api.NeighborsResponse{Current: "meta-core"}
}

func (n *testNode) Invite(ctx context.Context, ttl time.Duration) (api.InviteResponse, error) {
	if ttl == 0 {
		ttl = 24 * time.Hour
	}
	if ttl > 48*time.Hour {
		return api.InviteResponse{}, errors.New("invite: lifetime too long")
	}
	return api.InviteResponse{Code: "mn1:test", Expires: time.Unix(0, 0).Add(ttl).UTC(), UID: "zOwn", Swarm: "metamesh"}, nil
}

// env is one real server on loopback over one real store.
type env struct {
	t      testing.TB
	st     *store.Store
	node   *testNode
	srv    *api.Server
	c      *api.Client
	url    string
	root   string
	reg    *prometheus.Registry
	signer *store.Signer
	now    time.Time
}

type envOption func(*store.Config, *api.Config)

func withStore(f func(*store.Config)) envOption {
	return func(sc *store.Config, _ *api.Config) { f(sc) }
}

func withAPI(f func(*api.Config)) envOption {
	return func(_ *store.Config, ac *api.Config) { f(ac) }
}

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, reg: prometheus.NewRegistry(), root: t.TempDir(), now: time.Now()}
	var err error
	if e.signer, err = store.GenerateSigner(); err != nil {
		t.Fatal(err)
	}
	sc := store.Config{Trust: store.TrustOpen, Registerer: e.reg, Logger: testLogger(t)}
	ac := api.Config{Addr: "127.0.0.1:0", FilesRoot: e.root, Logger: testLogger(t), Registerer: e.reg, Gatherer: e.reg}
	for _, o := range opts {
		o(&sc, &ac)
	}
	e.st = storetest.Open(t, sc)
	e.node = &testNode{st: e.st, root: e.root}
	ac.Store, ac.Node = e.st, e.node
	e.srv = api.NewServer(ac)
	if err := e.srv.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.url = e.srv.URL()
	e.c = api.NewClient(e.url)
	t.Cleanup(func() {
		e.c.Close()
		if err := e.srv.Close(); err != nil && !errors.Is(err, api.ErrClosed) {
			t.Errorf("close server: %v", err)
		}
	})
	return e
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// ts returns a claim timestamp: now plus d milliseconds.
func (e *env) ts(d int) uint64 { return uint64(e.now.UnixMilli()) + uint64(d) }

// text signs a text claim with the env's signer.
func (e *env) text(cid, key, value string, ts uint64) store.Claim {
	return e.signer.Text(cid, key, value, ts)
}

// post submits claims through the client and fails on a transport error.
func (e *env) post(claims ...store.Claim) api.ClaimsResponse {
	e.t.Helper()
	res, err := e.c.PostClaims(context.Background(), claims)
	if err != nil {
		e.t.Fatalf("post claims: %v", err)
	}
	return res
}

// answer is one raw HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends a raw request and reads the whole answer.
func (e *env) do(method, path string, body io.Reader, hdr ...string) answer {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

func (e *env) get(path string) answer { return e.do(http.MethodGet, path, nil) }

func (e *env) sendJSON(method, path string, v any) answer {
	e.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.do(method, path, bytes.NewReader(b), "Content-Type", "application/json")
}

// decode decodes a 2xx JSON answer into v.
func (a answer) decode(t testing.TB, v any) {
	t.Helper()
	if a.status/100 != 2 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
}

// wantError checks an error answer: status, slug and the exact envelope keys.
func (a answer) wantError(t testing.TB, status int, slug string) {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d: %s", a.status, status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type %q", ct)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(a.body, &env); err != nil {
		t.Fatalf("error body %s: %v", a.body, err)
	}
	if len(env) != 3 || env["error"] == nil || env["message"] == nil || env["retryable"] == nil {
		t.Errorf("envelope %s: want exactly error, message, retryable", a.body)
	}
	var got string
	_ = json.Unmarshal(env["error"], &got)
	if got != slug {
		t.Errorf("slug %q, want %q (%s)", got, slug, a.body)
	}
	var retry bool
	_ = json.Unmarshal(env["retryable"], &retry)
	if retry != (status >= 500) {
		t.Errorf("retryable %v for status %d", retry, status)
	}
}

// Content ids used across tests (canonical CIDv1 strings).
const (
	cidA = "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"    // sha2-256, rank 30
	cidB = "bagacbabaeaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" // midhash256, rank 10
	cidC = "bafybeiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"    // dag-pb, rank 40
)

// cidN returns a distinct canonical CIDv1 (raw, sha2-256) for i.
func cidN(i int) string {
	d, err := mh.Sum([]byte(fmt.Sprintf("cid-%d", i)), mh.SHA2_256, -1)
	if err != nil {
		panic(err)
	}
	return cid.NewCidV1(cid.Raw, d).String()
}
