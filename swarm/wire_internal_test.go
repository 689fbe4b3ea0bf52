package swarm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	gocid "github.com/ipfs/go-cid"

	"github.com/metanode/metanode/store"
)

func testSigner(t testing.TB) *store.Signer {
	t.Helper()
	s, err := store.SignerFromHex("5c0b5e4b1f7b7e2a3d4c5b6a79880716253443526170809f0e1d2c3b4a596877")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const testCID = "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func TestFrameReader_Limits(t *testing.T) {
	var buf bytes.Buffer
	fw := newFrameWriter(&buf)
	if err := fw.write([]byte{frameEnd}); err != nil {
		t.Fatal(err)
	}
	if err := fw.write(make([]byte, maxFrame+1)); err == nil {
		t.Fatal("oversized frame written")
	}
	if err := fw.flush(); err != nil {
		t.Fatal(err)
	}
	// An oversized length prefix is refused before anything is allocated.
	buf.Write([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	fr := newFrameReader(&buf)
	if f, err := fr.next(); err != nil || !bytes.Equal(f, []byte{frameEnd}) {
		t.Fatalf("first frame: %x, %v", f, err)
	}
	if _, err := fr.next(); !errors.Is(err, errProtocol) {
		t.Fatalf("oversized frame: %v, want a protocol violation", err)
	}
	// A truncated frame is an unexpected EOF, a clean end is EOF.
	fr = newFrameReader(bytes.NewReader([]byte{5, 1, 2}))
	if _, err := fr.next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated: %v", err)
	}
	fr = newFrameReader(bytes.NewReader(nil))
	if _, err := fr.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("empty: %v", err)
	}
	fr = newFrameReader(bytes.NewReader([]byte{0}))
	if _, err := fr.next(); !errors.Is(err, errProtocol) {
		t.Fatalf("zero-length frame: %v", err)
	}
}

func TestGossip_RoundTrip(t *testing.T) {
	sg := testSigner(t)
	claims := []store.Claim{sg.Text(testCID, "title", "a", 1), sg.Retraction(testCID, "year", 2),
		sg.Cipher(testCID, "secret", []byte{0, 1, 2}, 3)}
	got, err := decodeGossip(encodeGossip(claims))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(claims) {
		t.Fatalf("got %d claims", len(got))
	}
	for i := range got {
		if got[i].ID() != claims[i].ID() || got[i].Sig != claims[i].Sig {
			t.Fatalf("claim %d differs", i)
		}
	}
	for _, bad := range [][]byte{nil, {2, 1}, {gossipVersion}, {gossipVersion, 0}, {gossipVersion, 200, 1},
		append(encodeGossip(claims), 0), make([]byte, maxGossipBytes+1)} {
		if _, err := decodeGossip(bad); !errors.Is(err, errProtocol) {
			t.Fatalf("decodeGossip(%.20x): %v, want a protocol violation", bad, err)
		}
	}
}

