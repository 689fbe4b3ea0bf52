package store

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// The exact matchers of a search (docs/store.md "Search"): what a record
// must satisfy, whatever the indexes narrowed. Tokens are compared with
// strings.ToLower, keys with strings.EqualFold.

// tokenize splits a query into lower-cased whitespace tokens.
func tokenize(q string) []string { return strings.Fields(strings.ToLower(q)) }

// lowerer lower-cases as strings.ToLower does, into a buffer it reuses
// for ASCII text (a scan lowers every row it reads).
type lowerer struct{ buf []byte }

func (l *lowerer) lower(s string) string {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return strings.ToLower(s)
		}
	}
	l.buf = append(l.buf[:0], s...)
	for i, c := range l.buf {
		if 'A' <= c && c <= 'Z' {
			l.buf[i] = c + 'a' - 'A'
		}
	}
	return unsafe.String(unsafe.SliceData(l.buf), len(l.buf)) // valid until the next call
}

// hayMatches: every token is a substring of the lower-cased haystack.
func (l *lowerer) hayMatches(hay string, tokens []string) bool {
	if len(tokens) == 0 {
		return true
	}
	h := l.lower(hay)
	for _, t := range tokens {
		if !strings.Contains(h, t) {
			return false
		}
	}
	return true
}

// matchTokens: every token is a case-insensitive substring of the record's
// haystack (its search row holds the same text).
func matchTokens(rid string, fields map[string]string, tokens []string) bool {
	var l lowerer
	return l.hayMatches(haystack(rid, fields), tokens)
}

func truthy(v string) bool { return v != "" && v != "false" && v != "0" }

// activeFilters drops the filters that constrain nothing (no property or
// no values).
func activeFilters(fs []SearchFilter) []SearchFilter {
	var out []SearchFilter
	for _, f := range fs {
		if len(f.Values) > 0 && f.Property != "" {
			out = append(out, f)
		}
	}
	return out
}

// matchFilters: filters AND together, a filter's values OR. A value
// matches a truthy key-set member property/value (compared without case,
// same length in bytes) or the flat property's value, split at commas:
// equal without case when exact, else containing it.
func matchFilters(fields map[string]string, filters []SearchFilter) bool {
	for _, f := range activeFilters(filters) {
		if !slices.ContainsFunc(f.Values, func(v string) bool { return matchValue(fields, f, v) }) {
			return false
		}
	}
	return true
}

func matchValue(fields map[string]string, f SearchFilter, v string) bool {
	member := f.Property + "/" + v
	if fv, ok := fields[member]; ok && truthy(fv) {
		return true
	}
	for k, fv := range fields {
		if len(k) == len(member) && strings.EqualFold(k, member) && truthy(fv) {
			return true
		}
	}
	flat, ok := flatValue(fields, f.Property)
	var l lowerer
	return ok && l.flatMatches(flat, []string{flatNeedle(v)}, f.Exact)
}

// flatValue is the value of a record's flat property: the field named
// exactly so, else the smallest (in byte order) of the fields equal to it
// without case.
func flatValue(fields map[string]string, prop string) (string, bool) {
	if v, ok := fields[prop]; ok {
		return v, true
	}
	best, val, found := "", "", false
	for k, v := range fields {
		if strings.EqualFold(k, prop) && (!found || k < best) {
			best, val, found = k, v, true
		}
	}
	return val, found
}

// betterFlat reports whether field k is a better flat field for prop than
// cur (the one chosen so far): flatValue's order.
func betterFlat(k, cur, prop string) bool {
	switch {
	case cur == prop:
		return false
	case k == prop:
		return true
	}
	return k < cur
}

// flatNeedle is a filter value as the flat arm compares it.
func flatNeedle(v string) string { return strings.ToLower(strings.TrimSpace(v)) }

// flatMatches: a comma-separated part of flat, trimmed and lower-cased,
// equals (exact) or contains one of the needles.
func (l *lowerer) flatMatches(flat string, needles []string, exact bool) bool {
	for part := range strings.SplitSeq(flat, ",") {
		p := l.lower(strings.TrimSpace(part))
		for _, n := range needles {
			if exact && p == n || !exact && strings.Contains(p, n) {
				return true
			}
		}
	}
	return false
}

// foldKey maps s to one representative of its strings.EqualFold class:
// each rune becomes the smallest rune of its case-folding orbit (an
// invalid byte is U+FFFD, as EqualFold reads it). EqualFold(a, b) holds
// exactly when foldKey(a) == foldKey(b).
func foldKey(s string) string {
	var sb strings.Builder
	sb.Grow(len(s))
	for _, r := range s {
		low := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			low = min(low, f)
		}
		sb.WriteRune(low)
	}
	return sb.String()
}
