package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ---- event ids and rows ----

// evState is the writer's bookkeeping for one stream.
type evState struct {
	lastMS, seq int64
	count       int64  // rows kept
	hwm         string // newest id written
	horizon     string // newest id that is gone (trimmed, or a rebuild or clear marker)
	reset       string // newest rebuild, clear or file reset marker
	dirty       bool
}

// next returns a new id: <ms13>-<seq10>, increasing even if the clock
// steps back.
func (e *evState) next(ms int64) string {
	if ms > e.lastMS {
		e.lastMS, e.seq = ms, 0
	} else {
		e.seq++
	}
	e.hwm = formatEventID(e.lastMS, e.seq)
	e.dirty = true
	return e.hwm
}

func (e *evState) setHWM(id string) {
	e.hwm = id
	if ms, seq, ok := parseEventID(id); ok {
		e.lastMS, e.seq = ms, seq
	}
}

// zeroEventID is "0" and "0-0": before every id.
var zeroEventID = formatEventID(0, 0)

func formatEventID(ms, seq int64) string {
	var b [24]byte
	pad := func(dst []byte, v int64) {
		for i := len(dst) - 1; i >= 0; i-- {
			dst[i] = byte('0' + v%10)
			v /= 10
		}
	}
	pad(b[:13], ms)
	b[13] = '-'
	pad(b[14:], seq)
	return string(b[:])
}

// parseEventID accepts <ms>-<seq> with or without padding, and "0".
func parseEventID(s string) (ms, seq int64, ok bool) {
	a, b, found := strings.Cut(s, "-")
	if !found {
		b = "0"
	}
	ms, err1 := strconv.ParseInt(a, 10, 64)
	seq, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || ms < 0 || seq < 0 || ms > 9_999_999_999_999 || seq > 9_999_999_999 {
		return 0, 0, false
	}
	return ms, seq, true
}

func evPrefix(st Stream) string { return "ev:" + string(st) + "/" }
func evEnd(st Stream) string    { return "ev:" + string(st) + "0" }

func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func metaEventData(typ, key string, ms int64) []byte {
	b := make([]byte, 0, 48+len(key))
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","key":`...)
	b = appendJSONString(b, key)
	b = append(b, `,"ts":"`...)
	b = strconv.AppendInt(b, ms, 10)
	return append(b, `"}`...)
}

// fileEventData writes {"type","path","size","midhash256","oldPath","timestamp"}
// with string values, omitting empty ones.
func fileEventData(typ, path, size, midhash, oldPath string, ms int64) []byte {
	b := append([]byte(`{"type":`), appendJSONString(nil, typ)...)
	for _, f := range [][2]string{{"path", path}, {"size", size}, {"midhash256", midhash}, {"oldPath", oldPath}} {
		if f[1] == "" {
			continue
		}
		b = append(b, ',', '"')
		b = append(b, f[0]...)
		b = append(b, '"', ':')
		b = appendJSONString(b, f[1])
	}
	b = append(b, `,"timestamp":"`...)
	b = strconv.AppendInt(b, ms, 10)
	return append(b, `"}`...)
}

// eventType reads "type" back from data the store wrote.
func eventType(data string) string {
	rest, ok := strings.CutPrefix(data, `{"type":"`)
	if !ok {
		return ""
	}
	t, _, _ := strings.Cut(rest, `"`)
	return t
}

type streamEvent struct {
	stream Stream
	ev     Event
}

// emit writes one event row and queues it for the subscribers.
func (w *writer) emit(b *batch, st Stream, typ string, data []byte) error {
	e := w.ev[st]
	id := e.next(b.nowMS)
	if err := w.putKV(evPrefix(st)+id, string(data)); err != nil {
		return err
	}
	e.count++
	b.events = append(b.events, streamEvent{st, Event{ID: id, Type: typ, Data: data}})
	w.s.met.events.WithLabelValues(string(st)).Inc()
	return nil
}

func (w *writer) emitMeta(b *batch, typ, key string) error {
	return w.emit(b, StreamMeta, typ, metaEventData(typ, key, b.nowMS))
}

