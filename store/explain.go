package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Why a vote did or did not make a field's merged value (FieldVote.Why).
const (
	WhyWon        = "won"         // its text is the merged value
	WhyAgrees     = "agrees"      // in the winning bucket, not its oldest vote
	WhyOutvoted   = "outvoted"    // its home cast another value, which lost
	WhyHomeChose  = "home-chose"  // its home's other signers chose another value
	WhyUntrusted  = "untrusted"   // its signer does not count (not trusted, or distrusted)
	WhySuperseded = "superseded"  // the signer has a newer claim for the key on another cid
	WhyRetracted  = "retraction"  // the signer withdrew its vote
	WhyCipher     = "ciphertext"  // an encrypted value: never merged
	WhyNoWinner   = "no-value"    // no counted text vote: the field has no merged value
	whyUnknown    = "unexplained" // never returned: a vote the rules above missed
)

// FieldVote is one signer's stored claim on a field of a record, as the
// merge sees it.
type FieldVote struct {
	UID    string `json:"uid"`
	CID    string `json:"cid"`
	Kind   string `json:"kind"`  // text, cipher or retraction
	Value  string `json:"value"` // the text ("" for a retraction or ciphertext)
	TS     uint64 `json:"ts"`
	ID     string `json:"id"`
	Counts bool   `json:"counts"` // its signer counts (trusted, not blocked)
	Home   string `json:"home"`   // the home it counts in (docs/trust.md, Homes)
	Why    string `json:"why"`    // Why* above
}

// FieldExplain is one field of a record with every stored claim on it
// and why the merged value is what it is.
type FieldExplain struct {
	Key    string      `json:"key"`
	Value  string      `json:"value"`  // the merged value; "" when none
	Merged bool        `json:"merged"` // a counted text vote decided a value
	Homes  int         `json:"homes"`  // homes behind the merged value (nsrc)
	Voting int         `json:"voting"` // homes that cast a vote on the field
	Reason string      `json:"reason"` // why the winner won, in words
	Votes  []FieldVote `json:"votes"`  // the winner first, then by (ts, id), newest first
}

// Explanation is a record's signed fields, each with its claims.
type Explanation struct {
	RID    string
	CIDs   []string
	Fields []FieldExplain // by key
}

// Explain returns every stored claim (retractions and ciphertext
// included) of the record h names, field by field, with whose vote counts,
// in which home, which claim won and why, by the same rules as the merge
// (docs/store.md, Merge). Link keys (cids/…) are not fields and are left
// out. ErrNotFound when h names no record.
func (s *Store) Explain(ctx context.Context, h string) (_ Explanation, err error) {
	defer s.noteRead(&err)
	if err := s.ready(); err != nil {
		return Explanation{}, err
	}
	rid, err := s.Resolve(ctx, h)
	if err != nil {
		return Explanation{}, err
	}
	ex := Explanation{RID: rid, CIDs: slices.Clone(s.groups.cidsOf(rid))}
	slices.Sort(ex.CIDs)
	byKey := map[string][]row{}
	cidOf := map[string][]string{} // per key, the cid of each row
	var pids []int64
	for _, cid := range ex.CIDs {
		rows, err := s.truthR.QueryContext(ctx, `SELECT key, pid, value, ts, id FROM claim WHERE cid = ?`, cid)
		if err != nil {
			return Explanation{}, fmt.Errorf("explain %s: %w", h, err)
		}
		for rows.Next() {
			var key string
			var pid, ts int64
			var val any
			var id []byte
			if err := rows.Scan(&key, &pid, &val, &ts, &id); err != nil {
				rows.Close()
				return Explanation{}, fmt.Errorf("explain %s: %w", h, err)
			}
			if IsLinkKey(key) {
				continue
			}
			byKey[key] = append(byKey[key], rowFromValue(pid, val, ts, asID(id)))
			cidOf[key] = append(cidOf[key], cid)
			pids = append(pids, pid)
		}
		if err := rows.Close(); err != nil {
			return Explanation{}, fmt.Errorf("explain %s: %w", h, err)
		}
	}
	view := s.trust.Load()
	home := func(pid int64) (string, bool) {
		uid := s.princ.uidOf(pid)
		return view.homeOf(uid), view.trusted(uid)
	}
	for _, key := range sortedKeys(byKey) {
		fe := explainField(byKey[key], home)
		fe.Key = key
		for i := range fe.Votes {
			fe.Votes[i].UID = s.princ.uidOf(byKey[key][i].pid)
			fe.Votes[i].CID = cidOf[key][i]
		}
		sortVotes(fe.Votes)
		ex.Fields = append(ex.Fields, fe)
	}
	return ex, nil
}

