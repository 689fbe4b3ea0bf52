package store

import (
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/cases"
)

// row is one stored truth row of a (cid, key): one signer's winning claim.
// val holds the text, or the ciphertext bytes as a string.
type row struct {
	pid  int64
	kind Kind
	val  string
	ts   uint64
	id   ID
}

func (r *row) item() SyncItem { return SyncItem{TS: r.ts, ID: r.id} }

// beats reports whether r wins over o by (ts, id).
func (r *row) beats(o *row) bool {
	return r.item().Compare(o.item()) > 0
}

// homeOf is the merge's view of a signer: whether its votes count
// (trust) and the home they count in (trustView.homeOf). Homes are
// compared by name only.
type homeOf func(pid int64) (home string, counts bool)

// mergeRows computes the merged value of one key (claims.md §5, with the
// home rule of docs/spec/README.md) from every stored row of the key
// across the group's cids, in any order. It returns the exact text of the
// winning bucket's oldest vote and the number of homes in that bucket; ok
// is false when no counted signer has a live text vote.
//
// Each signer counts once: its winning row across the group's cids by
// (ts, id). A signer whose winning row is a retraction or ciphertext drops
// out; its older rows on other cids do not come back. Each home then
// counts once: its signers' votes are merged among themselves by the same
// bucket rule, and the bucket they choose is the home's one vote.
func mergeRows(rows []row, home homeOf) (val string, nsrc int, ok bool) {
	// Fast path: one row, the common case of one signer on one cid.
	if len(rows) == 1 {
		r := &rows[0]
		if r.kind != KindText {
			return "", 0, false
		}
		if _, counts := home(r.pid); !counts {
			return "", 0, false
		}
		return r.val, 1, true
	}
	var vbuf [8]ballot
	var bbuf [8]bucket
	votes := countedVotes(rows, home, vbuf[:0])
	if len(votes) == 0 {
		return "", 0, false
	}
	if !distinctHomes(votes) {
		votes = homeVotes(rows, votes, bbuf[:0])
	}
	w := pick(rows, tally(rows, votes, bbuf[:0]))
	return rows[w.oldest].val, w.n, true
}

// countedVotes appends to out each counted signer's winning row across the
// rows by (ts, id), when it is a text vote. Groups are small; a quadratic
// pass beats a map.
func countedVotes(rows []row, home homeOf, out []ballot) []ballot {
	for i := range rows {
		found := false
		for j := range out {
			if b := &out[j]; rows[b.row].pid == rows[i].pid {
				if rows[i].beats(&rows[b.row]) {
					b.row = i
				}
				found = true
				break
			}
		}
		if !found {
			out = append(out, ballot{row: i})
		}
	}
	n := 0
	for _, b := range out {
		r := &rows[b.row]
		if r.kind != KindText {
			continue
		}
		h, counts := home(r.pid)
		if !counts {
			continue
		}
		out[n] = ballot{home: h, fold: foldValue(r.val), row: b.row}
		n++
	}
	return out[:n]
}

// distinctHomes reports whether every vote comes from another home (the
// usual case: then the votes are the homes' votes as they are).
func distinctHomes(votes []ballot) bool {
	for i := 1; i < len(votes); i++ {
		for j := range i {
			if votes[i].home == votes[j].home {
				return false
			}
		}
	}
	return true
}

// homeVotes replaces the votes of each home by the home's one vote: the
// bucket its signers choose, stood for by that bucket's oldest vote (so
// the stored text is still a real vote's). scratch is reused.
func homeVotes(rows []row, votes []ballot, scratch []bucket) []ballot {
	slices.SortFunc(votes, func(a, b ballot) int { return strings.Compare(a.home, b.home) })
	homes := votes[:0] // in place: a home's vote is written at or before its first
	for lo := 0; lo < len(votes); {
		hi := lo + 1
		for hi < len(votes) && votes[hi].home == votes[lo].home {
			hi++
		}
		if hi-lo == 1 {
			homes = append(homes, votes[lo])
		} else {
			scratch = tally(rows, votes[lo:hi], scratch[:0])
			w := pick(rows, scratch)
			homes = append(homes, ballot{home: votes[lo].home, fold: w.fold, row: w.oldest})
		}
		lo = hi
	}
	return homes
}

// ballot is one counted text vote: a signer's winning row, or a home's.
type ballot struct {
	home string
	fold string // foldValue of the text
	row  int    // index into the rows
}

// bucket is the votes of one folded value.
type bucket struct {
	fold   string
	n      int // votes in it
	oldest int // index into the rows of its oldest vote by (ts, id)
}

// tally buckets votes by folded value into out.
func tally(rows []row, votes []ballot, out []bucket) []bucket {
	for _, v := range votes {
		k := -1
		for j := range out {
			if out[j].fold == v.fold {
				k = j
				break
			}
		}
		if k < 0 {
			out = append(out, bucket{fold: v.fold, n: 1, oldest: v.row})
			continue
		}
		out[k].n++
		if rows[out[k].oldest].beats(&rows[v.row]) {
			out[k].oldest = v.row
		}
	}
	return out
}

// pick returns the winning bucket: the most votes, then the one whose
// oldest vote has the smallest ts, then the bytewise smallest folded value.
func pick(rows []row, buckets []bucket) bucket {
	w := 0
	for j := 1; j < len(buckets); j++ {
		a, b := &buckets[j], &buckets[w]
		switch {
		case a.n != b.n:
			if a.n > b.n {
				w = j
			}
		case rows[a.oldest].ts != rows[b.oldest].ts:
			// By time alone (claims.md §5, seed 002: "oldest ts"):
			// two votes of one second tie, and the value decides.
			if rows[a.oldest].ts < rows[b.oldest].ts {
				w = j
			}
		case a.fold < b.fold:
			w = j
		}
	}
	return buckets[w]
}

// foldValue is the bucket key of a text vote: trimmed, then full Unicode
// case folding (no normalisation). ASCII takes a fast path: folding ASCII
// letters is lower-casing them.
func foldValue(s string) string {
	s = strings.TrimSpace(s)
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return cases.Fold().String(s) // a Caser is stateful: one per call
		}
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// rowFromValue builds a row from the claim table's value column as the
// driver returns it: TEXT is text, BLOB is ciphertext, NULL a retraction.
func rowFromValue(pid int64, v any, ts int64, id ID) row {
	r := row{pid: pid, ts: uint64(ts), id: id}
	switch x := v.(type) {
	case string:
		r.kind, r.val = KindText, x
	case []byte:
		r.kind, r.val = KindCipher, string(x)
	default:
		r.kind = KindRetraction
	}
	return r
}

// sqlValue is the claim table's value column for a claim.
func sqlValue(c *Claim) any {
	switch c.Kind {
	case KindText:
		return string(c.Value)
	case KindCipher:
		if c.Value == nil {
			return []byte{}
		}
		return c.Value
	}
	return nil
}

// rowOf builds the row a claim becomes.
func rowOf(pid int64, c *Claim, id ID) row {
	r := row{pid: pid, kind: c.Kind, ts: c.TS, id: id}
	if c.Kind != KindRetraction {
		r.val = string(c.Value)
	}
	return r
}

// claimOf rebuilds a claim from a stored row.
func claimOf(uid, cid, key string, r *row, sig []byte) Claim {
	c := Claim{UID: uid, CID: cid, Key: key, Kind: r.kind, TS: r.ts}
	if r.kind != KindRetraction {
		c.Value = []byte(r.val)
	}
	copy(c.Sig[:], sig)
	return c
}
