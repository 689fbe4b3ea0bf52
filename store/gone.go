package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
)

// Keys gone without a del a consumer can still read. A consumer of the meta
// stream holds the merged keys it was told of; a key that vanishes sends a
// del event, but that event can leave the stream before the consumer reads
// it: trimmed past retention, or wiped by a rebuild or a clear, which write
// no per-key events. Such keys are kept in the cache as
// ev:gone/<key> = the id after which they were gone (the trimmed event's
// own id, or the rebuild's or clear's marker), so that a replay after a
// gap can send a del for every key a consumer may hold that no longer
// exists (Gone) before the snapshot of what does. Entries whose key exists
// again are pruned at each rebuild and never sent.
const goneKVPrefix = "ev:gone/"

// goneKVEnd bounds the ev:gone/ range.
const goneKVEnd = "ev:gone0"

// Statements of the gone keys, run by the writer.
const (
	// goneHarvestSQL keeps the keys of the del events in (?, ?] of the
	// meta stream that do not exist now, before those rows go. ?1 is the
	// offset of the id in an event row's key.
	goneHarvestSQL = `INSERT INTO kv(k, v)
		SELECT '` + goneKVPrefix + `' || json_extract(e.v, '$.key'), substr(e.k, ?)
		FROM kv AS e
		WHERE e.k > ? AND e.k <= ? AND e.v LIKE '{"type":"del"%'
			AND json_extract(e.v, '$.key') IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM kv AS x WHERE x.k = json_extract(e.v, '$.key'))
		ON CONFLICT(k) DO UPDATE SET v = excluded.v`
	goneOldKeysDDL = `CREATE TEMP TABLE IF NOT EXISTS gone_old(k TEXT PRIMARY KEY) WITHOUT ROWID`
	// goneOldKeysSQL copies the merged keys before a rebuild or clear
	// rewrites them.
	goneOldKeysSQL = `INSERT OR IGNORE INTO temp.gone_old(k) SELECT k FROM kv WHERE k >= 'file:' AND k < 'file;'`
	// goneVanishedSQL keeps those of them that do not exist after it.
	goneVanishedSQL = `INSERT INTO kv(k, v)
		SELECT '` + goneKVPrefix + `' || o.k, ? FROM temp.gone_old AS o
		WHERE NOT EXISTS (SELECT 1 FROM kv AS x WHERE x.k = o.k)
		ON CONFLICT(k) DO UPDATE SET v = excluded.v`
	gonePruneSQL = `DELETE FROM kv WHERE k >= '` + goneKVPrefix + `' AND k < '` + goneKVEnd + `'
		AND EXISTS (SELECT 1 FROM kv AS x WHERE x.k = substr(kv.k, ` + goneKeyAt + `))`
	goneKeyAt = "9" // substr offset of the key in an ev:gone/ row's key (len(goneKVPrefix)+1)
)

// harvestGone keeps the keys of the meta stream's del events in
// (after, upTo] that no longer exist, before a trim or a rebuild removes
// those rows.
func (w *writer) harvestGone(after, upTo string) error {
	if err := w.flushKV(); err != nil {
		return err
	}
	p := evPrefix(StreamMeta)
	_, err := w.c.execOnce(goneHarvestSQL, int64(len(p)+1), p+after, p+upTo)
	return err
}

// keepOldKeys copies the merged keys aside before a rebuild or a clear
// removes them (recordVanished then keeps those not written back).
func (w *writer) keepOldKeys() error {
	if err := w.flushKV(); err != nil {
		return err
	}
	for _, q := range []string{goneOldKeysDDL, `DELETE FROM temp.gone_old`, goneOldKeysSQL} {
		if _, err := w.c.execOnce(q); err != nil {
			return err
		}
	}
	return nil
}

