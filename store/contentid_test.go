package store_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/metanode/metanode/store"
)

func TestCIDRank_Vectors(t *testing.T) {
	b, err := os.ReadFile("testdata/cid-rank-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vf struct {
		Vectors []struct {
			Name string `json:"name"`
			CID  string `json:"cid"`
			Rank int    `json:"rank"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(b, &vf); err != nil || len(vf.Vectors) == 0 {
		t.Fatalf("vectors: %v", err)
	}
	for _, v := range vf.Vectors {
		if got := store.CIDRank(v.CID); got != v.Rank {
			t.Errorf("%s: rank(%q)=%d, want %d", v.Name, v.CID, got, v.Rank)
		}
	}
}

func TestBetterCID(t *testing.T) {
	dagpb := "bafybeiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	sha := "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	mid := "bagacbabaeddealivdfucjicjvwd4g4nfar5gonjvykwimb7cx6sih52zdtbhu"
	for _, tt := range []struct{ a, b, want string }{
		{dagpb, sha, dagpb}, {sha, dagpb, dagpb},
		{mid, sha, sha}, {sha, mid, sha},
		{"bafyaaa", "bafyaab", "bafyaaa"}, {"bafyaab", "bafyaaa", "bafyaaa"},
	} {
		if got := store.BetterCID(tt.a, tt.b); got != tt.want {
			t.Errorf("Better(%s, %s)=%s, want %s", tt.a, tt.b, got, tt.want)
		}
	}
	if got := store.CanonicalCID([]string{mid, sha, dagpb}); got != dagpb {
		t.Errorf("canonical=%s", got)
	}
}

func TestEncodeRID_Vectors(t *testing.T) {
	for _, tt := range []struct{ hex, want string }{
		{"00000000000000000000000000000000", "00000000000000000000000000"},
		{"ffffffffffffffffffffffffffffffff", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"},
		{"0190b6f5e1a07b3c8d2e4f5a6b7c8d9e", "01J2VFBRD0FCY8TBJFB9NQS3CY"},
	} {
		var b [16]byte
		hex.Decode(b[:], []byte(tt.hex))
		if got := store.EncodeRID(b); got != tt.want {
			t.Errorf("EncodeRID(%s)=%s, want %s", tt.hex, got, tt.want)
		}
	}
	a, b := store.NewRID(), store.NewRID()
	if !store.IsRID(a) || !store.IsRID(b) || a == b {
		t.Fatalf("NewRID gave %q, %q", a, b)
	}
	if store.IsRID("8ZZZZZZZZZZZZZZZZZZZZZZZZZ") || store.IsRID("0000000000000000000000000I") {
		t.Fatal("IsRID accepted a non-rid")
	}
}

func TestMidhash256_Vectors(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name    string
		content []byte
		want    string
	}{
		{"empty", nil, "bagacbabaecxvk4hvugaqw6xxrsxuxrykmyhq35i6ik5pshkn4wzdfdpa5a67y"},
		{"hello", []byte("hello"), "bagacbabaeddealivdfucjicjvwd4g4nfar5gonjvykwimb7cx6sih52zdtbhu"},
	} {
		p := filepath.Join(dir, tt.name)
		os.WriteFile(p, tt.content, 0o644)
		got, size, err := store.Midhash256File(p)
		if err != nil || got != tt.want || size != int64(len(tt.content)) {
			t.Errorf("%s: midhash=%s size=%d err=%v, want %s", tt.name, got, size, err, tt.want)
		}
		if store.CheckCID(got) != nil {
			t.Errorf("%s: midhash cid %s is not canonical", tt.name, got)
		}
	}
}

func TestMidhash256_MiddleMiB(t *testing.T) {
	// A 5 MB file: only the middle MiB (and the size) count.
	const size = 5_000_000
	content := bytes.Repeat([]byte{1}, size)
	mid := (size - (1 << 20)) / 2
	a, _ := store.Midhash256(bytes.NewReader(content), size)
	changedOutside := bytes.Clone(content)
	changedOutside[0], changedOutside[size-1] = 9, 9
	changedOutside[mid-1] = 9
	b, _ := store.Midhash256(bytes.NewReader(changedOutside), size)
	if a != b {
		t.Fatal("bytes outside the middle MiB changed the midhash")
	}
	changedInside := bytes.Clone(content)
	changedInside[mid] = 9
	c, _ := store.Midhash256(bytes.NewReader(changedInside), size)
	if a == c {
		t.Fatal("a byte inside the middle MiB did not change the midhash")
	}
}

func TestPeerIDCID(t *testing.T) {
	uid := "zxjtBGusZUthKPncxSPceaMYhbJagPVN5k9nmp9aUhg9D"
	s, err := store.PeerIDCID(uid)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cid.Decode(s)
	if err != nil || c.Type() != 0x72 || c.String() != s {
		t.Fatalf("peer id cid %s: %v", s, err)
	}
	if err := store.CheckCID(s); err != nil {
		t.Fatal(err)
	}
	if _, err := store.PeerIDCID("zbad"); err == nil {
		t.Fatal("bad uid accepted")
	}
}
