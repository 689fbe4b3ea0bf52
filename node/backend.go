package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

var _ api.Node = (*Node)(nil)

// SubmitClaims is a local write (POST /api/claims). With auto-trust on (in
// either trust mode), every signer with a validly signed claim in the batch
// that this node has not itself trusted and vouched for is put on the trust
// list and vouched for by the node (the vouch is stored first, so it
// travels with or before the signer's claims); a signer the owner
// distrusted is never trusted this way. Then the batch is stored, and what
// was stored is published and provided: the new vouches and the claims in
// one batch, vouches first, so they leave in one gossip message (a paired
// home validates messages concurrently and would refuse claims that came
// apart from, and were checked before, the vouch that admits them).
func (n *Node) SubmitClaims(ctx context.Context, claims []store.Claim) ([]store.Result, error) {
	return n.ImportClaims(ctx, claims, store.SubmitOptions{})
}

// ImportClaims is SubmitClaims with the store's options for claims brought
// from another store (metanode import): opt.RIDs names the rids of records
// new to this node, and opt.Verified says the caller signed or verified
// every claim itself (an import into a stopped node signing with its import
// key; the API never sets it). The origin is always local.
func (n *Node) ImportClaims(ctx context.Context, claims []store.Claim, opt store.SubmitOptions) ([]store.Result, error) {
	vouches, vres, err := n.trustLocalSigners(ctx, claims)
	if err != nil {
		return nil, err
	}
	opt.Origin = store.OriginLocal
	res, err := n.store.Submit(ctx, claims, opt)
	if err != nil {
		n.share(vouches, vres)
		return nil, err
	}
	// A write that overtook the one that made its signer's vouch (stored
	// first, published once its own batch is) must carry it too.
	if rv := n.recentVouches(claims, res, vouches); len(rv) > 0 {
		vouches = append(vouches[:len(vouches):len(vouches)], rv...)
		for range rv {
			vres = append(vres, store.Result{Stored: true})
		}
	}
	n.share(append(vouches[:len(vouches):len(vouches)], claims...), append(vres[:len(vres):len(vres)], res...))
	return res, nil
}

// newVouch is a vouch this node made for a new local writer, and when.
type newVouch struct {
	c  store.Claim
	at time.Time
}

// newVouchFor is how long every write of a new local writer publishes the
// vouch made for it again, ahead of its claims: far longer than a batch
// takes to store, so a write that overtakes the first never leaves first.
const newVouchFor = 10 * time.Second

// recentVouches returns the vouches made lately for signers of claims the
// store took (res), other than those this write made itself (made): a
// refused claim (its signer distrusted since) carries nothing.
func (n *Node) recentVouches(claims []store.Claim, res []store.Result, made []store.Claim) []store.Claim {
	n.newVouchMu.Lock()
	defer n.newVouchMu.Unlock()
	for uid, v := range n.newVouches { // a handful at most
		if time.Since(v.at) >= newVouchFor {
			delete(n.newVouches, uid)
		}
	}
	if len(n.newVouches) == 0 {
		return nil
	}
	var out []store.Claim
	seen := map[string]bool{}
	for _, v := range made {
		seen[strings.TrimPrefix(v.Key, store.VouchPrefix)] = true
	}
	for i := range claims {
		uid := claims[i].UID
		if i >= len(res) || !res[i].Stored {
			continue
		}
		if v, ok := n.newVouches[uid]; ok && !seen[uid] {
			seen[uid] = true
			out = append(out, v.c)
		}
	}
	return out
}

