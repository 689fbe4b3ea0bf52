package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/metanode/metanode/store"
)

// importSource reads one legacy layout and hands the importer batches.
type importSource interface {
	name() string   // for the report and the import state: no password
	layout() string // layoutHash, layoutFlat, layoutKV or layoutClaims
	unit() string   // what total and a batch's units count
	total() int64   // units in all (0: unknown), known once read began
	// read calls emit with each batch, from cursor on ("" from the start).
	read(ctx context.Context, cursor string, batch int, emit func(*importBatch) error) error
	close() error
}

func openImportSource(ctx context.Context, o importOptions, rep *importReport) (importSource, error) {
	if o.redis != "" {
		return openRedisSource(ctx, o.redis, o.layout, rep)
	}
	return openSQLiteSource(ctx, o.sqlite, o.layout, rep)
}

// Keys of the Redis layouts.
const (
	redisSchemaKey = "meta-core:schema-version" // the flat layout's gate: "2"
	redisIndexKey  = "file:__index__"           // the set of every record
	redisScanCount = 1000                       // keys asked of each SCAN
)

// redisStreams are the flat layout's event streams.
var redisStreams = []string{"file:events", "meta:events"}

// redisSource reads the hash layout (seed 000: file:<hashId> hashes) or
// the flat layout (seed 001: file:<rid>/<field> strings, cid: aliases,
// cids sets) with SCAN in batches, never KEYS. Both read in two passes:
// the first reads every key's name and the content ids (the alias index:
// which record each cid belongs to), the second the records' fields.
type redisSource struct {
	rdb     *redis.Client
	display string
	lay     string
	rep     *importReport
	m       mapper
	aliases *aliasIndex
	units   atomic.Int64 // source units in all, counted by the first pass

	flat map[string]*flatRec // the flat layout's records by rid (first pass)
}

// flatRec is a record of the flat layout as the first pass found it.
type flatRec struct {
	cids   []string // every content id it lists or the index names it by
	fields []string // its keys' fields, but its cids (read in the second pass)
	keys   int      // its file:<rid>/… keys: none for a rid only cid: keys name
	rec    legacyRec
}

func openRedisSource(ctx context.Context, url, layout string, rep *importReport) (*redisSource, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, usagef("import", "--from-redis: %v (want redis://host:port/db)", err)
	}
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	s := &redisSource{rdb: redis.NewClient(opt), display: redisDisplay(opt), rep: rep, m: mapper{rep: rep}, aliases: newAliasIndex()}
	if s.lay, err = s.detect(ctx, layout); err != nil {
		s.rdb.Close()
		return nil, err
	}
	return s, nil
}

// redisDisplay names a Redis without its password.
func redisDisplay(opt *redis.Options) string {
	if opt.Network == "unix" {
		return fmt.Sprintf("unix://%s?db=%d", opt.Addr, opt.DB)
	}
	return fmt.Sprintf("redis://%s/%d", opt.Addr, opt.DB)
}

func (s *redisSource) name() string   { return s.display }
func (s *redisSource) layout() string { return s.lay }
func (s *redisSource) total() int64   { return s.units.Load() }
func (s *redisSource) close() error   { return s.rdb.Close() }

func (s *redisSource) unit() string {
	if s.lay == layoutHash {
		return "records"
	}
	return "keys"
}

