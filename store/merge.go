package store

import (
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

// mergeRows computes the merged value of one key (claims.md §5) from every
// stored row of the key across the group's cids, in any order. counts says
// whether a signer's vote counts (trust). It returns the exact text of the
// winning bucket's oldest vote and the bucket's signer count; ok is false
// when no counted signer has a live text vote.
//
// Each signer counts once: its winning row across the group's cids by
// (ts, id). A signer whose winning row is a retraction or ciphertext drops
// out; its older rows on other cids do not come back.
func mergeRows(rows []row, counts func(pid int64) bool) (val string, nsrc int, ok bool) {
	// Fast path: one row, the common case of one signer on one cid.
	if len(rows) == 1 {
		r := &rows[0]
		if r.kind != KindText || !counts(r.pid) {
			return "", 0, false
		}
		return r.val, 1, true
	}
	// Winning row per signer. Groups are small; a quadratic pass beats a map.
	best := make([]int, 0, len(rows))
	for i := range rows {
		found := false
		for j, b := range best {
			if rows[b].pid == rows[i].pid {
				if rows[i].beats(&rows[b]) {
					best[j] = i
				}
				found = true
				break
			}
		}
		if !found {
			best = append(best, i)
		}
	}
	type bucket struct {
		fold   string
		n      int
		oldest int // index into rows of the oldest vote by (ts, id)
	}
	var buckets []bucket
	for _, i := range best {
		r := &rows[i]
		if r.kind != KindText || !counts(r.pid) {
			continue
		}
		f := foldValue(r.val)
		k := -1
		for j := range buckets {
			if buckets[j].fold == f {
				k = j
				break
			}
		}
		if k < 0 {
			buckets = append(buckets, bucket{fold: f, n: 1, oldest: i})
			continue
		}
		buckets[k].n++
		if rows[buckets[k].oldest].beats(r) {
			buckets[k].oldest = i
		}
	}
	if len(buckets) == 0 {
		return "", 0, false
	}
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
	return rows[buckets[w].oldest].val, buckets[w].n, true
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
