package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Trust states of the truth trust table.
const (
	stateTrusted    = "trusted"
	stateDistrusted = "distrusted"
)

type trustRow struct {
	state string
	note  string
	added time.Time
}

// trustView is an immutable snapshot of the trust policy. The writer
// builds a new one on every change and publishes it atomically, so
// Trusted is a pointer load and two map lookups.
type trustView struct {
	mode    TrustMode
	own     string
	list    map[string]trustRow            // the trust table
	vouches map[string]map[string]struct{} // voucher uid → uids it vouches for (live claims)
	eff     map[string]struct{}            // effective trusted set (list mode)
	home    map[string]string              // a signer's home when it is not the signer itself (homeOf)
}

// build computes the effective set: own ∪ listed-trusted ∪ vouched for by
// own or a listed-trusted signer, minus distrusted uids (one hop only);
// and each vouched signer's home (homeOf).
func (v *trustView) build() *trustView {
	eff := map[string]struct{}{}
	home := map[string]string{}
	if v.own != "" {
		eff[v.own] = struct{}{}
	}
	for uid, r := range v.list {
		if r.state == stateTrusted {
			eff[uid] = struct{}{}
		}
	}
	for voucher, set := range v.vouches {
		if !v.direct(voucher) {
			continue
		}
		for uid := range set {
			if r, ok := v.list[uid]; ok && r.state == stateDistrusted {
				continue
			}
			eff[uid] = struct{}{}
			v.placeVouched(home, voucher, uid)
		}
	}
	v.eff, v.home = eff, home
	return v
}

// direct reports whether uid is trusted by the node itself: its own uid
// or a trusted row of the list. Only such signers' vouches count.
func (v *trustView) direct(uid string) bool {
	if uid == v.own && uid != "" {
		return true
	}
	r, ok := v.list[uid]
	return ok && r.state == stateTrusted
}

// placeVouched records in home the home of uid, vouched for by voucher
// (a direct signer), whatever order the vouches are visited in: the own
// uid's vouch wins (a local writer is part of this home); a signer the
// node trusts directly stays its own home; of several other vouchers, the
// smallest uid.
func (v *trustView) placeVouched(home map[string]string, voucher, uid string) {
	switch cur, placed := home[uid]; {
	case uid == v.own:
	case voucher == v.own:
		home[uid] = v.own
	case cur == v.own && placed:
	case v.direct(uid):
	case !placed || voucher < cur:
		home[uid] = voucher
	}
}

// homeOf is the home uid's votes count in, once per field with the other
// signers of that home (docs/store.md, Merge): the voucher for a signer
// vouched for (placeVouched), the signer itself otherwise: the own uid,
// another home's node uid, a signer trusted directly, a stranger in open
// mode.
func (v *trustView) homeOf(uid string) string {
	if h, ok := v.home[uid]; ok {
		return h
	}
	return uid
}

func (v *trustView) blocked(uid string) bool {
	r, ok := v.list[uid]
	return ok && r.state == stateDistrusted && uid != v.own
}

// trusted reports whether uid's claims count. In open mode every signer
// counts except a distrusted one (the owner's block still holds).
func (v *trustView) trusted(uid string) bool {
	if v.mode == TrustOpen {
		return !v.blocked(uid)
	}
	_, ok := v.eff[uid]
	return ok
}

// clone copies the view for the writer to change. The effective set and
// the homes are shared until build replaces them (build makes new maps),
// so a clone that ends up unchanged still answers like the original.
func (v *trustView) clone() *trustView {
	n := &trustView{mode: v.mode, own: v.own, list: maps.Clone(v.list), eff: v.eff, home: v.home}
	n.vouches = make(map[string]map[string]struct{}, len(v.vouches))
	for k, s := range v.vouches {
		n.vouches[k] = maps.Clone(s)
	}
	return n
}

// setVouch records voucher's live vouch for uid (or its withdrawal) and
// reports whether it changed the vouch map.
func (v *trustView) setVouch(voucher, uid string, live bool) bool {
	s := v.vouches[voucher]
	_, had := s[uid]
	if had == live {
		return false
	}
	if live {
		if s == nil {
			s = map[string]struct{}{}
			v.vouches[voucher] = s
		}
		s[uid] = struct{}{}
	} else {
		delete(s, uid)
		if len(s) == 0 {
			delete(v.vouches, voucher)
		}
	}
	return true
}

// vouchOf reports whether a claim is a vouch that counts for the map: on
// the voucher's own peer-id cid, key vouch/<uid>. It returns the vouched uid.
func vouchOf(c *Claim, peerCID func(uid string) string) (string, bool) {
	uid, ok := strings.CutPrefix(c.Key, VouchPrefix)
	if !ok || !isPeerCID(c.CID) || uid == "" {
		return "", false
	}
	if peerCID(c.UID) != c.CID {
		return "", false
	}
	return uid, true
}

