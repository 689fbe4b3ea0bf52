package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// Files the import keeps in the data directory.
const (
	// importKeyFile is the key every legacy value is signed with: the node
	// trusts it as a local writer, so distrusting it (trust rm) takes back
	// everything imported at once.
	importKeyFile = "import.key"
	// importStateFile records each source's session (its claims' timestamp)
	// and, while one runs, how far it got: a rerun goes on from there.
	importStateFile = "imports.json"
)

// defaultImportBatch is how many claims one commit carries.
const defaultImportBatch = 4096

const importHelp = `Imports the metadata of the core metanode replaces, from its Redis or its
SQLite database, into this node: into a stopped node's data directory (--data,
taking its lock), or through the API of the node running on it (then the claims
are shared with the swarm as they land). The layout is detected: the Redis
hash layout (file:<hashId> hashes) or flat layout (file:<uuid>/<field> keys,
cid: aliases, meta-core:schema-version 2), a v1.x SQLite kv table, or a v2
truth database of signed claims. --layout forces one.

Legacy values become claims signed by the node's import key (import.key in the
data directory, trusted as a local writer; its uid is in the report: 'metanode
trust rm UID' takes back everything imported with it); a record's content ids
are linked into one record, which keeps its rid where the layout has one. A v2
truth's claims are imported as they are: verified, their signers kept.

Running it again adds nothing; interrupted, it goes on where it stopped. The
report (JSON, stdout) says what was imported, what could not be and why;
progress goes to stderr. --dry-run reads the source and reports what would be
imported, changing nothing. See docs/import.md.`

// importOptions are the command's flags.
type importOptions struct {
	redis, sqlite, layout string
	dryRun, fresh         bool
	batch                 int
}

func (o *importOptions) check() error {
	switch {
	case (o.redis == "") == (o.sqlite == ""):
		return usagef("import", "give exactly one of --from-redis URL or --from-sqlite FILE")
	case o.batch < 1 || o.batch > 10_000:
		return usagef("import", "--batch must be 1 to 10000")
	}
	want := []string{layoutHash, layoutFlat}
	if o.sqlite != "" {
		want = []string{layoutKV, layoutClaims}
	}
	if o.layout != "" && o.layout != want[0] && o.layout != want[1] {
		return usagef("import", "--layout for this source is %s or %s", want[0], want[1])
	}
	return nil
}

// Layouts a source may hold.
const (
	layoutHash   = "hash"   // Redis, seed 000: file:<hashId> hashes
	layoutFlat   = "flat"   // Redis, seed 001: file:<uuid>/<field> strings
	layoutKV     = "kv"     // SQLite v1.x: the flat keys in one kv table
	layoutClaims = "claims" // SQLite v2: a truth database of signed claims
)

func (c *cli) importCmd(ctx context.Context, args []string) error {
	fl := c.flagSet("import", "import (--from-redis URL | --from-sqlite FILE) [--layout L] [--dry-run] [--fresh] [--data DIR] [--api URL]", importHelp)
	tgt := c.apiFlag(fl)
	var o importOptions
	fl.StringVar(&o.redis, "from-redis", "", "the Redis to import, redis://[user:password@]host:port/db (also rediss://, unix://)")
	fl.StringVar(&o.sqlite, "from-sqlite", "", "the SQLite database to import (a v1.x kv table or a v2 truth), opened read-only")
	fl.StringVar(&o.layout, "layout", "", "force the layout: hash or flat (Redis), kv or claims (SQLite) (default: detected)")
	fl.BoolVar(&o.dryRun, "dry-run", false, "read the source and report what would be imported; change nothing")
	fl.BoolVar(&o.fresh, "fresh", false, "sign this source's values again with a new timestamp (it changed since it was imported)")
	fl.IntVar(&o.batch, "batch", defaultImportBatch, "claims per commit")
	if err := c.noArgs(fl, args); err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	rep := &importReport{}
	src, err := openImportSource(ctx, o, rep)
	if err != nil {
		return err
	}
	defer src.close()
	rep.Source, rep.Layout = src.name(), src.layout()
	im := &importer{src: src, rep: rep, batch: o.batch}
	if o.dryRun {
		rep.DryRun, rep.Into = true, "nothing (dry run)"
		err = im.run(ctx, "", newProgress(c.stderr, src.unit(), src.total, time.Now))
	} else {
		err = c.importInto(ctx, im, o, tgt)
	}
	if !im.started { // it stopped before importing began: no report
		return err
	}
	if perr := c.finishImport(rep, im.untrusted); err == nil {
		err = perr
	}
	return err
}

