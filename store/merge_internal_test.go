package store

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"testing"

	"golang.org/x/text/cases"
)

func vote(pid int64, val string, ts uint64) row {
	return row{pid: pid, kind: KindText, val: val, ts: ts, id: sha256.Sum256(fmt.Appendf(nil, "%d/%s/%d", pid, val, ts))}
}

func TestMergeRows(t *testing.T) {
	cases := []struct {
		name string
		rows []row
		// pid 9 is untrusted in every case
		want string
		nsrc int
		ok   bool
	}{
		{"One", []row{vote(1, "Matrix", 5)}, "Matrix", 1, true},
		{"None", nil, "", 0, false},
		{"MostSignersWin", []row{vote(1, "A", 1), vote(2, "B", 5), vote(3, "B", 6)}, "B", 2, true},
		{"TieOldestWins", []row{vote(1, "Late", 9), vote(2, "Early", 3)}, "Early", 1, true},
		// Oldest by ts alone: at the same ts the bytewise smallest folded
		// value wins, whichever claim id is smaller (the pids change the ids).
		{"SameTimeSmallestValue", []row{vote(1, "Side Two", 5), vote(2, "Side One", 5)}, "Side One", 1, true},
		{"SameTimeSmallestValue2", []row{vote(3, "Side Two", 5), vote(4, "Side One", 5)}, "Side One", 1, true},
		{"SameTimeSmallestValue3", []row{vote(5, "Side Two", 5), vote(6, "Side One", 5)}, "Side One", 1, true},
		{"SameTimeSmallestFoldedValue", []row{vote(1, "b", 5), vote(2, "A", 5)}, "A", 1, true},
		{"SameTimeSmallestFoldedValue2", []row{vote(1, "a", 5), vote(2, "B", 5)}, "a", 1, true},
		{"CaseAndSpaceFoldIntoOneBucket", []row{vote(1, "Other", 1), vote(2, " the matrix ", 4), vote(3, "The Matrix", 3)}, "The Matrix", 2, true},
		{"ExactTextOfOldestVote", []row{vote(1, "the MATRIX", 2), vote(2, "The Matrix", 3)}, "the MATRIX", 2, true},
		{"UnicodeFullCaseFold", []row{vote(1, "Straße", 2), vote(2, "STRASSE", 3), vote(3, "Strasse!", 1)}, "Straße", 2, true},
		{"NoNormalisation", []row{vote(1, "e\u0301", 2), vote(2, "\u00e9", 1)}, "\u00e9", 1, true},
		{"RetractionDropsOut", []row{vote(1, "A", 1), {pid: 2, kind: KindRetraction, ts: 5}, vote(3, "B", 2)}, "A", 1, true},
		{"CipherDropsOut", []row{{pid: 1, kind: KindCipher, val: "x", ts: 1}, vote(2, "B", 3)}, "B", 1, true},
		{"UntrustedDoesNotCount", []row{vote(9, "Spam", 1), vote(8, "Spam", 1), vote(2, "Real", 5)}, "Real", 1, true},
		{"OnlyUntrusted", []row{vote(9, "Spam", 1)}, "", 0, false},
		// A signer with rows on two cids counts once, by its winning row.
		{"SignerOnceByWinningRow", []row{vote(1, "Old", 1), vote(1, "New", 7), vote(2, "Other", 5)}, "Other", 1, true},
		// Its winning row is a retraction: no fallback to the older vote.
		{"NoFallbackAfterRetraction", []row{vote(1, "A", 1), {pid: 1, kind: KindRetraction, ts: 9}, vote(2, "B", 5)}, "B", 1, true},
		{"EmptyText", []row{vote(1, "", 1)}, "", 1, true},
	}
	// Every signer its own home.
	counts := func(pid int64) (string, bool) { return fmt.Sprint(pid), pid < 8 }
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, n, ok := mergeRows(tc.rows, counts)
			if got != tc.want || n != tc.nsrc || ok != tc.ok {
				t.Fatalf("merge=%q,%d,%v, want %q,%d,%v", got, n, ok, tc.want, tc.nsrc, tc.ok)
			}
			// The result never depends on the order of the rows.
			for range 20 {
				rs := append([]row(nil), tc.rows...)
				rand.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
				if g2, n2, ok2 := mergeRows(rs, counts); g2 != got || n2 != n || ok2 != ok {
					t.Fatalf("order changed the merge: %q,%d,%v", g2, n2, ok2)
				}
			}
		})
	}
}

