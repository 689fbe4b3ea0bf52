package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/metanode/metanode/api"
)

// Joining another home from a running node (POST /api/swarm/join, the
// owner's page): the code must be for this node's own swarm (a running
// node cannot move to another; `metanode join` on a stopped node can).
// The pairing runs in the background; JoinStatus reports its progress.

// Pairing attempts while the inviter is out of reach.
const (
	PairAttempts = 5
	PairRetry    = 3 * time.Second
	// joinQuiet ends a join's sync watch when no claim arrived for this
	// long: the rest arrive as peers sync.
	joinQuiet = 30 * time.Second
)

// PairWithRetry presents the invite up to PairAttempts times, PairRetry
// apart, while the inviter is out of reach (a refusal or ctx ends it at
// once); report, when set, is told of each failed attempt.
func (n *Node) PairWithRetry(ctx context.Context, inv Invite, report func(attempt int, err error)) (int64, error) {
	var total int64
	var err error
	for attempt := 1; attempt <= PairAttempts; attempt++ {
		if total, err = n.Pair(ctx, inv); err == nil || errors.Is(err, ErrPairRefused) || ctx.Err() != nil {
			return total, err
		}
		if report != nil {
			report(attempt, err)
		}
		if attempt == PairAttempts {
			break
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(PairRetry):
		}
	}
	return total, err
}

// joinState is the latest join of this running node.
type joinState struct {
	st      api.JoinStatus
	running bool
}

// JoinStatus is the latest join's progress (idle before any).
func (n *Node) JoinStatus() api.JoinStatus {
	n.joinMu.Lock()
	defer n.joinMu.Unlock()
	st := n.join.st
	if st.State == "" {
		st.State = api.JoinIdle
	}
	if st.State == api.JoinPaired {
		st.Have = int64(n.ClaimCount())
	}
	return st
}

func (n *Node) setJoin(f func(st *api.JoinStatus)) {
	n.joinMu.Lock()
	defer n.joinMu.Unlock()
	f(&n.join.st)
}

// Join checks code and starts pairing with its inviter in the background:
// a bad code is a 400, a code for another swarm or a join under way a 409.
func (n *Node) Join(ctx context.Context, code string) (api.JoinStatus, error) {
	inv, err := ParseInvite(code)
	if err == nil {
		err = inv.CheckPeer()
	}
	if err != nil {
		return api.JoinStatus{}, &api.Error{Status: http.StatusBadRequest, Slug: api.SlugSchemaViolation, Message: err.Error()}
	}
	if inv.UID == n.UID() {
		return api.JoinStatus{}, &api.Error{Status: http.StatusBadRequest, Slug: api.SlugSchemaViolation,
			Message: "this is this node's own pairing code: give it to the other home, and join with the code it makes"}
	}
	if msg := n.otherSwarm(inv); msg != "" {
		return api.JoinStatus{}, &api.Error{Status: http.StatusConflict, Slug: SlugConflict, Message: msg}
	}
	n.joinMu.Lock()
	defer n.joinMu.Unlock()
	if n.join.running {
		return api.JoinStatus{}, &api.Error{Status: http.StatusConflict, Slug: SlugConflict,
			Message: "a join is under way: wait for it to end (GET /api/swarm/join)"}
	}
	n.mu.Lock() // Close sets closed under mu before it waits for wg
	defer n.mu.Unlock()
	if n.closed {
		return api.JoinStatus{}, ErrClosed
	}
	n.join = joinState{running: true, st: api.JoinStatus{State: api.JoinConnecting, Inviter: inv.UID,
		Started: n.cfg.Now().UTC(), Message: fmt.Sprintf("connecting to %s (%d addresses)", inv.UID, len(inv.Addrs))}}
	n.wg.Go(func() { n.runJoin(n.ctx, inv) })
	return n.join.st, nil
}

// SlugConflict: a request that cannot be done in the node's present state.
const SlugConflict = "conflict"

