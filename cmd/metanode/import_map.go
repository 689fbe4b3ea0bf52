package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	gocid "github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"

	"github.com/metanode/metanode/store"
)

// importItem is one legacy value to sign with the import key: the text
// claim (cid, key) = value.
type importItem struct{ cid, key, value string }

// importBatch is what a source hands the importer at a time.
type importBatch struct {
	items  []importItem      // legacy values, signed with the import key
	signed []store.Claim     // items, signed (the importer's sign stage)
	claims []store.Claim     // signed claims taken as they are (a v2 truth)
	rids   map[string]string // cid → the rid its record keeps, for records new to the node
	// cursor is where a later run resumes once this batch is stored ("":
	// from the start).
	cursor string
	units  int64 // source units read (keys, rows), for progress
}

func (b *importBatch) size() int { return len(b.items) + len(b.claims) }

// legacyRec is one record of a legacy layout as its claims need it.
type legacyRec struct {
	name string // how the report names it: its hashId or rid
	cid  string // the cid every claim of the record is about
	rid  string // the layout's rid, kept for a record new to the node ("" none)
}

// add appends the text claim (rec's cid, key) = value.
func (r *legacyRec) add(b *importBatch, key, value string) {
	b.items = append(b.items, importItem{r.cid, key, value})
	if r.rid != "" {
		if b.rids == nil {
			b.rids = make(map[string]string)
		}
		b.rids[r.cid] = r.rid
	}
}

// link appends the record's link to another of its cids: the alias joins
// the record's group (a cids set becomes key-set members).
func (r *legacyRec) link(b *importBatch, other string) {
	r.add(b, store.LinkPrefix+other, "true")
}

// Keys of the legacy layouts that are not fields of a record.
const (
	fieldIndexKey = "__fields__" // a record's field-name index (flat layout): derived
	duplicatesKey = "duplicates" // other local paths of the same content: box-local
	canonicalKey  = "canonical_cid"
)

// aliasKey reports whether a legacy field names one of the record's
// content ids rather than a value: cid_<alg>, midhash256, cids (a set of
// tokens) and cids/<cid> (a key-set member). Claims refuse these keys; the
// ids become links of the record.
func aliasKey(key string) bool {
	return strings.HasPrefix(key, "cid_") || key == "midhash256" || key == "cids" || strings.HasPrefix(key, store.LinkPrefix)
}

// fieldCIDs returns the content ids an alias field names (cids/<cid>, a
// key-set member; cid_<alg> and midhash256; cids, a list in one string:
// aliasKey), with an error for each part that is not a content id.
func fieldCIDs(key, value string) (cids []string, bad []error) {
	var toks [][2]string // (algorithm, value)
	switch {
	case strings.HasPrefix(key, store.LinkPrefix):
		toks = append(toks, [2]string{"", strings.TrimPrefix(key, store.LinkPrefix)})
	case strings.HasPrefix(key, "cid_"):
		toks = append(toks, [2]string{strings.TrimPrefix(key, "cid_"), value})
	case key == "midhash256":
		toks = append(toks, [2]string{key, value})
	case key == "cids":
		for _, t := range cidTokens(value) {
			toks = append(toks, [2]string{"", t})
		}
	}
	for _, t := range toks {
		c, err := legacyCID(t[0], t[1])
		if err != nil {
			bad = append(bad, err)
			continue
		}
		cids = append(cids, c)
	}
	return cids, bad
}