// trustLocalSigners lists the local signers of a batch this node has not
// decided on itself, and stores its vouches for them; it returns them and
// their results, for the caller to share with the batch.
//
// The test is this node's own decision (a trusted list row and its own live
// vouch), not whether the signer counts: a signer trusted only through
// another home's vouch would otherwise count here only as long as that home
// keeps vouching, and homes paired with this one alone would never accept
// it; a signer the owner trust-added before its first write would never be
// vouched for. Open mode records local writers too, so a switch to list
// keeps the home's own plugins.
func (n *Node) trustLocalSigners(ctx context.Context, claims []store.Claim) ([]store.Claim, []store.Result, error) {
	if n.cfg.NoAutoTrust || !api.LocalCaller(ctx) {
		return nil, nil, nil
	}
	if decided, err := n.localSignersDecided(ctx, claims); err != nil || decided {
		return nil, nil, err // the usual batch: no lock, no database read
	}
	n.trustMu.Lock()
	defer n.trustMu.Unlock()
	// A withdrawal of this node's vouch that came back after a restore must
	// take effect before a local write could trust the signer again.
	if _, err := n.reconcileTrustLocked(ctx); err != nil {
		n.log.Error("trust list check", "err", err)
	}
	own, err := n.ownVouches(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("trust local signers: %w", err)
	}
	rows, err := n.trustRows(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("trust local signers: %w", err)
	}
	seen := make(map[string]bool)
	var vouches []store.Claim
	for i := range claims {
		uid := claims[i].UID
		if seen[uid] || !n.autoTrusts(uid) {
			continue
		}
		listed, vouched := rows[uid].trusted, own[uid].live
		if listed && vouched {
			continue
		}
		// Only a claim the store would take (its shape, key, clock and
		// signature) earns its signer trust: a garbage claim must not put
		// an arbitrary uid on the list, nor one the store refuses anyway
		// (future_timestamp, reserved_key, bad_cid…) a signer with
		// nothing stored.
		if n.store.CheckClaim(&claims[i]) != nil {
			continue
		}
		seen[uid] = true
		if !listed { // a row the owner made (trust add) keeps its note
			if err := n.store.Trust(ctx, uid, "local writer"); err != nil {
				return nil, nil, fmt.Errorf("trust local signer %s: %w", uid, err)
			}
		}
		if !vouched {
			// After any earlier own vouch claim for uid, as signVouch does.
			ts := max(n.nowMS(), own[uid].ts+1)
			vouches = append(vouches, n.identity.Text(n.peerCID, store.VouchPrefix+uid, "true", ts))
		}
		n.log.Info("trusted and vouched for a local signer", "uid", uid, "wasListed", listed)
	}
	if len(vouches) == 0 {
		return nil, nil, nil
	}
	// Noted before they are stored: a write that sees the signer trusted
	// (right after the commit) must find its vouch here too.
	n.newVouchMu.Lock()
	for _, v := range vouches {
		n.newVouches[strings.TrimPrefix(v.Key, store.VouchPrefix)] = newVouch{v, time.Now()}
	}
	n.newVouchMu.Unlock()
	res, err := n.store.Submit(ctx, vouches, store.SubmitOptions{Origin: store.OriginLocal, Verified: true})
	n.newVouchMu.Lock()
	for i, v := range vouches {
		if err != nil || i >= len(res) || !res[i].Stored {
			delete(n.newVouches, strings.TrimPrefix(v.Key, store.VouchPrefix))
		}
	}
	n.newVouchMu.Unlock()
	if err != nil {
		return nil, nil, fmt.Errorf("store vouches: %w", err)
	}
	for i := range vouches {
		if err := notStored(vouches[i], res, i); err != nil {
			n.share(vouches, res) // those stored are held: they go out
			return nil, nil, fmt.Errorf("store vouches: %w", err)
		}
	}
	return vouches, res, nil
}

// autoTrusts reports whether auto-trust may act on uid at all: not the
// node's own uid (it vouches for no one's own key), not distrusted.
func (n *Node) autoTrusts(uid string) bool {
	return uid != n.identity.UID() && !n.store.Distrusted(uid)
}

