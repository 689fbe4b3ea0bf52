package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults for Config fields left zero.
const (
	DefaultEventRetention = 100_000 // events kept per stream
	DefaultMaxBatch       = 8192    // claims per group commit
)

// Config configures a Store. Zero fields take the documented defaults.
type Config struct {
	TruthPath string // truth database file (backed up)
	CachePath string // cache database file (derived, rebuildable)

	Logger     *slog.Logger          // default slog.Default()
	Registerer prometheus.Registerer // metrics; nil registers nothing

	MaxSkew        time.Duration // future-timestamp allowance; default DefaultMaxSkew
	EventRetention int           // events kept per stream; default DefaultEventRetention
	MaxBatch       int           // claims per commit; default DefaultMaxBatch
	// SubscriberBuffer is how many events a live subscriber may lag before
	// it is dropped; default DefaultSubscriberBuffer. Up to 4096 of them
	// wait in its channel; past that it is fed from the cache.
	SubscriberBuffer int

	Trust  TrustMode // default TrustList
	OwnUID string    // this node's uid: always trusted, cannot be distrusted

	Scrub ScrubConfig // the background signature check (scrub.go)

	Now func() time.Time // clock; default time.Now

	Search SearchConfig // what searches may take of the node
}

// Store is the claims engine. New does no I/O; Open opens both databases,
// checks the schema, recovers the cache and starts the writer; Close stops
// it and is idempotent.
type Store struct {
	cfg Config
	log *slog.Logger
	met *metrics

	life   sync.Mutex
	state  atomic.Int32 // stateNew, stateOpen, stateClosed
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	truthW, cacheW *sql.DB // one connection each, owned by the writer
	truthR, cacheR *sql.DB // read pools
	rd             readStmts
	sp             searchPool // searches' own connections and their admission
	reqs           chan *request
	writerDone     chan struct{}
	truthID        string
	truthNew       bool // this Open created the truth file

	groups *groups
	princ  *principals
	trust  atomic.Pointer[trustView]
	stats  statsCounters
	health health      // the writer's failing commits, the sync-set loader's error (health.go)
	damage damageState // damaged rows reported, the quarantine, a cache check (damage.go)

	sync       *SyncSet
	syncReady  chan struct{}
	syncMu     sync.Mutex
	syncLoaded atomic.Bool
	syncLog    []syncOp // resolved changes made while the loader runs

	trustCh    chan struct{}
	hub        *hub
	rebuilding rebuildGate // a rebuild of the serving cache runs (AwaitRebuild)

	peerMu   sync.Mutex
	peerCIDs map[string]string // uid → PeerIDCID(uid)

	// Fault seams for tests: when set, called inside the truth or cache
	// transaction of each batch; an error fails that transaction.
	failTruth, failCache func() error
	// duringRebuild, when set, is called by a rebuild of the serving cache
	// once replays wait for it (gone_internal_test.go).
	duringRebuild func()
	// Re-merge seams (remerge.go): the chunk size (0: remergeChunk), and a
	// call before each chunk with the records still due.
	remergeChunk  int
	beforeRemerge func(due int)
}

const (
	stateNew int32 = iota
	stateOpen
	stateClosed
)

// statsCounters are published by the writer after each commit.
type statsCounters struct {
	records, live, tomb, files, fileSize, lastSeq, appliedSeq atomic.Int64
}

// New returns an unopened store.
func New(cfg Config) *Store {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxSkew <= 0 {
		cfg.MaxSkew = DefaultMaxSkew
	}
	if cfg.EventRetention <= 0 {
		cfg.EventRetention = DefaultEventRetention
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.SubscriberBuffer <= 0 {
		cfg.SubscriberBuffer = DefaultSubscriberBuffer
	}
	if cfg.Trust == "" {
		cfg.Trust = TrustList
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Search.defaults()
	cfg.Scrub = cfg.Scrub.withDefaults()
	s := &Store{
		cfg:        cfg,
		log:        cfg.Logger.With("component", "store"),
		groups:     newGroups(),
		princ:      newPrincipals(),
		sync:       NewSyncSet(),
		syncReady:  make(chan struct{}),
		trustCh:    make(chan struct{}, 1),
		writerDone: make(chan struct{}),
		peerCIDs:   map[string]string{},
		damage:     newDamageState(),
	}
	s.met = newMetrics(cfg.Registerer)
	s.sp = searchPool{admit: newAdmission(cfg.Search, s.met.searches), each: searchEach}
	s.hub = newHub(s)
	return s
}

// Open opens the databases and starts the writer. ctx bounds only Open.
// A cache found damaged at start (truth checks out) is derived data: it
// is deleted and Open runs once more, rebuilding it.
func (s *Store) Open(ctx context.Context) error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.state.Load() != stateNew {
		return fmt.Errorf("open store: %w", ErrClosed)
	}
	err := s.open(ctx)
	if errors.Is(err, errCacheDamaged) {
		s.log.Warn("the cache is damaged; deleting it, it is rebuilt from truth", "cache", s.cfg.CachePath, "err", err)
		for _, p := range []string{s.cfg.CachePath, s.cfg.CachePath + "-wal", s.cfg.CachePath + "-shm"} {
			if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				return fmt.Errorf("%w (deleting it failed: %v)", err, rerr)
			}
		}
		err = s.open(ctx)
		if errors.Is(err, errCacheDamaged) {
			// A new cache failed the same way: the fault is in truth after
			// all (quick_check does not compare indexes with their tables).
			return fmt.Errorf("%w %s: the start fails even with a new cache (%v): check it with sqlite3 truth.db 'PRAGMA integrity_check', and restore truth.db from a backup (docs/operations.md, Restore)",
				ErrDamaged, s.cfg.TruthPath, err)
		}
	}
	return explainStart(s.cfg.TruthPath, s.cfg.CachePath, err)
}