// ---- the public trust API ----

// TrustMode returns the node's policy.
func (s *Store) TrustMode() TrustMode { return s.mode() }

func (s *Store) mode() TrustMode {
	if s.cfg.Trust == "" {
		return TrustList
	}
	return s.cfg.Trust
}

// Trusted reports whether claims of uid count (fast, in memory).
func (s *Store) Trusted(uid string) bool {
	v := s.trust.Load()
	if v == nil {
		return false
	}
	return v.trusted(uid)
}

// Distrusted reports whether the owner blocked uid with Distrust (and has
// not trusted it again since).
func (s *Store) Distrusted(uid string) bool {
	v := s.trust.Load()
	return v != nil && v.blocked(uid)
}

// TrustList returns every signer this node accepts, and why.
func (s *Store) TrustList(ctx context.Context) ([]TrustEntry, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	v := s.trust.Load()
	entries := map[string]*TrustEntry{}
	if v.own != "" {
		entries[v.own] = &TrustEntry{UID: v.own, Source: "own"}
	}
	for uid, r := range v.list {
		if r.state != stateTrusted || uid == v.own {
			continue
		}
		entries[uid] = &TrustEntry{UID: uid, Source: "list", Note: r.note, Added: r.added}
	}
	for voucher, set := range v.vouches {
		if !v.direct(voucher) {
			continue
		}
		for uid := range set {
			if v.blocked(uid) {
				continue
			}
			e := entries[uid]
			if e == nil {
				e = &TrustEntry{UID: uid, Source: "vouch"}
				entries[uid] = e
			}
			e.VouchedBy = append(e.VouchedBy, voucher)
		}
	}
	out := make([]TrustEntry, 0, len(entries))
	for _, e := range entries {
		slices.Sort(e.VouchedBy)
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b TrustEntry) int { return strings.Compare(a.UID, b.UID) })
	return out, nil
}

// DistrustList lists the signers the owner blocked (Source "distrusted"),
// with when and why, and the trusted vouchers whose vouches the block
// overrides (VouchedBy): what trust ls must show for an owner to review
// whom they blocked.
func (s *Store) DistrustList(ctx context.Context) ([]TrustEntry, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	v := s.trust.Load()
	var out []TrustEntry
	for uid, r := range v.list {
		if !v.blocked(uid) {
			continue
		}
		e := TrustEntry{UID: uid, Source: "distrusted", Note: r.note, Added: r.added}
		for voucher, set := range v.vouches {
			if _, ok := set[uid]; !ok {
				continue
			}
			// One hop, as in TrustList: only the own uid's and directly
			// trusted signers' vouches would count.
			if v.direct(voucher) {
				e.VouchedBy = append(e.VouchedBy, voucher)
			}
		}
		slices.Sort(e.VouchedBy)
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b TrustEntry) int { return strings.Compare(a.UID, b.UID) })
	return out, nil
}

// ErrOwnUID refuses to distrust the node's own uid (it wraps ErrBadUID).
var ErrOwnUID = fmt.Errorf("%w: this node's own uid is always trusted", ErrBadUID)

// Trust puts uid on the trust list (lifting a distrust).
func (s *Store) Trust(ctx context.Context, uid, note string) error {
	return s.TrustAt(ctx, uid, note, time.Time{})
}

// TrustAt is Trust with the row's change time given (zero: now). The node
// dates a change after its own latest vouch claim for uid when the clock is
// behind that claim, so the row stays the newer of the two.
func (s *Store) TrustAt(ctx context.Context, uid, note string, at time.Time) error {
	if err := CheckUID(uid); err != nil {
		return err
	}
	return s.do(ctx, &request{kind: reqTrust, uid: uid, note: note, state: stateTrusted, at: at})
}

// Distrust removes uid from the trust list and blocks it even when vouched
// for, until trusted again. Its claims stay in truth but stop counting.
func (s *Store) Distrust(ctx context.Context, uid string) error {
	return s.DistrustAt(ctx, uid, time.Time{})
}

// DistrustAt is Distrust with the row's change time given (zero: now), as
// TrustAt.
func (s *Store) DistrustAt(ctx context.Context, uid string, at time.Time) error {
	if err := CheckUID(uid); err != nil {
		return err
	}
	if uid == s.cfg.OwnUID {
		return fmt.Errorf("distrust %s: %w", uid, ErrOwnUID)
	}
	return s.do(ctx, &request{kind: reqTrust, uid: uid, state: stateDistrusted, at: at})
}

// TrustChanges receives a value (coalesced) whenever the effective trusted
// set changes, by the list or by a vouch claim; the swarm then re-syncs.
func (s *Store) TrustChanges() <-chan struct{} { return s.trustCh }

func (s *Store) signalTrust() {
	select {
	case s.trustCh <- struct{}{}:
	default:
	}
}