// localSignersDecided reports whether every signer of the batch that
// auto-trust may act on is already listed and vouched for by this node.
// It reads the store's in-memory trust view only (no lock, no database).
func (n *Node) localSignersDecided(ctx context.Context, claims []store.Claim) (bool, error) {
	if !slices.ContainsFunc(claims, func(c store.Claim) bool { return n.autoTrusts(c.UID) }) {
		return true, nil
	}
	list, err := n.store.TrustList(ctx)
	if err != nil {
		return false, fmt.Errorf("trust local signers: %w", err)
	}
	own := n.identity.UID()
	decided := make(map[string]bool, len(list))
	for _, e := range list {
		decided[e.UID] = e.Source == "list" && slices.Contains(e.VouchedBy, own)
	}
	for _, c := range claims {
		if !decided[c.UID] && n.autoTrusts(c.UID) {
			return false, nil
		}
	}
	return true, nil
}

// share publishes the claims that were newly stored and provides their cids.
func (n *Node) share(claims []store.Claim, res []store.Result) {
	var out []store.Claim
	cids := make(map[string]bool)
	for i := range res {
		if i < len(claims) && res[i].Stored {
			out = append(out, claims[i])
			cids[claims[i].CID] = true
		}
	}
	if len(out) == 0 || n.swarm == nil { // StoreOnly: peers get them by catch-up
		return
	}
	n.swarm.Publish(out)
	list := make([]string, 0, len(cids))
	for c := range cids {
		list = append(list, c)
	}
	n.swarm.Provide(list...)
}

// resync asks the swarm to reconcile again after a trust change (a
// StoreOnly node has no swarm: it reconciles when it next serves).
func (n *Node) resync() {
	if n.swarm != nil {
		n.swarm.Resync()
	}
}

func (n *Node) nowMS() uint64 { return uint64(n.cfg.Now().UnixMilli()) }

// RemoteRecord answers from the store, or on a local miss looks the cid up
// in the swarm and answers from what was fetched.
func (n *Node) RemoteRecord(ctx context.Context, cid, as string) (store.Record, error) {
	rec, err := n.store.Record(ctx, cid, as)
	if !errors.Is(err, store.ErrNotFound) {
		return rec, err
	}
	if _, err := n.swarm.Lookup(ctx, cid); err != nil {
		if errors.Is(err, swarm.ErrOnlyUntrusted) {
			return store.Record{}, fmt.Errorf("%w: %s: %w (metanode trust ls; trust add the home or signer to accept them)",
				store.ErrNotFound, cid, swarm.ErrOnlyUntrusted)
		}
		if errors.Is(err, swarm.ErrNotFound) {
			return store.Record{}, fmt.Errorf("%w: no record for %s here or at any peer reached in time", store.ErrNotFound, cid)
		}
		return store.Record{}, fmt.Errorf("remote lookup: %w", err)
	}
	return n.store.Record(ctx, cid, as)
}

// SwarmStatus maps the swarm's state to the API's shape.
func (n *Node) SwarmStatus(ctx context.Context) (api.SwarmStatus, error) {
	st := n.swarm.Status()
	out := api.SwarmStatus{
		PeerID:    st.PeerID,
		UID:       n.identity.UID(),
		Addrs:     nonNil(st.Addrs),
		Swarm:     st.Name,
		Private:   st.Private,
		Peers:     st.Peers,
		Trust:     string(n.store.TrustMode()),
		Replicate: string(n.cfg.Replicate),
		DHT:       api.DHTStatus{Mode: st.DHTMode, RoutingTable: st.RoutingTable, Provided: st.Provided},
		Sync: api.SyncStatus{
			Sessions:       st.Sessions,
			ClaimsSent:     st.ClaimsSent,
			ClaimsReceived: st.ClaimsRecvd,
			Peers:          make(map[string]api.PeerSyncInfo, len(st.PeerSync)),
		},
		Errors: nonNil(st.Errors),
	}
	for p, s := range st.PeerSync {
		out.Sync.Peers[p] = api.PeerSyncInfo{
			LastSync: s.LastSync, LastError: s.LastError, RoundTrips: s.RoundTrips,
			ClaimsSent: s.ClaimsSent, ClaimsReceived: s.ClaimsRecvd,
		}
	}
	return out, nil
}