func FuzzDecodeGossip(f *testing.F) {
	sg := testSigner(f)
	f.Add(encodeGossip([]store.Claim{sg.Text(testCID, "title", "x", 5)}))
	f.Add([]byte{gossipVersion, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		claims, err := decodeGossip(data)
		if err != nil {
			return
		}
		// What decodes re-encodes to the same bytes: ids are those of the
		// bytes received.
		if !bytes.Equal(encodeGossip(claims), data) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func TestRanges_RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	items := randItems(r, 200, 1000, 1e6)
	slices.SortFunc(items, store.SyncItem.Compare)
	var entries []rangeEntry
	for i := 0; i+3 < len(items); i += 4 {
		e := rangeEntry{upper: items[i+3], mode: byte(i/4) % 4}
		switch e.mode {
		case modeSketch:
			e.count = uint64(i)
			var lo uint64
			if i > 0 {
				lo = items[i-1].TS
			}
			e.syms = buildSketch(items[i:i+3], lo, 1+i%5)
			e.syms[0].count = -int64(i) // negative counts travel too
		case modeFingerprint:
			e.count = uint64(i)
			e.fp[0] = byte(i)
		case modeIDList:
			for _, it := range items[i : i+3] {
				e.ids = append(e.ids, shortOf(it))
			}
		}
		entries = append(entries, e)
	}
	entries = append(entries, rangeEntry{upper: store.MaxSyncItem, mode: modeFingerprint, count: 9})
	var got []rangeEntry
	var rd rangeDecoder
	for _, f := range encodeRanges(entries) {
		rs, err := rd.decode(f)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rs...)
	}
	if len(got) != len(entries) {
		t.Fatalf("%d entries, want %d", len(got), len(entries))
	}
	for i := range got {
		e, g := entries[i], got[i]
		if g.upper != e.upper || g.mode != e.mode || g.count != e.count || g.fp != e.fp || !slices.Equal(g.ids, e.ids) || !slices.Equal(g.syms, e.syms) {
			t.Fatalf("entry %d: got %+v, want %+v", i, g, e)
		}
	}
}

func TestRanges_Rejects(t *testing.T) {
	bad := map[string][]byte{
		"count beyond frame":  {frameRanges, 100, 1, 0},
		"repeated bound":      {frameRanges, 2, 5, 0, 0, 1, 0, 0},
		"after the end":       {frameRanges, 2, 0, 0, 5, 0, 0},
		"unknown mode":        {frameRanges, 1, 5, 0, 9},
		"prefix too long":     {frameRanges, 1, 5, 33},
		"truncated fp":        {frameRanges, 1, 5, 0, 1, 0, 1, 2},
		"trailing":            {frameRanges, 1, 5, 0, 0, 7},
		"non-canonical":       {frameRanges, 1, 0x85, 0x00, 0, 0},
		"unsorted id list":    append([]byte{frameRanges, 1, 0, 2, 2, 5, 1, 1, 1, 1, 1, 1, 1, 1, 0}, make([]byte, 8)...),
		"zero-width id delta": {frameRanges, 1, 0, 2, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"empty sketch":        {frameRanges, 1, 0, 3, 5, 0},
		"sketch over the cap": append([]byte{frameRanges, 1, 0, 3, 5, 0x81, 0x20}, make([]byte, (maxSketchSyms+1)*symBytes)...),
		"truncated sketch":    append([]byte{frameRanges, 1, 0, 3, 5, 2}, make([]byte, 2*symBytes-1)...),
	}
	for name, f := range bad {
		var rd rangeDecoder
		if _, err := rd.decode(f); !errors.Is(err, errProtocol) {
			t.Errorf("%s: %v, want a protocol violation", name, err)
		}
	}
}

// FuzzRespond feeds arbitrary RANGES frames to a reconciler: decoding
// refuses garbage, and whatever decodes is answered without panic, with
// ranges that encode and decode again.
func FuzzRespond(f *testing.F) {
	r := rand.New(rand.NewPCG(2, 2))
	set := store.NewSyncSet()
	set.Load(randItems(r, 3000, 1000, 1e6))
	rec := reconciler{view: setView{set: set}, p: defaultReconcileParams, push: true, want: true, sketch: true}
	for _, fr := range encodeRanges(rec.initial().ranges) {
		f.Add(fr)
	}
	sk := rec.sketchEntry(store.MinSyncItem, store.MaxSyncItem, set.Items(store.MinSyncItem, store.MaxSyncItem, 100), 12)
	f.Add(encodeRanges([]rangeEntry{sk})[0])
	f.Add([]byte{frameRanges, 1, 0, 1, 0})
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) == 0 || frame[0] != frameRanges {
			return
		}
		var rd rangeDecoder
		in, err := rd.decode(frame)
		if err != nil {
			return
		}
		plan := rec.respond(in)
		var rd2 rangeDecoder
		for _, fr := range encodeRanges(plan.ranges) {
			if _, err := rd2.decode(fr); err != nil {
				t.Fatalf("own answer does not decode: %v", err)
			}
		}
	})
}

func FuzzDecodeWant(f *testing.F) {
	f.Add(appendWant(nil, []shortID{{ts: 5}, {ts: 9, pre: [shortIDBytes]byte{1}}}))
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) == 0 {
			return
		}
		w, err := decodeWant(frame)
		if err != nil {
			return
		}
		if !bytes.Equal(appendWant(nil, w)[1:], frame[1:]) {
			t.Fatal("re-encoding differs")
		}
	})
}