// finishEvents trims each stream to its retention (in chunks, so a trim
// is not paid per event) and records the high-water marks.
func (w *writer) finishEvents(b *batch) error {
	if err := w.flushKV(); err != nil { // before the commit
		return err
	}
	keep := int64(w.s.cfg.EventRetention)
	slack := max(64, keep/64)
	dest := make([]driver.Value, 1)
	for _, st := range []Stream{StreamMeta, StreamFiles} {
		e := w.ev[st]
		if e.count > keep+slack {
			excess := e.count - keep
			ok, err := w.cEvCut.one(dest, evPrefix(st), evEnd(st), excess-1)
			if err != nil {
				return err
			}
			if ok {
				cut := asString(dest[0])
				if st == StreamMeta { // their consumers may not have read these dels yet
					if err := w.harvestGone("", strings.TrimPrefix(cut, evPrefix(st))); err != nil {
						return err
					}
				}
				if _, err := w.cDelRange.exec(evPrefix(st), cut+"\x00"); err != nil {
					return err
				}
				e.count -= excess
				if err := w.setHorizon(st, strings.TrimPrefix(cut, evPrefix(st))); err != nil {
					return err
				}
			}
		}
		if e.dirty {
			if _, err := w.cPut.exec("evhwm:"+string(st), e.hwm); err != nil {
				return err
			}
			e.dirty = false
		}
	}
	return nil
}

// setHorizon records that every event up to id is gone. The hub learns it
// before the commit that deletes them, so that a replay never skips
// events unnoticed (at worst a replay is cut off for a trim that fails).
func (w *writer) setHorizon(st Stream, id string) error {
	w.ev[st].horizon = id
	w.s.hub.setHorizons(map[Stream]string{st: id})
	_, err := w.cPut.exec("meta:evtrim/"+string(st), id)
	return err
}

// markGap makes every cursor issued so far get a Gap (after a rebuild, a
// clear or a file reset): the horizon becomes a fresh id.
func (w *writer) markGap(b *batch, st Stream) error {
	id := w.ev[st].next(b.nowMS)
	w.ev[st].reset = id
	w.s.hub.setReset(st, id)
	if _, err := w.cPut.exec("meta:evreset/"+string(st), id); err != nil {
		return err
	}
	return w.setHorizon(st, id)
}

// readEvents returns up to limit events of st after the id cursor.
func (s *Store) readEvents(ctx context.Context, st Stream, cursor string, limit int) ([]Event, error) {
	rows, err := s.cacheR.QueryContext(ctx, `SELECT k, v FROM kv WHERE k > ? AND k < ? ORDER BY k LIMIT ?`,
		evPrefix(st)+cursor, evEnd(st), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out = append(out, Event{ID: strings.TrimPrefix(k, evPrefix(st)), Type: eventType(v), Data: json.RawMessage(v)})
	}
	return out, rows.Err()
}

// Snapshot calls fn with one "set" event per merged key (key
// file:<rid>/<field>) and returns the id of the newest meta event when it
// started ("" when the stream is empty), to Subscribe after. Snapshot
// events carry no id. The keys are read in pages, each in its own short
// read, so that a slow consumer never holds a read transaction (which
// would keep the cache's WAL from being checkpointed): a key set or
// deleted during the snapshot also has its event after the returned id,
// which the subscription replays.
func (s *Store) Snapshot(ctx context.Context, fn func(Event) error) (_ string, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return "", err
	}
	id, err := s.issuedID(ctx, StreamMeta)
	if err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	ms := s.cfg.Now().UnixMilli()
	keys := make([]string, 0, snapshotPage)
	for from := "file:"; ; {
		keys, err = s.readSnapshotPage(ctx, keys[:0], from)
		if err != nil {
			return "", fmt.Errorf("snapshot: %w", err)
		}
		for _, k := range keys {
			if err := fn(Event{Type: "set", Data: metaEventData("set", k, ms)}); err != nil {
				return "", err
			}
		}
		if len(keys) < snapshotPage {
			return id, nil
		}
		from = keys[len(keys)-1]
	}
}

// issuedID returns the newest id of st the cache has committed (event or
// gap marker), "" when none.
func (s *Store) issuedID(ctx context.Context, st Stream) (string, error) {
	var id string
	err := s.cacheR.QueryRowContext(ctx, `SELECT v FROM kv WHERE k = ?`, "evhwm:"+string(st)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// snapshotPage is the number of keys a snapshot reads at a time.
const snapshotPage = 2048

// readSnapshotPage appends to keys up to snapshotPage merged keys after
// from.
func (s *Store) readSnapshotPage(ctx context.Context, keys []string, from string) ([]string, error) {
	rows, err := s.cacheR.QueryContext(ctx, `SELECT k FROM kv WHERE k > ? AND k < 'file;' ORDER BY k LIMIT ?`, from, snapshotPage)
	if err != nil {
		return keys, err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return keys, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}