// SwarmPeers maps the connected peers to the API's shape.
func (n *Node) SwarmPeers(ctx context.Context) ([]api.PeerInfo, error) {
	peers := n.swarm.Peers()
	out := make([]api.PeerInfo, 0, len(peers))
	for _, p := range peers {
		var lastSync *time.Time
		if !p.LastSync.IsZero() {
			lastSync = &p.LastSync
		}
		uid := ""
		if id, err := peer.Decode(p.PeerID); err == nil {
			uid, _ = swarm.PeerUID(id)
		}
		out = append(out, api.PeerInfo{
			PeerID:         p.PeerID,
			UID:            uid,
			Addrs:          nonNil(p.Addrs),
			ConnectedSince: p.ConnectedSince,
			LatencyMs:      float64(p.Latency) / float64(time.Millisecond),
			LastSync:       lastSync,
			ClaimsSent:     p.ClaimsSent,
			ClaimsReceived: p.ClaimsRecvd,
		})
	}
	return out, nil
}

// TrustList is the store's trust list and policy.
func (n *Node) TrustList(ctx context.Context) (api.TrustList, error) {
	list, err := n.store.TrustList(ctx)
	if err != nil {
		return api.TrustList{}, err
	}
	blocked, err := n.store.DistrustList(ctx)
	if err != nil {
		return api.TrustList{}, err
	}
	return api.TrustList{Mode: string(n.store.TrustMode()), Trusted: nonNil(list), Distrusted: nonNil(blocked)}, nil
}

// Trust puts uid on the trust list and re-syncs with peers so the signer's
// earlier claims arrive. When this node had vouched for uid and withdrew
// the vouch (trust rm of a local writer), it vouches again: trust add undoes
// trust rm for the homes that trust this node too, not only here. Any other
// uid gets no vouch: trusting another home is this node's decision alone.
func (n *Node) Trust(ctx context.Context, uid string) error {
	n.trustMu.Lock()
	defer n.trustMu.Unlock()
	at, err := n.changeTime(ctx, uid)
	if err != nil {
		return err
	}
	if err := n.store.TrustAt(ctx, uid, "owner", at); err != nil {
		return err
	}
	if err := n.revouch(ctx, uid); err != nil && !n.waitsForClock(uid, err) {
		return err
	}
	n.resync()
	return nil
}