// recordVanished keeps the keys copied by keepOldKeys that do not exist
// now as gone since marker, prunes the gone keys that exist again, and
// forgets the copy.
func (w *writer) recordVanished(marker string) error {
	if err := w.flushKV(); err != nil {
		return err
	}
	if _, err := w.c.execOnce(goneVanishedSQL, marker); err != nil {
		return err
	}
	for _, q := range []string{gonePruneSQL, `DELETE FROM temp.gone_old`} {
		if _, err := w.c.execOnce(q); err != nil {
			return err
		}
	}
	return nil
}

// gonePage is how many gone keys Gone reads at a time.
const gonePage = 2048

// Gone calls fn with a del event (no id) for every merged key a consumer
// whose cursor is after may hold and that no longer exists, though no
// event after its cursor will delete it any more: keys gone past
// retention or by a rebuild or clear after that cursor (kept as
// ev:gone/), and those of the del events still in the meta stream after
// it. A replay after a gap sends these, then a Snapshot. after "" means
// every such key. Each page is its own short read.
func (s *Store) Gone(ctx context.Context, after string, fn func(Event) error) (err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return err
	}
	if after != "" {
		ms, seq, ok := parseEventID(after)
		if !ok {
			return fmt.Errorf("%w: event id %q is not <ms>-<seq>", ErrMalformed, after)
		}
		after = formatEventID(ms, seq)
	}
	ms := s.cfg.Now().UnixMilli()
	send := func(key string) error { return fn(Event{Type: "del", Data: metaEventData("del", key, ms)}) }
	for from := goneKVPrefix; ; {
		rows, err := s.cacheR.QueryContext(ctx, `SELECT k FROM kv AS g WHERE k > ? AND k < ? AND v > ?
			AND NOT EXISTS (SELECT 1 FROM kv AS x WHERE x.k = substr(g.k, `+goneKeyAt+`)) ORDER BY k LIMIT ?`,
			from, goneKVEnd, after, gonePage)
		if err != nil {
			return fmt.Errorf("gone keys: %w", err)
		}
		keys, err := scanKeys(rows)
		if err != nil {
			return fmt.Errorf("gone keys: %w", err)
		}
		for _, k := range keys {
			if err := send(strings.TrimPrefix(k, goneKVPrefix)); err != nil {
				return err
			}
		}
		if len(keys) < gonePage {
			break
		}
		from = keys[len(keys)-1]
	}
	p := evPrefix(StreamMeta)
	for from := p + after; ; {
		rows, err := s.cacheR.QueryContext(ctx, `SELECT k, json_extract(v, '$.key') FROM kv AS e WHERE k > ? AND k < ?
			AND v LIKE '{"type":"del"%' AND json_extract(v, '$.key') IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM kv AS x WHERE x.k = json_extract(e.v, '$.key')) ORDER BY k LIMIT ?`,
			from, evEnd(StreamMeta), gonePage)
		if err != nil {
			return fmt.Errorf("gone keys: %w", err)
		}
		var ids, keys []string
		for rows.Next() {
			var id, key string
			if err := rows.Scan(&id, &key); err != nil {
				rows.Close()
				return fmt.Errorf("gone keys: %w", err)
			}
			ids, keys = append(ids, id), append(keys, key)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("gone keys: %w", err)
		}
		for _, k := range keys {
			if err := send(k); err != nil {
				return err
			}
		}
		if len(ids) < gonePage {
			return nil
		}
		from = ids[len(ids)-1]
	}
}

// scanKeys reads one string column of every row, and closes them.
func scanKeys(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// rebuildGate lets a replay wait for a rebuild of the serving cache: until
// it commits, a snapshot would read the old state and then the new one.
type rebuildGate struct {
	mu   sync.Mutex
	done chan struct{} // closed when the running rebuild ends; nil when none runs
}

func (g *rebuildGate) start() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done == nil {
		g.done = make(chan struct{})
	}
}

func (g *rebuildGate) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done != nil {
		close(g.done)
		g.done = nil
	}
}

// AwaitRebuild returns once no rebuild of the cache is running (at once
// when none is), or with ctx's error.
func (s *Store) AwaitRebuild(ctx context.Context) error {
	s.rebuilding.mu.Lock()
	done := s.rebuilding.done
	s.rebuilding.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
