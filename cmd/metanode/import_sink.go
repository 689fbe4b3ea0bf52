package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// importSink is where an import stores claims: the databases of a stopped
// node, or a running node's API.
type importSink interface {
	// submit stores claims as local writes; own says the import signed
	// them itself. rids names the rid of each record new to the node.
	submit(ctx context.Context, claims []store.Claim, rids map[string]string, own bool) ([]importResult, error)
	trust(ctx context.Context, uid string) error
	trustList(ctx context.Context) (api.TrustList, error)
	close() error
}

// nodeSink writes into a stopped node's data directory: the node opened
// with its store alone (node.Config.StoreOnly), holding the directory's
// lock. Claims it signed itself skip verification; the rest are verified
// by the store. The swarm gets them by catch-up when the node next serves.
type nodeSink struct{ n *node.Node }

func openNodeSink(ctx context.Context, cfg Config, layers configLayers, logs io.Writer) (*nodeSink, error) {
	ncfg := cfg.NodeConfig()
	ncfg.StoreOnly = true
	ncfg.Logger = importLogger(logs, cfg)
	n := node.New(ncfg)
	if err := n.Open(ctx); err != nil {
		if errors.Is(err, node.ErrDataDirInUse) {
			return nil, fmt.Errorf("%w: a node started on it meanwhile; run the import again (it goes through the node's API then)", err)
		}
		return nil, explainOpen(err, cfg, layers)
	}
	return &nodeSink{n: n}, nil
}

func (s *nodeSink) submit(ctx context.Context, claims []store.Claim, rids map[string]string, own bool) ([]importResult, error) {
	res, err := s.n.ImportClaims(ctx, claims, store.SubmitOptions{RIDs: rids, Verified: own})
	if err != nil {
		return nil, err
	}
	out := make([]importResult, len(res))
	for i, r := range res {
		out[i].status = r.Outcome.String()
		if r.Err != nil {
			out[i].slug, out[i].message = store.Slug(r.Err), r.Err.Error()
		}
	}
	return out, nil
}

func (s *nodeSink) trust(ctx context.Context, uid string) error { return s.n.Trust(ctx, uid) }

func (s *nodeSink) trustList(ctx context.Context) (api.TrustList, error) { return s.n.TrustList(ctx) }

func (s *nodeSink) close() error { return s.n.Close() }

// apiSink posts claims to a running node (POST /api/claims with rids),
// which verifies, stores and shares them with the swarm as they land.
type apiSink struct {
	cl   *api.Client
	base string
}

func (s *apiSink) submit(ctx context.Context, claims []store.Claim, rids map[string]string, _ bool) ([]importResult, error) {
	res, err := s.cl.PostClaimsRIDs(ctx, claims, rids)
	if err != nil {
		return nil, explainClient(err, s.base)
	}
	if len(res.Results) != len(claims) {
		return nil, fmt.Errorf("the node at %s answered %d results for %d claims", s.base, len(res.Results), len(claims))
	}
	out := make([]importResult, len(res.Results))
	for i, r := range res.Results {
		out[i] = importResult{status: r.Status, slug: r.Error, message: r.Message}
	}
	return out, nil
}

func (s *apiSink) trust(ctx context.Context, uid string) error {
	if err := s.cl.AddTrust(ctx, uid); err != nil {
		return explainClient(err, s.base)
	}
	return nil
}

func (s *apiSink) trustList(ctx context.Context) (api.TrustList, error) {
	tl, err := s.cl.Trust(ctx)
	if err != nil {
		return tl, explainClient(err, s.base)
	}
	return tl, nil
}

func (s *apiSink) close() error { return nil } // the command closes its clients

// importState is the data directory's record of imports (imports.json):
// the import key's uid and, per source, its session.
type importState struct {
	path      string
	ImportKey string                `json:"importKey"`
	Sources   map[string]*sourceRun `json:"sources"`
}

// sourceRun is one source's import session.
type sourceRun struct {
	Layout string `json:"layout"`
	// TS is the timestamp of every claim signed for this source: a run
	// again signs the same claims, which the node already holds.
	TS       uint64    `json:"ts"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
	// Cursor is where an interrupted run stopped: everything the source
	// yields before it is stored. Empty when the run finished.
	Cursor string `json:"cursor,omitempty"`
}

// loadImportState reads the state file (none yet: an empty state). A state
// kept for another import key starts over: its sessions signed with a key
// this node no longer uses.
func loadImportState(path, uid string) (*importState, error) {
	st := &importState{path: path, ImportKey: uid, Sources: map[string]*sourceRun{}}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return st, nil
	case err != nil:
		return nil, fmt.Errorf("import state: %w", err)
	}
	var old importState
	if err := json.Unmarshal(b, &old); err != nil {
		return nil, fmt.Errorf("import state %s: %w: move it away to start every import afresh (runs again add nothing)", path, err)
	}
	if old.ImportKey == uid && old.Sources != nil {
		st.Sources = old.Sources
	}
	return st, nil
}

// begin returns the session of a source and the cursor to start from: an
// interrupted run goes on from its cursor; a finished one runs again from
// the start with its timestamp (nothing new is signed); fresh, or a source
// never imported, starts a session stamped now.
func (st *importState) begin(source, layout string, fresh bool, now time.Time) (*sourceRun, string) {
	run := st.Sources[source]
	switch {
	case run == nil || run.Layout != layout || fresh:
		ts := uint64(now.UnixMilli())
		if run != nil && run.TS >= ts {
			ts = run.TS + 1 // newer than what it replaces
		}
		run = &sourceRun{Layout: layout, TS: ts, Started: now.UTC()}
		st.Sources[source] = run
		return run, ""
	case run.Finished.IsZero():
		return run, run.Cursor
	}
	run.Finished, run.Cursor = time.Time{}, ""
	return run, ""
}

// save writes the state atomically (a temporary file, fsynced, renamed).
func (st *importState) save() error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := st.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("import state: %w", err)
	}
	_, werr := f.Write(append(b, '\n'))
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, st.path)
	}
	if werr != nil {
		return fmt.Errorf("import state: %w", werr)
	}
	if d, err := os.Open(filepath.Dir(st.path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
