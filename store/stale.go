package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// supersededBatch is how many claims one Superseded query looks up (three
// parameters each, far below SQLite's limit).
const supersededBatch = 256

// Superseded reports, for each claim, whether the stored truth row for its
// (cid, key, signer) is that very claim or beats it by (ts, id): storing it
// would change nothing. A live link between two record cids older than its
// row is superseded only once its group edge is stored: until then it
// still joins their groups. ids are the claims' ids (the caller has them). The
// swarm asks before it charges a signer's gossip budget, so that replays of
// a signer's old claims cost the signer nothing. It reads the truth read
// pool in batches; a claim whose signer has no row at all is not
// superseded. The answer may be out of date by the time it is used (the
// writer goes on): the store's own Submit stays the judge of what is kept.
func (s *Store) Superseded(ctx context.Context, claims []Claim, ids []ID) (_ []bool, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return nil, err
	}
	if len(ids) != len(claims) {
		return nil, fmt.Errorf("superseded: %d claims, %d ids", len(claims), len(ids))
	}
	out := make([]bool, len(claims))
	var links []edgeAsk
	type rowKey struct {
		cid, key string
		pid      int64
	}
	for lo := 0; lo < len(claims); lo += supersededBatch {
		hi := min(lo+supersededBatch, len(claims))
		want := make(map[rowKey][]int, hi-lo)
		args := make([]any, 0, 3*(hi-lo))
		for i := lo; i < hi; i++ {
			pid, ok := s.princ.pidOf(claims[i].UID)
			if !ok {
				continue // a signer never stored: nothing can supersede it
			}
			k := rowKey{claims[i].CID, claims[i].Key, pid}
			if _, dup := want[k]; !dup {
				args = append(args, k.cid, k.key, k.pid)
			}
			want[k] = append(want[k], i)
		}
		if len(args) == 0 {
			continue
		}
		n := len(args) / 3
		q := `WITH q(cid, key, pid) AS (VALUES ` + strings.TrimSuffix(strings.Repeat(`(?, ?, ?),`, n), ",") +
			`) SELECT claim.cid, claim.key, claim.pid, claim.ts, claim.id FROM q JOIN claim ON claim.cid = q.cid AND claim.key = q.key AND claim.pid = q.pid`
		err := func() error {
			rows, err := s.truthR.QueryContext(ctx, q, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var k rowKey
				var ts int64
				var id []byte
				if err := rows.Scan(&k.cid, &k.key, &k.pid, &ts, &id); err != nil {
					return err
				}
				stored := SyncItem{TS: uint64(ts), ID: asID(id)}
				for _, i := range want[k] {
					c := SyncItem{TS: claims[i].TS, ID: ids[i]}
					// A live link joins groups even when its row is newer
					// (ingest: otherwise arrival order would decide the
					// groups): older than the row, it changes nothing only
					// once its edge is stored (checked below).
					if joinsGroups(&claims[i]) && stored != c {
						if stored.Compare(c) > 0 {
							links = append(links, edgeAsk{i, k.pid})
						}
						continue
					}
					out[i] = stored.Compare(c) >= 0
				}
			}
			return rows.Err()
		}()
		if err != nil {
			return nil, fmt.Errorf("superseded: %w", err)
		}
	}
	for _, l := range links { // rare: links older than their signer's row
		target, _ := claims[l.i].LinkTarget()
		var one int
		err := s.truthR.QueryRowContext(ctx, `SELECT 1 FROM group_edge WHERE cid = ? AND other = ? AND pid = ?`,
			claims[l.i].CID, target, l.pid).Scan(&one)
		switch {
		case err == nil:
			out[l.i] = true
		case !errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("superseded: %w", err)
		}
	}
	return out, nil
}

// edgeAsk is a link older than its row: superseded once its edge exists.
type edgeAsk struct {
	i   int
	pid int64
}

// joinsGroups reports whether c is a live link between two record cids,
// which joins their groups whether or not it becomes the row.
func joinsGroups(c *Claim) bool {
	target, ok := c.LinkTarget()
	return ok && !isPeerCID(c.CID) && !isPeerCID(target)
}