// explainField runs the merge of one key's rows and says what happened to
// each row; Votes[i] describes rows[i] (UID and CID left to the caller).
func explainField(rows []row, home homeOf) FieldExplain {
	fe := FieldExplain{Votes: make([]FieldVote, len(rows))}
	for i := range rows {
		r := &rows[i]
		h, counts := home(r.pid)
		v := FieldVote{Kind: r.kind.String(), TS: r.ts, ID: r.id.String(), Counts: counts, Home: h}
		if r.kind == KindText {
			v.Value = r.val
		}
		switch {
		case !counts:
			v.Why = WhyUntrusted
		case r.kind == KindRetraction:
			v.Why = WhyRetracted
		case r.kind == KindCipher:
			v.Why = WhyCipher
		default:
			v.Why = whyUnknown
		}
		fe.Votes[i] = v
	}
	// The signer's winning row across cids is its vote; older rows of a
	// counted signer are superseded, whatever their kind.
	votes := countedVotes(rows, home, nil)
	latest := latestRows(rows)
	for i := range rows {
		if fe.Votes[i].Counts && !latest[i] {
			fe.Votes[i].Why = WhySuperseded
		}
	}
	if len(votes) == 0 {
		fe.Reason = "no counted signer has a text value: the field has no merged value"
		for i := range fe.Votes {
			if fe.Votes[i].Why == whyUnknown {
				fe.Votes[i].Why = WhyNoWinner
			}
		}
		return fe
	}
	homeOfVote := make(map[int]string, len(votes)) // row → its home
	for _, v := range votes {
		homeOfVote[v.row] = v.home
	}
	perSigner := slices.Clone(votes)
	if !distinctHomes(votes) {
		votes = homeVotes(rows, votes, nil)
	}
	buckets := tally(rows, votes, nil)
	w := pick(rows, buckets)
	fe.Value, fe.Homes, fe.Merged, fe.Voting = rows[w.oldest].val, w.n, true, len(votes)
	fe.Reason = winReason(rows, buckets, w, "home")
	if len(votes) == 1 && len(perSigner) > 1 {
		// One home voted: its signers decided, by the same rule.
		sb := tally(rows, perSigner, nil)
		fe.Reason = "1 home voted; within it, " + winReason(rows, sb, pick(rows, sb), "signer")
	}
	cast := make(map[string]string, len(votes)) // home → the fold it cast
	for _, v := range votes {
		cast[v.home] = v.fold
	}
	for _, v := range perSigner {
		fv := &fe.Votes[v.row]
		switch {
		case v.row == w.oldest:
			fv.Why = WhyWon
		case v.fold == w.fold:
			fv.Why = WhyAgrees
		case cast[v.home] != v.fold:
			fv.Why = WhyHomeChose
		default:
			fv.Why = WhyOutvoted
		}
	}
	return fe
}

// latestRows marks each signer's winning row by (ts, id) among rows.
func latestRows(rows []row) []bool {
	best := map[int64]int{}
	for i := range rows {
		if b, ok := best[rows[i].pid]; !ok || rows[i].beats(&rows[b]) {
			best[rows[i].pid] = i
		}
	}
	out := make([]bool, len(rows))
	for _, i := range best {
		out[i] = true
	}
	return out
}

// winReason says in words why w won among buckets, by pick's rule: the
// most votes (of homes, or of one home's signers), then the oldest vote,
// then the smallest value.
func winReason(rows []row, buckets []bucket, w bucket, unit string) string {
	count := func(n int) string {
		if n == 1 {
			return "1 " + unit
		}
		return fmt.Sprintf("%d %ss", n, unit)
	}
	if len(buckets) == 1 {
		if w.n == 1 {
			return "the only value: 1 " + unit + " voted"
		}
		return "every " + unit + " agrees: " + count(w.n)
	}
	var tiedN, tiedTS []string
	for _, b := range buckets {
		if b.fold == w.fold || b.n != w.n {
			continue
		}
		tiedN = append(tiedN, b.fold)
		if rows[b.oldest].ts == rows[w.oldest].ts {
			tiedTS = append(tiedTS, b.fold)
		}
	}
	switch {
	case len(tiedN) == 0:
		return fmt.Sprintf("the most %ss: %d of %d", unit, w.n, totalVotes(buckets))
	case len(tiedTS) == 0:
		return fmt.Sprintf("a tie at %s each: the oldest vote wins", count(w.n))
	}
	return fmt.Sprintf("a tie at %s each, voted at the same time: the smallest value wins (%s)", count(w.n), strings.Join(append([]string{w.fold}, tiedTS...), " < "))
}

func totalVotes(buckets []bucket) int {
	n := 0
	for _, b := range buckets {
		n += b.n
	}
	return n
}

// whyOrder sorts the votes a reader looks for first.
var whyOrder = map[string]int{WhyWon: 0, WhyAgrees: 1, WhyOutvoted: 2, WhyHomeChose: 3, WhyNoWinner: 4,
	WhyRetracted: 5, WhyCipher: 6, WhySuperseded: 7, WhyUntrusted: 8, whyUnknown: 9}

// sortVotes puts the winner first, then by why, then newest first.
func sortVotes(v []FieldVote) {
	slices.SortStableFunc(v, func(a, b FieldVote) int {
		if d := whyOrder[a.Why] - whyOrder[b.Why]; d != 0 {
			return d
		}
		switch {
		case a.TS > b.TS:
			return -1
		case a.TS < b.TS:
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
}