func (s *Store) open(ctx context.Context) (err error) {
	if s.cfg.TruthPath == "" || s.cfg.CachePath == "" {
		return errors.New("open store: TruthPath and CachePath are required")
	}
	if s.cfg.Trust != TrustList && s.cfg.Trust != TrustOpen {
		return fmt.Errorf("open store: unknown trust mode %q", s.cfg.Trust)
	}
	if s.cfg.OwnUID != "" {
		if err := CheckUID(s.cfg.OwnUID); err != nil {
			return fmt.Errorf("open store: own uid: %w", err)
		}
	}
	var closers []func() error
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				_ = closers[i]()
			}
		}
	}()
	truthPath, err := filepath.Abs(s.cfg.TruthPath)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	cachePath, err := filepath.Abs(s.cfg.CachePath)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	for _, p := range []string{truthPath, cachePath} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("open store: %w", err)
		}
	}

	// Truth: refuse an empty file, open, gate, stamp.
	if _, err := checkTruthFile(truthPath); err != nil {
		return fmt.Errorf("open truth: %w", err)
	}
	if s.truthW, err = openDB(truthPath, truthWriter, 0); err != nil {
		return fmt.Errorf("open truth: %w", damaged(truthPath, err))
	}
	closers = append(closers, s.truthW.Close)
	tconn, err := s.truthW.Conn(ctx)
	if err != nil {
		return fmt.Errorf("open truth %s: %w", truthPath, damaged(truthPath, err))
	}
	closers = append(closers, tconn.Close)
	if s.truthID, s.truthNew, err = prepareTruth(ctx, tconn, truthPath); err != nil {
		return fmt.Errorf("open truth: %w", damaged(truthPath, err))
	}

	// Cache: a file of another layout, or one the last run found damaged,
	// is derived data; start it over.
	if err := s.dropDamagedCache(ctx, tconn, cachePath); err != nil {
		return fmt.Errorf("open cache: %w", err)
	}
	cconn, err := s.openCache(ctx, cachePath)
	if err != nil {
		return fmt.Errorf("open cache: %w", err)
	}
	closers = append(closers, s.cacheW.Close, cconn.Close)
	s.warnNewTruthBesideCache(ctx, cconn, truthPath, cachePath)

	readConns := max(4, 2*runtime.GOMAXPROCS(0))
	if s.truthR, err = openDB(truthPath, readPool, readConns); err != nil {
		return fmt.Errorf("open truth: %w", damaged(truthPath, err))
	}
	closers = append(closers, s.truthR.Close)
	if s.cacheR, err = openDB(cachePath, readPool, readConns); err != nil {
		return fmt.Errorf("open cache: %w", err)
	}
	closers = append(closers, s.cacheR.Close)
	if s.sp.db, err = openDB(cachePath, readPool, s.cfg.Search.Slots); err != nil {
		return fmt.Errorf("open cache: %w", err)
	}
	closers = append(closers, s.sp.db.Close)
	if err := s.prepareReads(ctx); err != nil {
		return fmt.Errorf("open store: %w", damagedAtStart(ctx, truthPath, cachePath, err))
	}

	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.reqs = make(chan *request, 1024)
	ready := make(chan error, 1)
	s.writerDone = make(chan struct{}) // a second try after a damaged cache starts a new writer
	s.wg.Add(1)
	go s.runWriter(ctx, tconn, cconn, truthPath, ready)
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		s.cancel(ErrClosed)
		s.wg.Wait()
		// Loading truth's state, a regroup and the cache's rebuild or
		// catch-up read truth past its first open: a damaged page shows
		// up here as often as there.
		return fmt.Errorf("open store: %w", damagedAtStart(ctx, truthPath, cachePath, err))
	}
	s.wg.Add(1)
	go s.loadSyncSet()
	if s.cfg.Scrub.Period > 0 {
		s.wg.Add(1)
		go s.scrub()
	}
	s.state.Store(stateOpen)
	return nil
}

