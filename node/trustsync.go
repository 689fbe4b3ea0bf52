package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/metanode/metanode/store"
)

// The trust list and this node's own vouches must agree.
//
// The node's vouch claims (vouch/<uid> on its peer-id cid: "true", or a
// retraction) are its published trust decisions, timestamped; the store's
// trust table is the local state, with the time of each row's last change
// (TrustEntry.Added). They drift apart when a restored truth backup brings
// back an older table while the node's newer vouch claims come back from
// the swarm by catch-up, or when a trust add or rm stops between the table
// and the claim. The node would then count a signer its paired homes
// refuse (or the reverse), and never vouch again for a plugin the table
// already trusts. The newer side wins: a newer claim is applied to the
// table, a newer row is published as a new claim.

// trustCheckEvery is how often the node compares them besides at Open and
// on trust changes: own vouch claims can arrive by sync at any time, and
// one arriving does not always change the effective trusted set.
const trustCheckEvery = 30 * time.Second

// ownVouch is this node's latest vouch claim for one uid.
type ownVouch struct {
	live bool   // "true"; a retraction (or any other value) withdraws it
	ts   uint64 // ms
}

// trustRow is the trust table's row for one uid.
type trustRow struct {
	trusted bool
	changed time.Time // the row's last change of state
}

// reconcileTrust makes the trust list and this node's own vouches agree,
// in either trust mode: a node in open mode vouches for its local writers
// too, and its vouch claims count on paired list homes. It returns how many
// uids it changed.
func (n *Node) reconcileTrust(ctx context.Context) (int, error) {
	n.trustMu.Lock()
	defer n.trustMu.Unlock()
	return n.reconcileTrustLocked(ctx)
}

// reconcileTrustLocked is reconcileTrust with n.trustMu held: the node's
// own trust commands then cannot change the table between the reads and
// the fix.
func (n *Node) reconcileTrustLocked(ctx context.Context) (int, error) {
	vouches, err := n.ownVouches(ctx)
	if err != nil || len(vouches) == 0 {
		return 0, err
	}
	rows, err := n.trustRows(ctx)
	if err != nil {
		return 0, err
	}
	changed, now := 0, n.nowMS()
	var errs []error
	for _, uid := range slices.Sorted(maps.Keys(vouches)) {
		v := vouches[uid]
		r, listed := rows[uid]
		if listed && r.trusted == v.live {
			continue
		}
		// On a tie the table wins: the owner's commands change it first.
		// An owner's change made while the clock was behind the vouch is
		// dated after the vouch (changeTime), so the row wins then too.
		switch {
		case !listed || r.changed.UnixMilli() < int64(v.ts):
			err = n.applyOwnVouch(ctx, uid, v, r, listed)
		case v.ts+1 > now+uint64(store.DefaultMaxSkew.Milliseconds()):
			// The store would refuse a claim dated after v as future:
			// wait for the clock, saying so once, not every check.
			n.waitForClock(uid, v, r)
			continue
		default:
			err = n.publishTrustRow(ctx, uid, v, r)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("trust list %s: %w", uid, err))
			continue
		}
		changed++
	}
	return changed, errors.Join(errs...)
}

// applyOwnVouch makes the table follow a newer own vouch claim.
func (n *Node) applyOwnVouch(ctx context.Context, uid string, v ownVouch, r trustRow, listed bool) error {
	at := time.UnixMilli(int64(v.ts)).UTC()
	entry := "none"
	if listed {
		entry = r.changed.UTC().Format(time.RFC3339Nano)
	}
	if v.live {
		if err := n.store.Trust(ctx, uid, "vouched"); err != nil {
			return err
		}
		n.log.Warn("trust list: trusted a signer again: this node vouched for it after the trust list's entry was made (a restored backup?)",
			"uid", uid, "vouched", at, "entry", entry)
		return nil
	}
	if err := n.store.Distrust(ctx, uid); err != nil {
		return err
	}
	n.log.Warn("trust list: distrusted a signer again: this node withdrew its vouch after the trust list's entry was made (a restored backup?)",
		"uid", uid, "withdrawn", at, "entry", entry)
	return nil
}

// waitForClock logs, once per vouch claim, that the trust row's change
// cannot be signed yet: this node's latest vouch claim for uid is dated
// further ahead of the clock than the store accepts (the clock stepped
// back since it was signed).
func (n *Node) waitForClock(uid string, v ownVouch, r trustRow) {
	if n.clockAhead[uid] == v.ts {
		return
	}
	n.clockAhead[uid] = v.ts
	at := time.UnixMilli(int64(v.ts)).UTC()
	n.log.Warn("trust list: this node's vouch claim for a signer is dated ahead of its clock (the clock stepped back?): the trust list stands, and its change is signed once the clock is within the allowance",
		"uid", uid, "vouchDated", at, "trusted", r.trusted, "allowance", store.DefaultMaxSkew, "signableFrom", at.Add(-store.DefaultMaxSkew))
}

