package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// importReport is what an import did, or with --dry-run would do; the
// command prints it as JSON on stdout when it ends. The tallies are noted
// under mu from any goroutine; the counters Records to Signers belong to
// the source's goroutine and Stored and Rejected to the one that stores,
// and are read once both have ended.
type importReport struct {
	mu sync.Mutex

	Source string `json:"source"`
	Layout string `json:"layout"`
	Into   string `json:"into"` // the data directory, the node's API, or nothing (dry run)
	DryRun bool   `json:"dryRun,omitempty"`
	// ImportKey signs every legacy value: 'metanode trust rm' of it takes
	// back everything imported with it, here and at the homes that trust
	// this node.
	ImportKey string `json:"importKey,omitempty"`
	// SessionTS is the timestamp of every claim signed for this source:
	// the same at each run, so importing again signs the same claims.
	SessionTS uint64 `json:"sessionTs,omitempty"`
	Resumed   bool   `json:"resumed,omitempty"` // this run went on from where an interrupted one stopped
	Complete  bool   `json:"complete"`

	Records   int64    `json:"records"`              // records read
	RIDsNamed int64    `json:"ridsNamed"`            // records whose rid was offered to the node (kept where the node had no record)
	Fields    int64    `json:"fields"`               // field values signed with the import key
	Links     int64    `json:"links"`                // content ids linked into their record (cids/<cid> claims)
	Claims    int64    `json:"claims,omitempty"`     // signed claims taken as they are (a v2 truth)
	Signers   []string `json:"signers,omitempty"`    // their signers
	Stored    outcomes `json:"stored"`               // what the node answered
	Rejected  tallies  `json:"rejected,omitempty"`   // claims the node refused, by error
	BadInput  tallies  `json:"badInput,omitempty"`   // input the layouts do not allow; the rest is imported
	NotCarry  tallies  `json:"notCarried,omitempty"` // values a claim cannot hold, and why
	Skipped   tallies  `json:"skipped,omitempty"`    // what is not metadata (derived, events, scratch)
	Seconds   float64  `json:"seconds"`
	PerSecond float64  `json:"claimsPerSecond"`
}

// outcomes counts the node's answers.
type outcomes struct {
	Accepted  int64 `json:"accepted"`
	Unchanged int64 `json:"unchanged"`
	Stale     int64 `json:"stale"`
	Rejected  int64 `json:"rejected"`
}

// tally is one reason: why, how often, and the first few cases by name.
type tally struct {
	Why      string   `json:"why"`
	Count    int64    `json:"count"`
	Examples []string `json:"examples"`
}

type tallies map[string]*tally

// maxExamples bounds the names a tally keeps.
const maxExamples = 10

func (t *tallies) note(reason, why, example string) {
	if *t == nil {
		*t = tallies{}
	}
	e := (*t)[reason]
	if e == nil {
		e = &tally{Why: why, Examples: []string{}}
		(*t)[reason] = e
	}
	e.Count++
	if len(e.Examples) < maxExamples && example != "" {
		e.Examples = append(e.Examples, example)
	}
}

// example adds a case to a reason without counting it again (the same
// bad input met by another pass).
func (t tallies) example(reason, ex string) {
	if e := t[reason]; e != nil && len(e.Examples) < maxExamples {
		e.Examples = append(e.Examples, ex)
	}
}

// Reasons. The keys are stable (scripts read them); each says why.
const (
	badNoLayout      = "no-layout"
	badNotUTF8       = "not-utf8"
	badNotAHash      = "not-a-hash"
	badWrongType     = "wrong-type"
	badAliasConflict = "alias-conflict"
	badDamaged       = "damaged"
	badLayoutRow     = "bad-row"

	ncBoxLocal    = "box-local"
	ncTooLarge    = "too-large"
	ncBadKey      = "bad-key"
	ncNoContentID = "no-content-id"
	ncBadAlias    = "bad-alias"
	ncType        = "unsupported-type"
	ncUDL         = "user-data"

	skipDerived  = "derived"
	skipEvents   = "events"
	skipScratch  = "scratch"
	skipSchema   = "schema-version"
	skipDangling = "dangling-alias"
)