// finishImport prints the report (of a run that stopped too: complete is
// false) and a summary of what was not imported.
func (c *cli) finishImport(rep *importReport, untrusted []string) error {
	if err := c.printJSON(rep); err != nil {
		return err
	}
	bad, nc := rep.problems()
	if bad+nc+rep.Stored.Rejected > 0 {
		fmt.Fprintf(c.stderr, "metanode import: %s inputs not imported as bad input, %s values a claim cannot carry, %s claims rejected by the node: see the report's badInput, notCarried and rejected%s\n",
			group(bad), group(nc), group(rep.Stored.Rejected), trustHint(untrusted))
	}
	return nil
}

// importInto runs the import into the node of the data directory: through
// its API when it runs (or --api says where), else into its databases.
func (c *cli) importInto(ctx context.Context, im *importer, o importOptions, tgt *apiTarget) error {
	cfg, layers, err := c.loadConfig(tgt.vals, *tgt.configPath)
	if err != nil {
		return err
	}
	var sink importSink
	if *tgt.api != "" || c.getenv("METANODE_API") != "" || node.DataDirInUse(cfg.Data) {
		cl, base, err := c.target(tgt)
		if err != nil {
			return err
		}
		sink, im.rep.Into = &apiSink{cl: cl, base: base}, "the node at "+base
	} else {
		if sink, err = openNodeSink(ctx, cfg, layers, c.stderr); err != nil {
			return err
		}
		im.rep.Into = "the data directory " + cfg.Data
	}
	defer sink.close()
	im.sink = sink
	key, err := loadImportKey(filepath.Join(cfg.Data, importKeyFile))
	if err != nil {
		return err
	}
	im.key, im.rep.ImportKey = key, key.UID()
	if err := checkImportKey(ctx, sink, key.UID()); err != nil {
		return err
	}
	st, err := loadImportState(filepath.Join(cfg.Data, importStateFile), key.UID())
	if err != nil {
		return err
	}
	run, cursor := st.begin(im.src.name(), im.src.layout(), o.fresh, time.Now())
	im.ts, im.rep.SessionTS, im.rep.Resumed = run.TS, run.TS, cursor != ""
	im.save = func(cur string) error {
		run.Cursor = cur
		return st.save()
	}
	if err := st.save(); err != nil {
		return err
	}
	if cursor != "" {
		fmt.Fprintf(c.stderr, "metanode import: going on from where the run of %s stopped\n", run.Started.Format(time.RFC3339))
	}
	if err := im.run(ctx, cursor, newProgress(c.stderr, im.src.unit(), im.src.total, time.Now)); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted (%w): run the same command again to go on where it stopped", err)
		}
		return err
	}
	run.Finished, run.Cursor = time.Now().UTC(), ""
	return st.save()
}

// loadImportKey reads the node's import key, or makes it (0600) the first
// time. A file that holds no key is never replaced: claims signed with it
// may be held by this node and its peers.
func loadImportKey(path string) (*store.Signer, error) {
	s, err := store.LoadSigner(path)
	if err == nil {
		return s, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("import key %s: %w: restore it from your backup, or move it away to import with a new key", path, err)
	}
	if s, err = store.GenerateSigner(); err != nil {
		return nil, err
	}
	if err := s.WriteFile(path); err != nil {
		if errors.Is(err, fs.ErrExist) { // another import made it first
			return store.LoadSigner(path)
		}
		return nil, fmt.Errorf("import key: %w: run this as the user that owns the data directory, or give its --data", err)
	}
	return s, nil
}

// checkImportKey refuses to import with a key the owner distrusted: its
// claims would count nowhere.
func checkImportKey(ctx context.Context, sink importSink, uid string) error {
	tl, err := sink.trustList(ctx)
	if err != nil {
		return err
	}
	for _, e := range tl.Distrusted {
		if e.UID == uid {
			return fmt.Errorf("the import key %s is distrusted on this node (trust rm), so its claims would not count: 'metanode trust add %s' first to import with it again", uid, uid)
		}
	}
	return nil
}

// importer reads batches from a source, signs the legacy values with the
// import key and stores them, in three stages on their own goroutines
// (read, sign, store), so reading and signing overlap the node's commits.
type importer struct {
	src   importSource
	sink  importSink    // nil: a dry run
	key   *store.Signer // the import key (nil: a dry run)
	ts    uint64        // the session's timestamp
	batch int
	rep   *importReport
	save  func(cursor string) error // records the cursor once a batch is stored
	prog  *progress

	started   bool     // run began: there is a report to print
	retried   bool     // the import key was trusted after the node refused it
	untrusted []string // signers of a v2 truth the node refused as untrusted
}