func FuzzDecodeFetch(f *testing.F) {
	f.Add(appendFetch(nil, []string{testCID}))
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) == 0 {
			return
		}
		cids, err := decodeFetch(frame)
		if err != nil {
			return
		}
		if len(cids) == 0 || len(cids) > maxFetchCIDs {
			t.Fatalf("%d cids accepted", len(cids))
		}
		for _, c := range cids {
			if err := store.CheckCID(c); err != nil {
				t.Fatalf("a cid not in canonical text form accepted: %v", err)
			}
		}
	})
}

// A cid in any form but its canonical text (binary, another base, junk)
// is a protocol error, not a silent miss (protocol review, F1).
func TestDecodeFetch_CanonicalTextOnly(t *testing.T) {
	c, err := gocid.Decode(testCID)
	if err != nil {
		t.Fatal(err)
	}
	b32, err := c.StringOfBase('z')
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeFetch(appendFetch(nil, []string{testCID})); err != nil {
		t.Fatalf("canonical cid refused: %v", err)
	}
	for _, bad := range []string{string(c.Bytes()), b32, "hello"} {
		if _, err := decodeFetch(appendFetch(nil, []string{testCID, bad})); !errors.Is(err, errProtocol) {
			t.Errorf("fetch of %q: %v, want a protocol error", bad, err)
		}
	}
}

func FuzzDecodeHello(f *testing.F) {
	f.Add(appendHello(nil, hello{version: protoVersion, flags: flagNoPush, setLen: 7}))
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) == 0 {
			return
		}
		h, err := decodeHello(frame)
		if err == nil && h.version != protoVersion {
			t.Fatal("wrong version accepted")
		}
		_ = decodeError(frame)
	})
}

func TestShortID_Span(t *testing.T) {
	it := store.SyncItem{TS: 7}
	for i := range it.ID {
		it.ID[i] = 0xff
	}
	lo, hi := shortOf(it).span()
	if lo.Compare(it) > 0 || hi.Compare(it) <= 0 || hi != (store.SyncItem{TS: 8}) {
		t.Fatalf("span %v..%v does not hold %v", lo, hi, it)
	}
	it.ID[3] = 0
	lo, hi = shortOf(it).span()
	if lo.Compare(it) > 0 || hi.Compare(it) <= 0 {
		t.Fatalf("span %v..%v does not hold %v", lo, hi, it)
	}
	if s := it.Next(); s.Compare(it) <= 0 {
		t.Fatal("successor not greater")
	}
}

func FuzzDecodePair(f *testing.F) {
	f.Add(append(binary.AppendUvarint([]byte{framePair}, 5), "token"...))
	f.Add(appendPaired(nil, PairAnswer{OK: true, Claims: 42}))
	f.Add(appendPaired(nil, PairAnswer{Message: "expired"}))
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) == 0 {
			return
		}
		if tok, err := decodePair(frame); err == nil {
			want := append(binary.AppendUvarint([]byte{frame[0]}, uint64(len(tok))), tok...)
			if !bytes.Equal(want, frame) {
				t.Fatal("PAIR re-encoding differs")
			}
		}
		if a, err := decodePaired(frame); err == nil {
			if a.Claims < 0 || len(a.Message) > maxPairMsg {
				t.Fatalf("answer out of bounds: %+v", a)
			}
			if back := appendPaired(nil, a); !bytes.Equal(back[1:], frame[1:]) && a.Claims < 1<<62 {
				t.Fatal("PAIRED re-encoding differs")
			}
		}
	})
}

func TestDecodePaired_LongMessage(t *testing.T) {
	frame := binary.AppendUvarint([]byte{framePaired, 0, 0}, maxPairMsg+1)
	frame = append(frame, bytes.Repeat([]byte{'m'}, maxPairMsg+1)...)
	if _, err := decodePaired(frame); err == nil {
		t.Fatal("a message over the bound decoded")
	}
}
