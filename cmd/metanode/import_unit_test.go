package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	gocid "github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"

	"github.com/metanode/metanode/store"
)

func TestLegacyCID(t *testing.T) {
	t.Parallel()
	r := seedLibrary()[0]
	sha := r.shaCID()
	md5, _ := mh.Encode([]byte("0123456789abcdef"), mh.MD5)
	md5CID := gocid.NewCidV1(gocid.Raw, md5).String()
	v0 := "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"
	for _, tc := range []struct{ alg, in, want string }{
		{"", sha, sha},
		{"", "midhash256:" + r.mid, r.mid},
		{"", "sha256:" + hexOf(r.sha[:]), sha},
		{"sha2-256", hexOf(r.sha[:]), sha},
		{"md5", hexOf([]byte("0123456789abcdef")), md5CID},
		{"", "ipfs:" + v0, v0},
		{"", "sha256:abc", ""},
		{"sha1", hexOf(r.sha[:]), ""}, // 32 bytes are no sha1
		{"", "not a cid", ""},
		{"", "", ""},
	} {
		got, err := legacyCID(tc.alg, tc.in)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("legacyCID(%q, %q) = %q, want an error", tc.alg, tc.in, got)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("legacyCID(%q, %q) = %q, %v; want %q", tc.alg, tc.in, got, err, tc.want)
		case err == nil && store.CheckCID(got) != nil:
			t.Errorf("legacyCID(%q, %q) = %q: not canonical", tc.alg, tc.in, got)
		}
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// TestAliasIndex: the layout's index names a cid's owner; a cid only
// listed belongs to its one lister, to none when several list it; a
// record with no keys owns nothing.
func TestAliasIndex(t *testing.T) {
	t.Parallel()
	a := newAliasIndex()
	rep := &importReport{}
	a.own("c1", "r1")
	a.list("c1", "r2")
	a.list("c2", "r1")
	a.list("c3", "r1")
	a.list("c3", "r2")
	a.own("c4", "dead")
	a.list("c4", "r2")
	a.gone["dead"] = true
	if got := a.keep("r1", []string{"c1", "c2", "c3", "c2"}, rep); strings.Join(got, ",") != "c1,c2" {
		t.Fatalf("r1 keeps %v", got)
	}
	if got := a.keep("r2", []string{"c1", "c3", "c4"}, rep); strings.Join(got, ",") != "c4" {
		t.Fatalf("r2 keeps %v", got)
	}
	if n := rep.BadInput[badAliasConflict].Count; n != 2 {
		t.Fatalf("%d conflicts reported, want 2 (c1 and c3, once each): %v", n, rep.BadInput[badAliasConflict].Examples)
	}
}

func TestProgressLine(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	var out bytes.Buffer
	var total int64
	p := newProgress(&out, "keys", func() int64 { return total }, func() time.Time { return now })
	now = now.Add(time.Second)
	p.add(100, 90) // within two seconds: no line
	if out.Len() != 0 {
		t.Fatalf("a line before its time: %q", out.String())
	}
	total = 1_000_000
	now = now.Add(3 * time.Second)
	p.add(249_900, 249_910)
	want := "metanode import: 25% (250,000 of 1,000,000 keys), 250,000 claims, 62,500 claims/s, about 12s left\n"
	if out.String() != want {
		t.Fatalf("progress %q, want %q", out.String(), want)
	}
}

// FuzzSalvageLeaf: the page reader meets whatever a damaged file holds:
// garbage pages and records never panic and never read past the page.
func FuzzSalvageLeaf(f *testing.F) {
	page := make([]byte, 4096)
	page[0] = 0x0a
	page[4] = 1 // one cell
	page[8], page[9] = 0x0f, 0x00
	copy(page[0xf00:], []byte{6, 3, 0x17, 0x13, 'k', 'e', 'y', 'v', 'a', 'l', 'u', 'e'})
	f.Add(page)
	f.Add(append([]byte{0x0d, 0, 0, 0xff, 0xff}, make([]byte, 100)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		pg := make([]byte, 4096)
		copy(pg, b)
		if pg[0] != 0x0a && pg[0] != 0x0d {
			pg[0] = 0x0a
		}
		r := &pageReader{h: sqliteHeader{pageSize: 4096, usable: 4096}}
		_ = r.leaf(pg, 0, func(row leafRow) error {
			_, _ = salvageInsert(layoutClaims, true, row)
			_, _ = salvageInsert(layoutKV, true, row)
			return nil
		})
		_, _ = decodeRecord(b)
	})
}
