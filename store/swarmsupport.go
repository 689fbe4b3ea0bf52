package store

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
)

// SyncSet is the (ts, id) set of the claims this node shares: every stored
// claim of a trusted signer, tombstones included. Wait for SyncReady first.
func (s *Store) SyncSet() *SyncSet { return s.sync }

// SyncReady is closed once the sync set is loaded (in the background after Open).
func (s *Store) SyncReady() <-chan struct{} { return s.syncReady }

// loadSyncSet fills the sync set from an ordered scan of the claim(ts, id)
// index. The writer keeps changing the set meanwhile and logs what it
// does; replaying that log at the end undoes any stale item the scan
// added after the writer had removed it.
func (s *Store) loadSyncSet() {
	defer s.wg.Done()
	start := time.Now()
	err := func() error {
		rows, err := s.truthR.QueryContext(s.ctx, `SELECT ts, id, pid FROM claim INDEXED BY claim_ts_id ORDER BY ts, id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		v := s.trust.Load()
		var lastPID int64 = -1
		lastOK := false
		for rows.Next() {
			var ts, pid int64
			var id []byte
			if err := rows.Scan(&ts, &id, &pid); err != nil {
				return err
			}
			if pid != lastPID {
				lastPID, lastOK = pid, v.trusted(s.princ.uidOf(pid))
			}
			if lastOK {
				s.sync.Add(SyncItem{TS: uint64(ts), ID: asID(id)})
			}
		}
		return rows.Err()
	}()
	if err != nil {
		if s.ctx.Err() == nil {
			err = fmt.Errorf("load the sync set from %s: %w", s.cfg.TruthPath, explainRead(err))
			s.log.Error("load sync set", "err", err)
			s.health.mu.Lock()
			s.health.syncLoad = err
			s.health.mu.Unlock()
		}
		return
	}
	s.syncMu.Lock()
	applyOps(s.sync, s.syncLog)
	s.syncLog = nil
	s.syncLoaded.Store(true)
	s.syncMu.Unlock()
	close(s.syncReady)
	s.log.Debug("sync set loaded", "items", s.sync.Len(), "took", time.Since(start))
}

const claimCols = `key, pid, value, ts, id, sig`

// shared filters claims to those of trusted signers.
func (s *Store) shared(cs []Claim) []Claim {
	v := s.trust.Load()
	out := cs[:0]
	for _, c := range cs {
		if v.trusted(c.UID) {
			out = append(out, c)
		}
	}
	return out
}

// ClaimsByItems returns the stored claims with these (ts, id), skipping any
// no longer stored (or no longer shared).
func (s *Store) ClaimsByItems(ctx context.Context, items []SyncItem) (_ []Claim, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return nil, err
	}
	var out []Claim
	for _, it := range items {
		if it.TS > math.MaxInt64 {
			continue
		}
		cs, err := s.claimsWhere(ctx, `SELECT cid, `+claimCols+` FROM claim WHERE ts = ? AND id = ?`, int64(it.TS), it.ID[:])
		if err != nil {
			return nil, fmt.Errorf("claims by items: %w", err)
		}
		out = append(out, cs...)
	}
	return s.shared(out), nil
}

// ClaimsInRange returns up to limit shared claims with lo <= (ts, id) < hi, in order.
func (s *Store) ClaimsInRange(ctx context.Context, lo, hi SyncItem, limit int) (_ []Claim, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 1000
	}
	var out []Claim
	cur := lo
	for len(out) < limit && cur.Compare(hi) < 0 && cur.TS <= math.MaxInt64 {
		hiTS, hiID := clampItem(hi)
		q := `SELECT cid, ` + claimCols + ` FROM claim WHERE (ts, id) >= (?, ?) AND (ts, id) < (?, ?) ORDER BY ts, id LIMIT ?`
		page := limit - len(out)
		cs, err := s.claimsWhere(ctx, q, int64(cur.TS), cur.ID[:], hiTS, hiID, page)
		if err != nil {
			return nil, fmt.Errorf("claims in range: %w", err)
		}
		if len(cs) == 0 {
			break
		}
		last := cs[len(cs)-1]
		cur = SyncItem{TS: last.TS, ID: last.ID()}
		cur = cur.Next()
		out = append(out, s.shared(cs)...)
		if len(cs) < page {
			break
		}
	}
	return out, nil
}

// clampItem maps an item to SQL bounds (ts is stored as a signed integer;
// no stored ts exceeds MaxInt64, so the top of the range is clamped).
func clampItem(it SyncItem) (int64, []byte) {
	if it.TS > math.MaxInt64 {
		return math.MaxInt64, MaxSyncItem.ID[:]
	}
	return int64(it.TS), it.ID[:]
}

// claimsWhere runs a query whose columns are cid, key, pid, value, ts, id, sig.
func (s *Store) claimsWhere(ctx context.Context, q string, args ...any) ([]Claim, error) {
	rows, err := s.truthR.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Claim
	for rows.Next() {
		var cid, key string
		var pid, ts int64
		var val any
		var id, sig []byte
		if err := rows.Scan(&cid, &key, &pid, &val, &ts, &id, &sig); err != nil {
			return nil, err
		}
		r := rowFromValue(pid, val, ts, asID(id))
		if !s.checked(cid, key, &r) {
			continue // damaged: never served (damage.go)
		}
		out = append(out, claimOf(s.princ.uidOf(pid), cid, key, &r, sig))
	}
	return out, rows.Err()
}

// fetchClaimsMax bounds what FetchClaims reads for one group: at most this
// many claims, from at most this many of its cids. A fetch answer holds at
// most 65,536 claims; a bigger group costs a bounded read all the same.
const fetchClaimsMax = 1 << 17

// FetchClaims returns every shared claim (tombstones included) of the group
// holding cid, for the fetch protocol, up to fetchClaimsMax. Empty when cid
// is unknown.
func (s *Store) FetchClaims(ctx context.Context, cid string) (_ []Claim, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return nil, err
	}
	cids := []string{cid}
	if rid, ok := s.groups.ridOf(cid); ok {
		cids = s.groups.cidsOf(rid)
	}
	var out []Claim
	for i, c := range cids {
		if i >= fetchClaimsMax || len(out) >= fetchClaimsMax {
			break
		}
		cs, err := s.claimsWhere(ctx, `SELECT cid, `+claimCols+` FROM claim WHERE cid = ? LIMIT ?`, c, fetchClaimsMax-len(out))
		if err != nil {
			return nil, fmt.Errorf("fetch claims: %w", err)
		}
		out = append(out, cs...)
	}
	return s.shared(out), nil
}

// CIDs returns up to limit cids that have shared claims, after the given
// one in string order ("" from the start): what the node provides in the DHT.
func (s *Store) CIDs(ctx context.Context, after string, limit int) (_ []string, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 1000
	}
	v := s.trust.Load()
	var out []string
	cur := after
	for len(out) < limit {
		rows, err := s.truthR.QueryContext(ctx,
			`SELECT cid, group_concat(DISTINCT pid) FROM claim WHERE cid > ? GROUP BY cid ORDER BY cid LIMIT ?`, cur, limit)
		if err != nil {
			return nil, fmt.Errorf("cids: %w", err)
		}
		n := 0
		for rows.Next() {
			var c, pids string
			if err := rows.Scan(&c, &pids); err != nil {
				rows.Close()
				return nil, fmt.Errorf("cids: %w", err)
			}
			n++
			cur = c
			for p := range strings.SplitSeq(pids, ",") {
				if v.trusted(s.princ.uidOf(parseInt(p))) {
					if len(out) < limit {
						out = append(out, c)
					}
					break
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("cids: %w", err)
		}
		if n < limit {
			break
		}
	}
	return out, nil
}

// HasCID reports whether cid belongs to a record (claimed, linked, or a local file).
func (s *Store) HasCID(ctx context.Context, cid string) (_ bool, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return false, err
	}
	_, ok := s.groups.ridOf(cid)
	return ok, nil
}