// TestFoldValue: the ASCII fast path is full case folding.
func TestFoldValue(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(0x20 + r.IntN(0x5f))
		}
		s := string(b)
		if got, want := foldValue(s), cases.Fold().String(trim(s)); got != want {
			t.Fatalf("fold(%q)=%q, want %q", s, got, want)
		}
	}
	if got := foldValue("  ΣΊΣΥΦΟΣ "); got != cases.Fold().String("ΣΊΣΥΦΟΣ") {
		t.Fatalf("fold=%q", got)
	}
}

func trim(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r' || s[0] == '\v' || s[0] == '\f') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t' || s[len(s)-1] == '\n' || s[len(s)-1] == '\r' || s[len(s)-1] == '\v' || s[len(s)-1] == '\f') {
		s = s[:len(s)-1]
	}
	return s
}

func TestIsPeerCID(t *testing.T) {
	for i := range 50 {
		seed := sha256.Sum256(fmt.Appendf(nil, "peer %d", i))
		sg, err := SignerFromHex(fmt.Sprintf("%x", seed))
		if err != nil {
			continue
		}
		c, err := PeerIDCID(sg.UID())
		if err != nil {
			t.Fatal(err)
		}
		if !isPeerCID(c) {
			t.Fatalf("%s not recognised as a libp2p-key cid", c)
		}
	}
	for _, c := range []string{
		"bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"bagacbabaeddealivdfucjicjvwd4g4nfar5gonjvykwimb7cx6sih52zdtbhu",
		"QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",
		"bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi",
	} {
		if isPeerCID(c) {
			t.Fatalf("%s taken for a libp2p-key cid", c)
		}
	}
}

func TestEventIDs(t *testing.T) {
	var e evState
	a := e.next(1000)
	b := e.next(1000)
	c := e.next(999) // the clock stepped back
	d := e.next(2000)
	if !(a < b && b < c && c < d) || a != "0000000001000-0000000000" || len(d) != 24 {
		t.Fatalf("ids %s %s %s %s", a, b, c, d)
	}
	for _, s := range []string{"0", "0-0", "1732900000000-42", a} {
		if _, _, ok := parseEventID(s); !ok {
			t.Fatalf("%q refused", s)
		}
	}
	for _, s := range []string{"", "-", "x-1", "1-x", "-1-2", "99999999999999-0", "1-99999999999"} {
		if _, _, ok := parseEventID(s); ok {
			t.Fatalf("%q accepted", s)
		}
	}
}

func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{"0", "0-0", "1732900000000-0000000042", "1-2-3", "+1-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, seq, ok := parseEventID(s)
		if !ok {
			return
		}
		id := formatEventID(ms, seq)
		ms2, seq2, ok2 := parseEventID(id)
		if !ok2 || ms2 != ms || seq2 != seq || len(id) != 24 {
			t.Fatalf("%q → %q does not round-trip", s, id)
		}
	})
}

func TestSchemaPathAndTypes(t *testing.T) {
	for in, want := range map[string]string{
		"title":                                "title",
		"fileinfo/streamdetails/video/0/codec": "fileinfo/streamdetails/video/*/codec",
		"streams/12/language":                  "streams/*/language",
		"cids/bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": "cids/*",
		"genres/Drama": "genres/Drama",
	} {
		if got := schemaPath(in); got != want {
			t.Fatalf("schemaPath(%q)=%q, want %q", in, got, want)
		}
	}
	for v, want := range map[string]int{"x": 0, "12": 1, "-3": 1, "1.5": 2, "1e3": 2, "true": 3, "false": 3, "NaN": 0, "Inf": 0, "0x1p3": 0, "": 0} {
		if got := valueType(v); got != want {
			t.Fatalf("valueType(%q)=%d, want %d", v, got, want)
		}
	}
}

// BenchmarkMergeRows: one key's merge for the shapes the store meets: one
// signer (the fast path), four signers each its own home (the reference
// dataset, open mode), and six signers in two homes (two paired homes
// with their plugins).
func BenchmarkMergeRows(b *testing.B) {
	shapes := []struct {
		name  string
		rows  []row
		homes int64 // pid % homes is the home
	}{
		{"OneRow", []row{vote(1, "Heat", 1)}, 1},
		{"FourHomes", []row{vote(1, "Heat", 1), vote(2, "heat", 2), vote(3, "Heat (1995)", 3), vote(4, "Heat", 4)}, 4},
		{"SixSignersTwoHomes", []row{vote(1, "Heat", 1), vote(2, "heat", 2), vote(3, "Heat (1995)", 3), vote(4, "Heat", 4), vote(5, "EVIL", 5), vote(6, "EVIL", 6)}, 2},
	}
	names := []string{"zHomeA", "zHomeB", "zHomeC", "zHomeD"}
	for _, sh := range shapes {
		home := func(pid int64) (string, bool) { return names[pid%sh.homes], true }
		b.Run(sh.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				mergeRows(sh.rows, home)
			}
		})
	}
}