// damaged marks SQLite's "not a database" and "corrupt" answers for a
// truth file with ErrDamaged and says what to do (the truth is the one
// file that cannot be rebuilt).
func damaged(path string, err error) error {
	if !isCorrupt(err) {
		return err
	}
	return damagedFile(path, err)
}

// damagedFile is ErrDamaged for the truth file at path, with what to do.
func damagedFile(path string, err error) error {
	return fmt.Errorf("%w %s (%w): restore truth.db from a backup (docs/operations.md, Restore), or move it away to start empty",
		ErrDamaged, path, err)
}

// SQLite primary result codes (sqlite3.h).
const (
	sqliteCorrupt = 11
	sqliteNotADB  = 26
)

// openCache opens the cache and checks its layout, deleting and
// recreating a file this build did not write.
func (s *Store) openCache(ctx context.Context, path string) (*sql.Conn, error) {
	for attempt := 0; ; attempt++ {
		db, err := openDB(path, cacheWriter, 0)
		if err != nil {
			return nil, err
		}
		c, err := db.Conn(ctx)
		ok := false
		if err == nil {
			ok, err = prepareCache(ctx, c)
			if !ok || err != nil {
				c.Close()
			}
		}
		if err == nil && ok {
			s.cacheW = db
			return c, nil
		}
		db.Close()
		if attempt > 0 {
			if err == nil {
				err = errors.New("not a cache this build can use")
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The cache is derived data: a file of another layout, or one that
		// is not a database at all, is deleted and rebuilt from truth.
		s.log.Warn("the cache is unusable; rebuilding it from truth", "path", path, "err", err)
		if err := removeDBFiles(path); err != nil {
			return nil, err
		}
	}
}

// dropDamagedCache deletes a cache the last run found damaged (truth's
// meta cache_damaged, see markCacheDamaged): it is rebuilt from truth.
func (s *Store) dropDamagedCache(ctx context.Context, c *sql.Conn, path string) error {
	var at string
	err := c.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = 'cache_damaged'`).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	s.log.Warn("the cache was found damaged while the node ran; deleting it, it is rebuilt from truth", "cache", path, "found", at)
	if err := removeDBFiles(path); err != nil {
		return err
	}
	_, err = c.ExecContext(ctx, `DELETE FROM meta WHERE name = 'cache_damaged'`)
	return err
}

// Close stops the writer, waits for it and closes the databases.
// A second call returns ErrClosed.
func (s *Store) Close() error {
	s.life.Lock()
	defer s.life.Unlock()
	switch s.state.Swap(stateClosed) {
	case stateClosed:
		return ErrClosed
	case stateNew:
		return nil
	}
	s.cancel(ErrClosed)
	s.hub.close() // no subscription starts a pump after this
	s.wg.Wait()
	var errs []error
	for _, db := range []*sql.DB{s.sp.db, s.cacheR, s.truthR, s.cacheW, s.truthW} {
		if err := db.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// ready reports ErrClosed unless the store is open.
func (s *Store) ready() error {
	if s.state.Load() != stateOpen {
		return ErrClosed
	}
	return nil
}

// do queues a request for the writer and waits for its answer.
func (s *Store) do(ctx context.Context, r *request) error {
	if err := s.ready(); err != nil {
		return err
	}
	r.done = make(chan struct{})
	s.met.queue.Inc()
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		s.met.queue.Dec()
		return ctx.Err()
	case <-s.writerDone:
		s.met.queue.Dec()
		return ErrClosed
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.writerDone:
		// The writer answers every request it took before it stops.
		select {
		case <-r.done:
			return r.err
		default:
			return ErrClosed
		}
	}
}

// peerCID returns PeerIDCID(uid), cached.
func (s *Store) peerCID(uid string) string {
	s.peerMu.Lock()
	defer s.peerMu.Unlock()
	if c, ok := s.peerCIDs[uid]; ok {
		return c
	}
	c, _ := PeerIDCID(uid)
	if len(s.peerCIDs) > 1<<14 {
		clear(s.peerCIDs)
	}
	s.peerCIDs[uid] = c
	return c
}