// detect finds the layout: the flat layout's schema-version key, else the
// shape of the first file: keys. force, when given, wins.
func (s *redisSource) detect(ctx context.Context, force string) (string, error) {
	v, err := s.rdb.Get(ctx, redisSchemaKey).Result()
	switch {
	case err != nil && !errors.Is(err, redis.Nil):
		return "", fmt.Errorf("redis %s: %w", s.display, err)
	case force != "":
		return force, nil
	case err == nil && v == "2":
		return layoutFlat, nil
	case err == nil:
		return "", fmt.Errorf("redis %s: %s is %q, a layout this import does not know (the flat layout has \"2\"): pass --layout flat or hash to read it as one", s.display, redisSchemaKey, v)
	}
	var cursor uint64
	for range 16 { // a bounded look: the first file: keys tell
		keys, next, err := s.rdb.Scan(ctx, cursor, "file:*", redisScanCount).Result()
		if err != nil {
			return "", fmt.Errorf("redis %s: %w", s.display, err)
		}
		for _, k := range keys {
			if k == redisIndexKey {
				continue
			}
			if strings.Contains(k, "/") {
				return layoutFlat, nil
			}
			return layoutHash, nil
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	return "", fmt.Errorf("redis %s holds no file: keys of either layout: nothing to import (pass --layout hash or flat to read it anyway)", s.display)
}

func (s *redisSource) read(ctx context.Context, cursor string, batch int, emit func(*importBatch) error) error {
	if s.lay == layoutHash {
		return s.readHash(ctx, cursor, emit)
	}
	return s.readFlat(ctx, cursor, batch, emit)
}

// scanAll runs SCAN over the whole keyspace (or the keys matching match)
// from cursor, calling fn with each reply and the cursor after it.
func (s *redisSource) scanAll(ctx context.Context, cursor uint64, match string, count int64, fn func(keys []string, next uint64) error) error {
	for {
		keys, next, err := s.rdb.Scan(ctx, cursor, match, count).Result()
		if err != nil {
			return fmt.Errorf("redis %s: scan: %w", s.display, err)
		}
		if err := fn(keys, next); err != nil {
			return err
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// types returns the Redis type of each key ("none" for a key gone since).
func (s *redisSource) types(ctx context.Context, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StatusCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Type(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redis %s: type: %w", s.display, err)
	}
	out := make([]string, len(keys))
	for i, c := range cmds {
		out[i] = c.Val()
	}
	return out, nil
}

// fetch reads the keys of type want with read, in one pipeline, after
// asking each key's type (so that no command meets a key of another type);
// other is called for each key of another type (not for a key gone since).
// The answer is aligned with keys, nil where nothing was read.
func (s *redisSource) fetch(ctx context.Context, keys []string, want string, read func(ctx context.Context, p redis.Pipeliner, key string) redis.Cmder, other func(key, typ string)) ([]redis.Cmder, error) {
	types, err := s.types(ctx, keys)
	if err != nil {
		return nil, err
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]redis.Cmder, len(keys))
	for i, k := range keys {
		switch types[i] {
		case want:
			cmds[i] = read(ctx, pipe, k)
		case "none":
		default:
			other(k, types[i])
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redis %s: read %ss: %w", s.display, want, err)
	}
	return cmds, nil
}

func hgetall(ctx context.Context, p redis.Pipeliner, key string) redis.Cmder {
	return p.HGetAll(ctx, key)
}

func smembers(ctx context.Context, p redis.Pipeliner, key string) redis.Cmder {
	return p.SMembers(ctx, key)
}

// classify notes a key outside the layout's records and reports whether
// it is one of them.
func (s *redisSource) classify(key string) bool {
	switch {
	case key == redisSchemaKey:
		s.rep.skip(skipSchema, key)
	case key == redisIndexKey:
		s.rep.skip(skipDerived, key)
	case slices.Contains(redisStreams, key):
		s.rep.skip(skipEvents, key)
	default:
		return true
	}
	return false
}

// ---- the hash layout (seed 000)

// readHash imports file:<hashId> hashes: the first pass reads each hash's
// content ids (cid_<alg> and cids/<cid> fields; the hashId itself names
// its record), the second reads each hash whole and makes its claims.
// The cursor is the second pass's SCAN cursor.
func (s *redisSource) readHash(ctx context.Context, cursor string, emit func(*importBatch) error) error {
	start, err := strconv.ParseUint(cursor, 10, 64)
	if cursor != "" && err != nil {
		return fmt.Errorf("import state: cursor %q of the hash layout: %w", cursor, err)
	}
	if err := s.indexHashes(ctx); err != nil {
		return err
	}
	return s.scanAll(ctx, start, "file:*", 256, func(keys []string, next uint64) error {
		b := &importBatch{cursor: strconv.FormatUint(next, 10)}
		if err := s.hashBatch(ctx, keys, b); err != nil {
			return err
		}
		return emit(b)
	})
}

// indexHashes is the hash layout's first pass over every key.
func (s *redisSource) indexHashes(ctx context.Context) error {
	return s.scanAll(ctx, 0, "", redisScanCount, func(keys []string, _ uint64) error {
		var hashes []string
		for _, k := range keys {
			if !s.classify(k) {
				continue
			}
			id, ok := strings.CutPrefix(k, "file:")
			if !ok || id == "" || strings.Contains(id, "/") {
				s.rep.bad(badNoLayout, printable(k))
				continue
			}
			hashes = append(hashes, k)
		}
		cmds, err := s.fetch(ctx, hashes, "hash", hgetall, func(string, string) {}) // not hashes: the second pass says so
		if err != nil {
			return err
		}
		for i, c := range cmds {
			if c != nil {
				s.units.Add(1)
				s.hashAliases(strings.TrimPrefix(hashes[i], "file:"), c.(*redis.MapStringStringCmd).Val(), nil)
			}
		}
		return nil
	})
}

// hashAliases gathers a hash's content ids into the alias index (rep nil:
// the first pass, which only learns) or returns them (the second pass,
// which reports what it cannot read).
func (s *redisSource) hashAliases(id string, fields map[string]string, rep *importReport) []string {
	var cids []string
	if c, err := legacyCID("", id); err == nil {
		cids = append(cids, c)
		s.aliases.own(c, id)
	}
	for k, v := range fields {
		if !aliasKey(k) {
			continue
		}
		found, bad := fieldCIDs(k, v)
		for _, err := range bad {
			if rep != nil {
				rep.notCarried(ncBadAlias, fmt.Sprintf("%s %s: %v", printable(id), printable(k), err))
			}
		}
		for _, c := range found {
			cids = append(cids, c)
			s.aliases.list(c, id)
		}
	}
	return cids
}

// hashBatch reads the hashes among keys and turns each into claims.
func (s *redisSource) hashBatch(ctx context.Context, keys []string, b *importBatch) error {
	var ids []string
	for _, k := range keys {
		id, _ := strings.CutPrefix(k, "file:")
		if k != redisIndexKey && id != "" && !strings.Contains(id, "/") {
			ids = append(ids, k)
		}
	}
	cmds, err := s.fetch(ctx, ids, "hash", hgetall, func(k, typ string) {
		s.rep.bad(badNotAHash, fmt.Sprintf("%s (a %s)", printable(k), typ))
	})
	if err != nil {
		return err
	}
	for i, c := range cmds {
		if c != nil {
			b.units++
			s.hashRecord(strings.TrimPrefix(ids[i], "file:"), c.(*redis.MapStringStringCmd).Val(), b)
		}
	}
	return nil
}

// hashRecord makes the claims of one hash.
func (s *redisSource) hashRecord(id string, fields map[string]string, b *importBatch) {
	s.rep.Records++
	cids := s.aliases.keep(id, s.hashAliases(id, fields, s.rep), s.rep)
	p := primary(cids)
	if p == "" {
		s.rep.notCarried(ncNoContentID, fmt.Sprintf("%s (%d fields)", printable(id), len(fields)))
		return
	}
	rec := &legacyRec{name: id, cid: p}
	for _, c := range cids {
		if c != p {
			rec.link(b, c)
			s.rep.Links++
		}
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s.m.field(rec, k, fields[k], b)
	}
}

// ---- the flat layout (seed 001)

// flatCursor prefixes the flat layout's cursor: the index, in rid order,
// of the next record to import.
const flatCursor = "records:"

// readFlat imports the flat layout: the first pass reads every key's name
// (each record's fields), the cid: index and the records' cids (the alias
// index); then each record is read whole, in rid order, and makes its
// links and fields in one batch, so that the node writes a record's
// claims together (SCAN's order would scatter them over every record).
func (s *redisSource) readFlat(ctx context.Context, cursor string, batch int, emit func(*importBatch) error) error {
	from := uint64(0)
	if cursor != "" {
		n, err := strconv.ParseUint(strings.TrimPrefix(cursor, flatCursor), 10, 64)
		if err != nil || !strings.HasPrefix(cursor, flatCursor) {
			return fmt.Errorf("import state: cursor %q of the flat layout: want %sN", cursor, flatCursor)
		}
		from = n
	}
	if err := s.indexFlat(ctx); err != nil {
		return err
	}
	return s.flatRecords(ctx, s.resolveFlat(), int(min(from, uint64(math.MaxInt32))), batch, emit)
}

// indexFlat is the flat layout's first pass: every key's name, the cid:
// index, each record's cids set and cids/<cid> members.
func (s *redisSource) indexFlat(ctx context.Context) error {
	s.flat = map[string]*flatRec{}
	return s.scanAll(ctx, 0, "", redisScanCount, func(keys []string, _ uint64) error {
		var aliasKeys, setKeys []string
		for _, k := range keys {
			if !s.classify(k) {
				continue
			}
			if c, ok := strings.CutPrefix(k, "cid:"); ok && c != "" {
				aliasKeys = append(aliasKeys, k)
				continue
			}
			rid, field, ok := flatKey(k)
			if !ok {
				s.rep.bad(badNoLayout, printable(k))
				continue
			}
			r := s.flatRecord(rid)
			r.keys++
			s.units.Add(1)
			switch {
			case field == "cids":
				setKeys = append(setKeys, k)
			case strings.HasPrefix(field, store.LinkPrefix):
				r.cids = s.flatAlias(r.cids, rid, k, "", strings.TrimPrefix(field, store.LinkPrefix), false)
			default:
				r.fields = append(r.fields, field)
			}
		}
		if err := s.flatIndex(ctx, aliasKeys); err != nil {
			return err
		}
		return s.flatSets(ctx, setKeys)
	})
}

// flatKey splits file:<rid>/<field>.
func flatKey(k string) (rid, field string, ok bool) {
	rest, ok := strings.CutPrefix(k, "file:")
	if !ok {
		return "", "", false
	}
	rid, field, ok = strings.Cut(rest, "/")
	return rid, field, ok && rid != "" && field != ""
}

// flatRecord returns the record of rid, made the first time. A root that
// is a content id itself (records rooted at a bare cid) lists it.
func (s *redisSource) flatRecord(rid string) *flatRec {
	r := s.flat[rid]
	if r == nil {
		r = &flatRec{}
		if c, err := legacyCID("", rid); err == nil {
			r.cids = append(r.cids, c)
			s.aliases.list(c, rid)
		}
		s.flat[rid] = r
	}
	return r
}

// flatAlias adds one content id of a record (token "<alg>:<value>" or a
// bare cid), owned when the cid: index names it.
func (s *redisSource) flatAlias(cids []string, rid, where, alg, v string, owned bool) []string {
	c, err := legacyCID(alg, v)
	if err != nil {
		s.rep.notCarried(ncBadAlias, fmt.Sprintf("%s: %v", printable(where), err))
		return cids
	}
	if owned {
		s.aliases.own(c, rid)
	} else {
		s.aliases.list(c, rid)
	}
	return append(cids, c)
}

// flatIndex reads cid:<cid> (or cid:<alg>:<value>) → rid keys.
func (s *redisSource) flatIndex(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return fmt.Errorf("redis %s: mget: %w", s.display, err)
	}
	for i, v := range vals {
		rid, ok := v.(string)
		if !ok {
			s.rep.bad(badWrongType, printable(keys[i])+": not a string")
			continue
		}
		if rid == "" || strings.Contains(rid, "/") {
			s.rep.bad(badNoLayout, fmt.Sprintf("%s → %q", printable(keys[i]), rid))
			continue
		}
		r := s.flatRecord(rid)
		r.cids = s.flatAlias(r.cids, rid, keys[i], "", strings.TrimPrefix(keys[i], "cid:"), true)
	}
	return nil
}

// flatSets reads file:<rid>/cids sets of "<alg>:<value>" tokens.
func (s *redisSource) flatSets(ctx context.Context, keys []string) error {
	cmds, err := s.fetch(ctx, keys, "set", smembers, func(k, typ string) {
		s.rep.bad(badWrongType, fmt.Sprintf("%s: a %s, not a set", printable(k), typ))
	})
	if err != nil {
		return err
	}
	for i, c := range cmds {
		if c == nil {
			continue
		}
		rid, _, _ := flatKey(keys[i])
		r := s.flatRecord(rid)
		for _, tok := range c.(*redis.StringSliceCmd).Val() {
			r.cids = s.flatAlias(r.cids, rid, keys[i]+" "+tok, "", tok, false)
		}
	}
	return nil
}

// resolveFlat settles each record's content ids and primary cid, and
// returns the rids of the records that have one, sorted.
func (s *redisSource) resolveFlat() []string {
	for rid, r := range s.flat {
		if r.keys == 0 { // the old core answered 404 for such a cid
			s.rep.skip(skipDangling, printable(rid))
			s.aliases.gone[rid] = true
			delete(s.flat, rid)
		}
	}
	rids := make([]string, 0, len(s.flat))
	for rid, r := range s.flat {
		slices.Sort(r.fields)
		cids := s.aliases.keep(rid, r.cids, s.rep)
		r.rec = legacyRec{name: rid, cid: primary(cids)}
		r.cids = cids
		if store.IsRID(rid) {
			r.rec.rid = rid
		}
		if r.rec.cid == "" {
			s.rep.notCarried(ncNoContentID, printable(rid))
			continue
		}
		if r.rec.rid != "" {
			s.rep.RIDsNamed++
		}
		rids = append(rids, rid)
	}
	slices.Sort(rids)
	s.rep.Records = int64(len(s.flat))
	return rids
}

// flatRecords emits the records from the from-th on, whole: a batch holds
// whole records, and its cursor is the index of the record after them.
func (s *redisSource) flatRecords(ctx context.Context, rids []string, from, batch int, emit func(*importBatch) error) error {
	b := &importBatch{}
	var keys []string
	for i := from; i < len(rids); i++ {
		r := s.flat[rids[i]]
		for _, c := range r.cids {
			if c != r.rec.cid {
				r.rec.link(b, c)
				s.rep.Links++
			}
		}
		for _, f := range r.fields {
			keys = append(keys, "file:"+rids[i]+"/"+f)
		}
		b.units += int64(r.keys)
		if b.size()+len(keys) < batch && i < len(rids)-1 {
			continue
		}
		if err := s.flatFields(ctx, keys, b); err != nil {
			return err
		}
		b.cursor = flatCursor + strconv.Itoa(i+1)
		if err := emit(b); err != nil {
			return err
		}
		b, keys = &importBatch{}, keys[:0]
	}
	return nil
}

// flatFields reads field keys into b: strings with MGET (pipelined, a
// thousand keys each), then the few other types by what they are.
func (s *redisSource) flatFields(ctx context.Context, keys []string, b *importBatch) error {
	if len(keys) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	var cmds []*redis.SliceCmd
	for lo := 0; lo < len(keys); lo += redisScanCount {
		cmds = append(cmds, pipe.MGet(ctx, keys[lo:min(lo+redisScanCount, len(keys))]...))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("redis %s: mget: %w", s.display, err)
	}
	var others []string
	for c, cmd := range cmds {
		for i, v := range cmd.Val() {
			k := keys[c*redisScanCount+i]
			str, ok := v.(string)
			if !ok { // not a string, or gone since
				others = append(others, k)
				continue
			}
			if r := s.fieldRec(k); r != nil {
				_, field, _ := flatKey(k)
				s.m.field(&r.rec, field, str, b)
			}
		}
	}
	return s.flatTyped(ctx, others, b)
}

// fieldRec is the record of a field key, nil when it has no content id
// (reported once, by resolveFlat) or appeared after the first pass.
func (s *redisSource) fieldRec(key string) *flatRec {
	rid, _, _ := flatKey(key)
	r := s.flat[rid]
	if r == nil || r.rec.cid == "" {
		return nil
	}
	return r
}

// flatTyped reads field keys that are not strings: a set is a
// multi-valued membership (key-set members key/<member>), a list an array
// (key/<i>), a hash an object (key/<field>).
func (s *redisSource) flatTyped(ctx context.Context, keys []string, b *importBatch) error {
	types, err := s.types(ctx, keys)
	if err != nil {
		return err
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]redis.Cmder, len(keys))
	for i, k := range keys {
		switch types[i] {
		case "set":
			cmds[i] = pipe.SMembers(ctx, k)
		case "list":
			cmds[i] = pipe.LRange(ctx, k, 0, -1)
		case "hash":
			cmds[i] = pipe.HGetAll(ctx, k)
		case "none":
		default:
			s.rep.notCarried(ncType, fmt.Sprintf("%s (a %s)", printable(k), types[i]))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("redis %s: read: %w", s.display, err)
	}
	for i, c := range cmds {
		r := s.fieldRec(keys[i])
		if c == nil || r == nil {
			continue
		}
		_, field, _ := flatKey(keys[i])
		s.flatValue(&r.rec, field, types[i], c, b)
	}
	return nil
}

// flatValue maps one set, list or hash value (typ) of a record's field.
func (s *redisSource) flatValue(rec *legacyRec, field, typ string, c redis.Cmder, b *importBatch) {
	switch {
	case typ == "list":
		for i, v := range c.(*redis.StringSliceCmd).Val() {
			s.m.field(rec, field+"/"+strconv.Itoa(i), v, b)
		}
	case typ == "hash":
		m := c.(*redis.MapStringStringCmd).Val()
		for _, k := range slices.Sorted(maps.Keys(m)) {
			s.m.field(rec, field+"/"+k, m[k], b)
		}
	case field == duplicatesKey || field == fieldIndexKey:
		s.m.field(rec, field, "", b) // box-local, derived
	default: // a set
		members := c.(*redis.StringSliceCmd).Val()
		slices.Sort(members)
		for _, m := range members {
			s.m.member(rec, field, m, b)
		}
	}
}