// cidTokens splits a list of content ids held in one string: a JSON array,
// else separated by commas or white space.
func cidTokens(v string) []string {
	var arr []string
	if json.Unmarshal([]byte(v), &arr) == nil {
		return arr
	}
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

// hexAlgs are the token algorithms whose hex digests make a cid (CIDv1,
// raw codec), as the legacy full-hash plugin wrote them (cid_sha2-256 =
// "bafkrei…").
var hexAlgs = map[string]struct {
	code uint64
	size int
}{
	"sha256": {mh.SHA2_256, 32}, "sha2-256": {mh.SHA2_256, 32},
	"sha1": {mh.SHA1, 20}, "md5": {mh.MD5, 16},
}

// legacyCID turns a legacy content id into a claim's cid: any CID in its
// canonical string form, a token "<alg>:<value>" (the older flat layout)
// or a hex digest of a known algorithm.
func legacyCID(alg, v string) (string, error) {
	if a, rest, ok := strings.Cut(v, ":"); ok && alg == "" {
		alg, v = a, rest
	}
	v = strings.TrimSpace(v)
	if c, err := gocid.Decode(v); err == nil {
		if s := c.String(); store.CheckCID(s) == nil {
			return s, nil
		}
	}
	if h, ok := hexAlgs[strings.ToLower(alg)]; ok {
		if d, err := hex.DecodeString(v); err == nil && len(d) == h.size {
			m, err := mh.Encode(d, h.code)
			if err == nil {
				return gocid.NewCidV1(gocid.Raw, m).String(), nil
			}
		}
	}
	return "", fmt.Errorf("%q is not a content id", truncate(v, 80))
}

// aliasIndex decides which record each legacy content id belongs to. The
// layout's own index (a cid:… key, a hash's own id) names the owner;
// otherwise a cid that one record lists is that record's, and a cid that
// several records list belongs to none of them: linking it would join
// records the old core kept apart.
type aliasIndex struct {
	owner  map[string]string   // cid → the record the layout's index names
	lister map[string]string   // cid → the first record listing it
	more   map[string][]string // cid → every record listing it, once two do
	told   map[string]bool     // conflicts already in the report
	gone   map[string]bool     // records the index names that have no keys: owners of nothing
}

func newAliasIndex() *aliasIndex {
	return &aliasIndex{owner: map[string]string{}, lister: map[string]string{}, more: map[string][]string{},
		told: map[string]bool{}, gone: map[string]bool{}}
}

// own records that the layout's index names rec as cid's record.
func (a *aliasIndex) own(cid, rec string) { a.owner[cid] = rec }

// list records that rec lists cid among its ids.
func (a *aliasIndex) list(cid, rec string) {
	first, seen := a.lister[cid]
	switch {
	case !seen:
		a.lister[cid] = rec
	case first == rec:
	default:
		if l := a.more[cid]; l == nil {
			a.more[cid] = []string{first, rec}
		} else if !slices.Contains(l, rec) {
			a.more[cid] = append(l, rec)
		}
	}
}

// keep returns the cids of rec it may link (sorted, once each), noting
// each conflict in the report the first time it meets it.
func (a *aliasIndex) keep(rec string, cids []string, rep *importReport) []string {
	var out []string
	for _, c := range cids {
		if slices.Contains(out, c) {
			continue
		}
		if o, ok := a.owner[c]; ok && o != rec && !a.gone[o] {
			a.tell(c, rep, fmt.Sprintf("%s: the index names record %s; record %s lists it too (linked to %s only)", c, o, rec, o))
			continue
		}
		if l := a.more[c]; l != nil && a.owner[c] != rec {
			a.tell(c, rep, fmt.Sprintf("%s: listed by records %s (linked to none: it would join them)", c, strings.Join(l, ", ")))
			continue
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

func (a *aliasIndex) tell(cid string, rep *importReport, msg string) {
	if !a.told[cid] {
		a.told[cid] = true
		rep.bad(badAliasConflict, msg)
	}
}

// primary picks the cid a record's claims are about: the best by the
// canonical-cid rank (any of them would do: the links put all of them in
// one group).
func primary(cids []string) string { return store.CanonicalCID(cids) }

// mapper turns a legacy record's fields into claims, noting in the report
// what it cannot carry and why.
type mapper struct {
	rep *importReport
}

// field maps one legacy (key, value) of rec onto b.
func (m *mapper) field(rec *legacyRec, key, value string, b *importBatch) {
	where := rec.name + " " + key
	switch {
	case key == fieldIndexKey || key == canonicalKey:
		m.rep.skip(skipDerived, where)
		return
	case aliasKey(key): // linked from the alias index
		return
	case key == duplicatesKey || (store.IsLocalKey(key) && key != "sizeByte"):
		m.rep.notCarried(ncBoxLocal, where)
		return
	case !utf8.ValidString(key) || !utf8.ValidString(value):
		m.rep.bad(badNotUTF8, printable(where))
		return
	case len(value) > store.MaxValueBytes:
		m.rep.notCarried(ncTooLarge, fmt.Sprintf("%s (%d bytes)", where, len(value)))
		return
	}
	if err := store.CheckKey(key); err != nil {
		m.rep.notCarried(ncBadKey, fmt.Sprintf("%s: %v", where, err))
		return
	}
	rec.add(b, key, value)
	m.rep.Fields++
}

// member maps one member of a set value (a multi-valued membership) as a
// key-set member: key/<member> = "true".
func (m *mapper) member(rec *legacyRec, key, member string, b *importBatch) {
	if strings.Contains(member, "/") {
		m.rep.notCarried(ncBadKey, fmt.Sprintf("%s %s: set member %q holds a '/'", rec.name, key, truncate(member, 80)))
		return
	}
	m.field(rec, key+"/"+member, "true", b)
}

// errNoContentID: a record with no content id has nothing a claim could be
// about.
var errNoContentID = errors.New("no content id")

// printable quotes a name that holds bytes that are not UTF-8.
func printable(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return fmt.Sprintf("%q", s)
}

// truncate shortens s for a message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
