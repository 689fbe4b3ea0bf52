package refdata

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/metanode/metanode/store"
)

// fixtureVersion names the generator: change it when the dataset changes,
// so that cached files of an older generator are not used.
const fixtureVersion = 1

// FixtureBase is the first claim timestamp of the dataset (ms).
const FixtureBase = 1_700_000_000_000

// Dataset is the reference dataset: about 17 claims per record from four
// signers with a realistic key mix (titles that compete, genres key-sets,
// file info, some links to a second cid). Its claims are stored in wire
// form, back to back, in ingest order.
type Dataset struct {
	Path    string          // the wire-form file
	N       int             // claims
	CIDs    []string        // the primary cid of each record, in record order
	Links   int             // records with a link to a second cid
	Signers []*store.Signer // tmdb, ffmpeg, filename guesser, hasher
}

// fixtureSigners are the dataset's signers.
var fixtureSigners = []string{"tmdb", "ffmpeg", "filename", "hasher"}

var (
	genres  = []string{"Drama", "Comedy", "Action", "Thriller", "Documentary", "Animation", "Crime", "Romance", "Horror", "Family"}
	codecs  = []string{"h264", "hevc", "av1", "vp9"}
	acodecs = []string{"aac", "ac3", "eac3", "dts", "opus"}
	langs   = []string{"eng", "fra", "deu", "spa", "jpn", "ita"}
	words   = []string{"The", "Night", "River", "Last", "Summer", "Empire", "Silent", "Blue", "Garden", "Storm", "Winter", "Road", "House", "Stars", "Ghost", "Matrix", "Ocean", "City", "Heart", "Fire"}
)

// rnd is a small deterministic generator (splitmix64).
type rnd uint64

func (r *rnd) next() uint64 {
	*r += 0x9e3779b97f4a7c15
	z := uint64(*r)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *rnd) intn(n int) int { return int(r.next() % uint64(n)) }

// recordClaims appends the claims of record i (unsigned; signer index in who).
func recordClaims(i int, ts *uint64, claims []store.Claim, who []int) ([]store.Claim, []int, bool) {
	r := rnd(i*7919 + 1)
	cid := MidhashCID(i)
	add := func(s int, key, val string) {
		*ts++
		claims = append(claims, store.Claim{CID: cid, Key: key, Kind: store.KindText, Value: []byte(val), TS: *ts})
		who = append(who, s)
	}
	title := words[r.intn(len(words))] + " " + words[r.intn(len(words))]
	if r.intn(3) == 0 {
		title = "The " + title
	}
	year := strconv.Itoa(1950 + r.intn(75))
	add(0, "title", title)
	add(0, "year", year)
	add(0, "type", []string{"movie", "episode", "movie", "movie"}[r.intn(4)])
	add(0, "originaltitle", title)
	add(0, "plot", fmt.Sprintf("A story about %s and %s in %s.", words[r.intn(len(words))], words[r.intn(len(words))], year))
	add(0, "rating", fmt.Sprintf("%d.%d", 1+r.intn(9), r.intn(10)))
	add(0, "tmdb/id", strconv.Itoa(1000+i))
	for g := 0; g < 1+r.intn(3); g++ {
		add(0, "genres/"+genres[r.intn(len(genres))], "true")
	}
	add(1, "fileinfo/duration", fmt.Sprintf("%d.%d", 1200+r.intn(8000), r.intn(10)))
	add(1, "fileinfo/streamdetails/video/0/codec", codecs[r.intn(len(codecs))])
	add(1, "fileinfo/streamdetails/video/0/width", []string{"1920", "3840", "1280"}[r.intn(3)])
	add(1, "fileinfo/streamdetails/video/0/height", []string{"1080", "2160", "720"}[r.intn(3)])
	add(1, "fileinfo/streamdetails/audio/0/codec", acodecs[r.intn(len(acodecs))])
	add(1, "fileinfo/streamdetails/audio/0/language", langs[r.intn(len(langs))])
	add(2, "fileName", fmt.Sprintf("%s (%s).mkv", title, year))
	guess := title
	if r.intn(4) == 0 {
		guess = title + " " + year // a guess that loses to tmdb
	}
	add(2, "title", guess)
	link := i%5 == 0
	if link {
		add(3, "cids/"+CID(i), "true")
	}
	return claims, who, link
}

// TB is what Fixture reports through; testing.TB satisfies it.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Fixture is Load for callers that report through a TB: it logs the
// generation and ends the caller with Fatalf on an error.
func Fixture(tb TB, n int) *Dataset {
	tb.Helper()
	d, err := Load(n, tb.Logf)
	if err != nil {
		tb.Fatalf("fixture: %v", err)
	}
	return d
}