// otherSwarm says why a running node cannot take inv ("" when it can):
// another swarm name, or another swarm key.
func (n *Node) otherSwarm(inv Invite) string {
	stop := "; stop this node and run 'metanode join CODE' (with the same --data) to move it to that swarm"
	if inv.Swarm != n.swarmName() {
		return fmt.Sprintf("the code is for swarm %q and this node runs in %q%s", inv.Swarm, n.swarmName(), stop)
	}
	var mine []byte
	if n.cfg.SwarmKeyPath != "" {
		b, err := os.ReadFile(n.cfg.SwarmKeyPath)
		if err != nil {
			return "cannot read this node's swarm key: " + err.Error()
		}
		mine = bytes.TrimSpace(b)
	}
	if !bytes.Equal(mine, bytes.TrimSpace([]byte(inv.SwarmKey))) {
		return "the code's swarm has another swarm key than this node's" + stop
	}
	return ""
}

// runJoin pairs, records the inviter's addresses (Config.OnJoined), then
// watches the claims arrive until this node holds as many as the inviter
// said it would accept, or none came for joinQuiet.
func (n *Node) runJoin(ctx context.Context, inv Invite) {
	defer func() {
		n.joinMu.Lock()
		n.join.running = false
		n.joinMu.Unlock()
	}()
	total, err := n.PairWithRetry(ctx, inv, func(attempt int, err error) {
		n.setJoin(func(st *api.JoinStatus) {
			st.Attempt = attempt
			st.Message = fmt.Sprintf("attempt %d of %d: %v", attempt, PairAttempts, err)
		})
	})
	if err != nil {
		msg := fmt.Sprintf("inviter %s out of reach: %v; check that its node runs and that one of its addresses is reachable from here", inv.UID, err)
		switch {
		case ctx.Err() != nil:
			msg = "stopped: the node is shutting down"
		case errors.Is(err, ErrPairRefused):
			msg = fmt.Sprintf("inviter %s: %v", inv.UID, err)
		}
		n.log.Warn("join from the page failed", "inviter", inv.UID, "err", err)
		n.setJoin(func(st *api.JoinStatus) { st.State, st.Message = api.JoinFailed, msg })
		return
	}
	saved := "its addresses are written to the config's bootstrap"
	if n.cfg.OnJoined == nil {
		saved = "its addresses are not saved (no config file): this node finds it again by mDNS or the DHT"
	} else if err := n.cfg.OnJoined(inv); err != nil {
		n.log.Warn("join: write the inviter's addresses", "err", err)
		saved = "its addresses could not be written to the config (" + err.Error() + "): add them to bootstrap by hand"
	}
	n.log.Info("joined from the page", "inviter", inv.UID, "claims", total)
	n.setJoin(func(st *api.JoinStatus) {
		st.State, st.Total = api.JoinPaired, total
		st.Message = fmt.Sprintf("paired with %s; %s; syncing", inv.UID, saved)
	})
	have, _ := n.WaitClaims(ctx, total, nil)
	if ctx.Err() != nil {
		return
	}
	n.setJoin(func(st *api.JoinStatus) {
		st.State, st.Have = api.JoinDone, int64(have)
		st.Message = fmt.Sprintf("paired with %s; %s; %d of its %d claims here (the rest, if any, arrive as peers sync)", inv.UID, saved, min(int64(have), total), total)
	})
}

// WaitClaims watches this node's shared claims grow after a pairing until
// it holds total of them (all true), no claim came for joinQuiet, or ctx
// ends; progress, when set, is told each new count.
func (n *Node) WaitClaims(ctx context.Context, total int64, progress func(have int)) (have int, all bool) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastChange := -1, time.Now()
	for {
		have = n.ClaimCount()
		if have != last {
			last, lastChange = have, time.Now()
			if progress != nil {
				progress(have)
			}
		}
		if int64(have) >= total {
			return have, true
		}
		if time.Since(lastChange) > joinQuiet {
			return have, false
		}
		select {
		case <-ctx.Done():
			return have, false
		case <-tick.C:
		}
	}
}

// Info is the node's own facts for the owner's page.
func (n *Node) Info(ctx context.Context) api.NodeInfo {
	name, _ := os.Hostname()
	out := api.NodeInfo{Name: name, UID: n.UID(), Version: n.version(), FilesRoot: n.cfg.FilesRoot,
		Swarm: n.swarmName(), Private: n.cfg.SwarmKeyPath != "", Trust: string(n.store.TrustMode())}
	if n.swarm != nil {
		out.PeerID = n.PeerID()
	}
	return out
}

// version is the binary's version as the Go toolchain stamped it.
func (n *Node) version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 && (v == "" || v == "(devel)") {
			v = "devel " + s.Value[:12]
		}
	}
	return v
}