// run imports from cursor ("" from the start) to the source's end.
func (im *importer) run(ctx context.Context, cursor string, prog *progress) error {
	im.prog, im.started = prog, true
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	read := make(chan *importBatch, 2)
	signed := make(chan *importBatch, 1)
	g.Go(func() error {
		defer close(read)
		return im.src.read(gctx, cursor, im.batch, func(b *importBatch) error {
			select {
			case read <- b:
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		})
	})
	g.Go(func() error {
		defer close(signed)
		for b := range read {
			im.sign(b)
			select {
			case signed <- b:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	g.Go(func() error {
		for b := range signed {
			if err := im.store(gctx, b); err != nil {
				return err
			}
		}
		return nil
	})
	err := g.Wait()
	im.rep.Seconds = time.Since(start).Seconds()
	if im.rep.Seconds > 0 {
		im.rep.PerSecond = float64(prog.claims) / im.rep.Seconds
	}
	im.rep.Complete = err == nil
	return err
}

// sign signs a batch's legacy values on all cores (not in a dry run).
func (im *importer) sign(b *importBatch) {
	if im.key == nil || len(b.items) == 0 {
		return
	}
	out := make([]store.Claim, len(b.items))
	workers := min(runtime.GOMAXPROCS(0), max(1, len(b.items)/64))
	chunk := (len(b.items) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(b.items); lo += chunk {
		hi := min(lo+chunk, len(b.items))
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				it := &b.items[i]
				out[i] = im.key.Text(it.cid, it.key, it.value, im.ts)
			}
		})
	}
	wg.Wait()
	b.signed = out
}

// store hands a batch to the node and records how far the import got.
func (im *importer) store(ctx context.Context, b *importBatch) error {
	n := int64(b.size())
	if im.sink != nil {
		if len(b.signed) > 0 {
			if err := im.submit(ctx, b.signed, b.rids, true); err != nil {
				return err
			}
		}
		if len(b.claims) > 0 {
			if err := im.submit(ctx, b.claims, b.rids, false); err != nil {
				return err
			}
		}
		if err := im.save(b.cursor); err != nil {
			return fmt.Errorf("record the import's progress: %w", err)
		}
	}
	im.prog.add(b.units, n)
	return nil
}

// submit stores claims and counts the node's answers. When the node
// refuses the import key as untrusted (auto-trust is off), the import
// trusts it, as the owner asked for by importing, and submits once more.
func (im *importer) submit(ctx context.Context, claims []store.Claim, rids map[string]string, own bool) error {
	res, err := im.sink.submit(ctx, claims, rids, own)
	if err != nil {
		return err
	}
	if own && !im.retried && refusedUntrusted(res) {
		im.retried = true
		if err := im.sink.trust(ctx, im.key.UID()); err != nil {
			return fmt.Errorf("trust the import key: %w", err)
		}
		if res, err = im.sink.submit(ctx, claims, rids, own); err != nil {
			return err
		}
	}
	if own && refusedUntrusted(res) {
		return fmt.Errorf("the node refuses the import key %s as untrusted: check 'metanode trust ls'", im.key.UID())
	}
	im.tally(claims, res)
	return nil
}

// importResult is the node's answer for one claim.
type importResult struct {
	status, slug, message string
}

var untrustedSlug = store.Slug(store.ErrUntrusted)

func refusedUntrusted(res []importResult) bool {
	for _, r := range res {
		if r.slug == untrustedSlug {
			return true
		}
	}
	return false
}

func (im *importer) tally(claims []store.Claim, res []importResult) {
	s := &im.rep.Stored
	for i, r := range res {
		switch r.status {
		case "accepted":
			s.Accepted++
		case "unchanged":
			s.Unchanged++
		case "stale":
			s.Stale++
		default:
			s.Rejected++
			ex := ""
			if i < len(claims) {
				ex = fmt.Sprintf("%s %s: %s", claims[i].CID, claims[i].Key, r.message)
			}
			im.rep.mu.Lock()
			im.rep.Rejected.note(r.slug, "the node refused these claims", ex)
			im.rep.mu.Unlock()
			if r.slug == untrustedSlug && i < len(claims) && !slices.Contains(im.untrusted, claims[i].UID) {
				im.untrusted = append(im.untrusted, claims[i].UID)
			}
		}
	}
}

// importLogger is the logger of the node an offline import opens: its
// start and stop are not news here, so info is raised to warnings.
func importLogger(w io.Writer, cfg Config) *slog.Logger {
	level := cfg.LogLevel
	if level == "info" {
		level = "warn"
	}
	return newLogger(w, level, cfg.LogFormat)
}