// publishTrustRow makes the public vouch follow a newer trust table row.
func (n *Node) publishTrustRow(ctx context.Context, uid string, v ownVouch, r trustRow) error {
	if err := n.signVouch(ctx, uid, r.trusted, v.ts); err != nil {
		return err
	}
	at, since := time.UnixMilli(int64(v.ts)).UTC(), r.changed.UTC()
	if r.trusted {
		n.log.Warn("trust list: vouched again for a signer: the trust list trusted it after this node withdrew its vouch (an interrupted trust add?)",
			"uid", uid, "withdrawn", at, "trustedSince", since)
	} else {
		n.log.Warn("trust list: withdrew the vouch for a signer again: the trust list distrusted it after this node vouched (an interrupted trust rm?)",
			"uid", uid, "vouched", at, "distrustedSince", since)
	}
	return nil
}

// signVouch stores and publishes this node's vouch for uid (live) or its
// withdrawal, newer than after (or the store would answer stale).
func (n *Node) signVouch(ctx context.Context, uid string, live bool, after uint64) error {
	key, ts := store.VouchPrefix+uid, max(n.nowMS(), after+1)
	c := n.identity.Retraction(n.peerCID, key, ts)
	if live {
		c = n.identity.Text(n.peerCID, key, "true", ts)
	}
	res, err := n.store.Submit(ctx, []store.Claim{c}, store.SubmitOptions{Origin: store.OriginLocal, Verified: true})
	if err != nil {
		return err
	}
	n.share([]store.Claim{c}, res)
	return notStored(c, res, 0)
}

// notStored is why the store did not keep this node's vouch claim c
// (res[i]), or nil: a trust decision the store dropped (stale, or rejected
// as dated too far ahead when the clock stepped back) must not pass as done.
func notStored(c store.Claim, res []store.Result, i int) error {
	if i >= len(res) {
		return fmt.Errorf("vouch claim %s: no result", c.Key)
	}
	r := res[i]
	if r.Stored || r.Outcome == store.Unchanged { // Unchanged: already held
		return nil
	}
	at := time.UnixMilli(int64(c.TS)).UTC()
	if r.Err != nil {
		return fmt.Errorf("vouch claim %s dated %s %s: %w", c.Key, at, r.Outcome, r.Err)
	}
	return fmt.Errorf("vouch claim %s dated %s %s: this node holds a newer one", c.Key, at, r.Outcome)
}

// ownVouches reads this node's latest vouch claim per uid (one record: the
// node's peer-id cid).
func (n *Node) ownVouches(ctx context.Context) (map[string]ownVouch, error) {
	claims, err := n.store.FetchClaims(ctx, n.peerCID)
	if err != nil {
		return nil, fmt.Errorf("own vouches: %w", err)
	}
	own := n.identity.UID()
	out := make(map[string]ownVouch)
	for _, c := range claims {
		uid, ok := strings.CutPrefix(c.Key, store.VouchPrefix)
		if !ok || c.UID != own || c.CID != n.peerCID || uid == own || store.CheckUID(uid) != nil {
			continue
		}
		if old, seen := out[uid]; seen && old.ts >= c.TS {
			continue
		}
		out[uid] = ownVouch{live: c.Kind == store.KindText && c.Text() == "true", ts: c.TS}
	}
	return out, nil
}

// trustRows reads the trust table: listed (trusted) and distrusted uids,
// each with its last change.
func (n *Node) trustRows(ctx context.Context) (map[string]trustRow, error) {
	list, err := n.store.TrustList(ctx)
	if err != nil {
		return nil, fmt.Errorf("trust rows: %w", err)
	}
	blocked, err := n.store.DistrustList(ctx)
	if err != nil {
		return nil, fmt.Errorf("trust rows: %w", err)
	}
	out := make(map[string]trustRow, len(list)+len(blocked))
	for _, e := range list {
		if e.Source == "list" { // "own" and "vouch" entries have no row
			out[e.UID] = trustRow{trusted: true, changed: e.Added}
		}
	}
	for _, e := range blocked {
		out[e.UID] = trustRow{changed: e.Added}
	}
	return out, nil
}

// checkTrust runs reconcileTrust on the node's loop, logging a failure.
func (n *Node) checkTrust(ctx context.Context) {
	if _, err := n.reconcileTrust(ctx); err != nil && ctx.Err() == nil {
		n.log.Error("trust list check", "err", err)
	}
}