var reasonWhy = map[string]string{
	badNoLayout:      "a key that matches no part of the layout: not imported",
	badNotUTF8:       "a key or value that is not UTF-8 text: claims hold text",
	badNotAHash:      "a record key of the hash layout that is not a hash",
	badWrongType:     "a key whose Redis type is not the one the layout gives it",
	badAliasConflict: "a content id that two records claim: linking it would join them",
	badDamaged:       "a part of the file SQLite cannot read (damaged or cut short): its rows are not imported",
	badLayoutRow:     "a row that does not have the layout's shape",

	ncBoxLocal:    "this box's file facts (filePath, mtimeNano, duplicate paths): the file watcher derives them from the files root",
	ncTooLarge:    "a value over 65,536 bytes: claims hold at most that",
	ncBadKey:      "a key a claim cannot hold (claims.md: no empty, '.' or '..' segment, no control character, at most 1,024 bytes)",
	ncNoContentID: "a record with no content id: a claim is about a cid",
	ncBadAlias:    "an alias that is not a content id",
	ncType:        "a value of a type no field holds (sorted set, stream)",
	ncUDL:         "user data layer cells, signed by their accounts' keys in a format the node does not read",

	skipDerived:  "derived data the node computes itself (indexes, counters, canonical_cid)",
	skipEvents:   "event streams: consumers take a snapshot of the node instead",
	skipScratch:  "services' scratch keys: caches the services fill again, not metadata",
	skipSchema:   "the layout's schema-version key",
	skipDangling: "cid: keys naming a record that has no keys left (the old core answered 404 for them)",
}

func (r *importReport) bad(reason, example string) {
	r.mu.Lock()
	r.BadInput.note(reason, reasonWhy[reason], example)
	r.mu.Unlock()
}

func (r *importReport) notCarried(reason, example string) {
	r.mu.Lock()
	r.NotCarry.note(reason, reasonWhy[reason], example)
	r.mu.Unlock()
}

func (r *importReport) skip(reason, example string) {
	r.mu.Lock()
	r.Skipped.note(reason, reasonWhy[reason], example)
	r.mu.Unlock()
}

// count adds to the report's counters under its lock.
func (r *importReport) count(f func(*importReport)) {
	r.mu.Lock()
	f(r)
	r.mu.Unlock()
}

// signer adds a v2 claim's signer to the list, once.
func (r *importReport) signer(uid string) {
	r.mu.Lock()
	if !slices.Contains(r.Signers, uid) {
		r.Signers = append(r.Signers, uid)
	}
	r.mu.Unlock()
}

// problems is how many inputs were not imported as read: the command
// mentions them on stderr.
func (r *importReport) problems() (bad, notCarried int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.BadInput {
		bad += t.Count
	}
	for _, t := range r.NotCarry {
		notCarried += t.Count
	}
	return bad, notCarried
}

// progress prints the import's progress on stderr every few seconds:
// counts, the rate and what is left.
type progress struct {
	w      io.Writer
	unit   string
	total  func() int64 // source units in all; 0 when unknown (asked at each line: known once reading began)
	every  time.Duration
	start  time.Time
	last   time.Time
	units  int64
	claims int64
	now    func() time.Time
}

func newProgress(w io.Writer, unit string, total func() int64, now func() time.Time) *progress {
	t := now()
	return &progress{w: w, unit: unit, total: total, every: 2 * time.Second, start: t, last: t, now: now}
}

// add counts a stored batch and prints a line when it is time.
func (p *progress) add(units, claims int64) {
	p.units += units
	p.claims += claims
	if t := p.now(); t.Sub(p.last) >= p.every {
		p.last = t
		fmt.Fprintln(p.w, "metanode import: "+p.line(t))
	}
}

func (p *progress) line(t time.Time) string {
	secs := t.Sub(p.start).Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(p.claims) / secs
	}
	var b strings.Builder
	total := p.total()
	if total > 0 {
		done := min(p.units, total)
		fmt.Fprintf(&b, "%d%% (%s of %s %s), ", done*100/total, group(done), group(total), p.unit)
	} else {
		fmt.Fprintf(&b, "%s %s, ", group(p.units), p.unit)
	}
	fmt.Fprintf(&b, "%s claims, %s claims/s", group(p.claims), group(int64(rate)))
	if total > 0 && p.units > 0 && p.units < total {
		left := time.Duration(secs * float64(total-p.units) / float64(p.units) * float64(time.Second))
		fmt.Fprintf(&b, ", about %s left", left.Round(time.Second))
	}
	return b.String()
}

// group writes n with thousands separators: 1,234,567.
func group(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + group(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