// changeTime dates an owner's trust change of uid: now (zero), or just after
// this node's latest own vouch claim for uid when the clock is behind that
// claim (stepped back since). The change is then the newer of the two
// whatever the clock does next, and the trust check publishes it rather
// than undo it.
func (n *Node) changeTime(ctx context.Context, uid string) (time.Time, error) {
	vouches, err := n.ownVouches(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if v, ok := vouches[uid]; ok && v.ts >= n.nowMS() {
		return time.UnixMilli(int64(v.ts) + 1).UTC(), nil
	}
	return time.Time{}, nil
}

// waitsForClock reports whether err is a vouch claim the store refused as
// dated in the future: the owner's change stands here, and the trust check
// signs the claim once the clock is within the store's allowance of it.
func (n *Node) waitsForClock(uid string, err error) bool {
	if !errors.Is(err, store.ErrFutureTimestamp) {
		return false
	}
	n.log.Warn("trust list: the change is made here; its vouch claim waits for the clock, which is behind this node's latest vouch claim (stepped back?): the trust check signs it when the clock allows",
		"uid", uid, "err", err)
	return true
}

// revouch signs a new vouch/<uid> when this node's latest vouch claim for
// uid is a withdrawal.
func (n *Node) revouch(ctx context.Context, uid string) error {
	vouches, err := n.ownVouches(ctx)
	if err != nil {
		return fmt.Errorf("vouch again: %w", err)
	}
	v, ok := vouches[uid]
	if !ok || v.live {
		return nil
	}
	if err := n.signVouch(ctx, uid, true, v.ts); err != nil {
		return fmt.Errorf("vouch again: %w", err)
	}
	n.log.Info("vouched again for a signer trusted again", "uid", uid)
	return nil
}

// Distrust blocks uid and, when this node's latest vouch claim for it is
// live, withdraws the vouch (a signed retraction of vouch/<uid>), so other
// homes stop trusting it through this node. That holds in open mode too:
// a vouch signed while the node ran in list mode (or for a local writer in
// open mode) outlives the mode, and paired homes still count it.
func (n *Node) Distrust(ctx context.Context, uid string) error {
	n.trustMu.Lock()
	defer n.trustMu.Unlock()
	vouches, err := n.ownVouches(ctx)
	if err != nil {
		return err
	}
	at, err := n.changeTime(ctx, uid)
	if err != nil {
		return err
	}
	n.newVouchMu.Lock()
	delete(n.newVouches, uid) // not sent again with the signer's writes
	n.newVouchMu.Unlock()
	if err := n.store.DistrustAt(ctx, uid, at); err != nil {
		return err
	}
	if v, ok := vouches[uid]; ok && v.live {
		// After this node's latest vouch claim, not merely now: a clock
		// stepped back since the vouch would make the withdrawal stale.
		if err := n.signVouch(ctx, uid, false, v.ts); err != nil && !n.waitsForClock(uid, err) {
			return fmt.Errorf("withdraw vouch: %w", err)
		}
	}
	n.resync()
	return nil
}

// Health reports each part's state; the node is degraded when its store
// cannot answer (or found a damaged page, or cannot write), when claims
// found damaged are set aside or the cache is being repaired (integrity),
// when its swarm cannot share at all (swarmCheck), or when the watcher's
// files root is missing.
func (n *Node) Health(ctx context.Context) api.Health {
	h := api.Health{Status: "ok", Checks: map[string]string{}}
	// A read that works is not enough: a full disk fails every write
	// while reads go on.
	_, err := n.store.Stats(ctx)
	if err == nil {
		err = n.store.WriteHealth()
	}
	if err == nil {
		// A read elsewhere found a damaged page (a failing disk): the
		// small read above may well still work.
		err = n.store.ReadHealth()
	}
	if err != nil {
		h.Status = "degraded"
		h.Checks["store"] = err.Error()
	} else {
		h.Checks["store"] = "ok"
	}
	// Claims found damaged and set aside, or a cache repair under way.
	h.Checks["integrity"] = "ok"
	if err := n.store.IntegrityHealth(); err != nil {
		h.Status = "degraded"
		h.Checks["integrity"] = err.Error()
	}
	select {
	case <-n.store.SyncReady():
		h.Checks["sync-set"] = "ok"
	default:
		h.Checks["sync-set"] = "loading"
		if err := n.store.SyncLoadErr(); err != nil {
			h.Status = "degraded"
			h.Checks["sync-set"] = "failed (the node does not sync until it restarts): " + err.Error()
		}
	}
	check, degraded := swarmCheck(n.swarm.Status())
	h.Checks["swarm"] = check
	if degraded {
		h.Status = "degraded"
	}
	check, degraded = n.watcherHealth()
	h.Checks["watcher"] = check
	if degraded {
		h.Status = "degraded"
	}
	return h
}

// swarmCheck is the swarm's health line. The swarm cannot share at all,
// and the node is degraded, when it has bootstrap peers to join through,
// is connected to no peer, and has reported a problem (Status.Errors).
// That list never holds a mere unreachable dial: only a handshake that
// failed three times over a working TCP connection (swarm key mismatch,
// swarm.ErrCannotNegotiate) or a peer blocked for invalid claims, and a
// connected peer clears the state. So a bootstrap peer that is down, or a
// lone home without bootstrap peers, stays ok; one failed dial never
// flips it.
func swarmCheck(st swarm.Status) (check string, degraded bool) {
	if len(st.Errors) == 0 {
		return "ok", false
	}
	latest := st.Errors[len(st.Errors)-1]
	if st.Bootstrap > 0 && st.Peers == 0 {
		return fmt.Sprintf("cannot share: connected to no peer (%d bootstrap peers configured); latest problem: %s", st.Bootstrap, latest), true
	}
	return latest, false
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