// Load returns the reference dataset of n claims (1,000,000 claims is
// about 58,000 records of about 17 fields). It is generated once, signed in
// parallel, and cached under os.UserCacheDir()/metanode-bench/; later calls
// (in any process) read the cached file. logf (may be nil) hears that a
// generation starts.
func Load(n int, logf func(format string, args ...any)) (*Dataset, error) {
	d := &Dataset{N: n, Signers: make([]*store.Signer, len(fixtureSigners))}
	for i := range d.Signers {
		d.Signers[i] = Signer(1000 + i)
	}
	// The record cids are cheap to recompute; only the claims are cached.
	var claims []store.Claim
	var who []int
	ts := uint64(FixtureBase)
	total := 0
	for i := 0; total < n; i++ {
		var link bool
		claims, who, link = recordClaims(i, &ts, claims[:0], who[:0])
		total += len(claims)
		d.CIDs = append(d.CIDs, MidhashCID(i))
		if link {
			d.Links++
		}
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "metanode-bench")
	d.Path = filepath.Join(dir, fmt.Sprintf("fixture-v%d-%d.wire", fixtureVersion, n))
	if st, err := os.Stat(d.Path); err == nil && st.Size() > 0 {
		return d, nil
	}
	if logf != nil {
		logf("generating the %d-claim fixture in %s (signing takes a while, once)", n, d.Path)
	}
	if err := d.generate(dir); err != nil {
		return nil, fmt.Errorf("generate %s: %w", d.Path, err)
	}
	return d, nil
}

// generate signs the dataset in chunks and writes it atomically.
func (d *Dataset) generate(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "fixture-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	bw := bufio.NewWriterSize(f, 1<<20)
	ts := uint64(FixtureBase)
	written := 0
	var claims []store.Claim
	var who []int
	const chunk = 20_000
	flush := func() error {
		signers := make([]*store.Signer, len(claims))
		for j := range claims {
			signers[j] = d.Signers[who[j]]
		}
		Sign(signers, claims)
		var buf []byte
		for j := range claims {
			buf = claims[j].AppendWire(buf[:0])
			if _, err := bw.Write(buf); err != nil {
				return err
			}
		}
		claims, who = claims[:0], who[:0]
		return nil
	}
	for i := 0; written < d.N; i++ {
		before := len(claims)
		claims, who, _ = recordClaims(i, &ts, claims, who)
		n := len(claims) - before
		if written+n > d.N { // the last record is cut to give exactly N claims
			claims, who = claims[:before+d.N-written], who[:before+d.N-written]
			n = d.N - written
		}
		written += n
		if len(claims) >= chunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), d.Path)
}

// Each decodes the dataset in order and calls fn with batches of up to
// size claims (the slice is reused between calls).
func (d *Dataset) Each(size int, fn func([]store.Claim) error) error {
	f, err := os.Open(d.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	batch := make([]store.Claim, 0, size)
	buf := make([]byte, 0, 4096)
	for {
		c, err := readWire(br, &buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		batch = append(batch, c)
		if len(batch) == size {
			if err := fn(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		return fn(batch)
	}
	return nil
}

// Claims loads the whole dataset into memory.
func (d *Dataset) Claims() ([]store.Claim, error) {
	out := make([]store.Claim, 0, d.N)
	err := d.Each(4096, func(cs []store.Claim) error {
		out = append(out, cs...)
		return nil
	})
	return out, err
}

// readWire reads one wire-form claim: uvarint(len(payload)) payload sig.
func readWire(br *bufio.Reader, buf *[]byte) (store.Claim, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return store.Claim{}, err
	}
	if n > uint64(store.MaxPayloadBytes) {
		return store.Claim{}, fmt.Errorf("fixture: payload of %d bytes", n)
	}
	b := binary.AppendUvarint((*buf)[:0], n)
	hdr := len(b)
	b = append(b, make([]byte, int(n)+store.SigBytes)...)
	if _, err := io.ReadFull(br, b[hdr:]); err != nil {
		return store.Claim{}, fmt.Errorf("fixture: truncated: %w", err)
	}
	*buf = b
	c, _, err := store.DecodeWire(b)
	return c, err
}

// Checksum is a cheap identity of the dataset's file, for logs.
func (d *Dataset) Checksum() string {
	f, err := os.Open(d.Path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	_, _ = io.CopyN(h, f, 1<<20)
	return fmt.Sprintf("%x", h.Sum(nil)[:8])
}
