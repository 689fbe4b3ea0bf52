package store

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// errNotImplemented marks the parts of the contract still being built.
var errNotImplemented = errors.New("not implemented")

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

	Trust  TrustMode // default TrustList
	OwnUID string    // this node's uid: always trusted, cannot be distrusted

	Now func() time.Time // clock; default time.Now
}

// Store is the claims engine. New does no I/O; Open opens both databases,
// checks the schema, recovers the cache and starts the writer; Close stops
// it and is idempotent.
type Store struct {
	cfg Config
}

// New returns an unopened store.
func New(cfg Config) *Store { return &Store{cfg: cfg} }

// Open opens the databases and starts the writer. ctx bounds only Open.
func (s *Store) Open(ctx context.Context) error { return errNotImplemented }

// Close stops the writer, waits for it and closes the databases.
// A second call returns ErrClosed.
func (s *Store) Close() error { return errNotImplemented }

// Submit checks, verifies (in parallel, skipping claims already stored) and
// stores claims, and returns one result per claim in order once the commit
// is durable. One bad claim never fails the others; the error is for the
// whole call (store closed, ctx done, disk failure) and then nothing of the
// call is acknowledged.
func (s *Store) Submit(ctx context.Context, claims []Claim, opt SubmitOptions) ([]Result, error) {
	return nil, errNotImplemented
}

// ---- records ----

// Record returns the merged view of the record that h names (a rid or any
// cid of the group). as, when set, overlays that signer's own live text
// votes. ErrNotFound when h is unknown or the record has no fields.
func (s *Store) Record(ctx context.Context, h, as string) (Record, error) {
	return Record{}, errNotImplemented
}

// Resolve returns the rid of h (a rid or a cid).
func (s *Store) Resolve(ctx context.Context, h string) (string, error) {
	return "", errNotImplemented
}

// Field returns one merged value of the record h names.
func (s *Store) Field(ctx context.Context, h, key string) (string, error) {
	return "", errNotImplemented
}

// Claims returns the live claims of the record h names.
func (s *Store) Claims(ctx context.Context, h string, f ClaimFilter) (GroupClaims, error) {
	return GroupClaims{}, errNotImplemented
}

// Merge checks and verifies claims and merges them in memory, storing
// nothing; as overlays that signer's votes (given and held by this node).
func (s *Store) Merge(ctx context.Context, claims []Claim, as string) (MergeResult, error) {
	return MergeResult{}, errNotImplemented
}

// RIDs returns every record id, sorted.
func (s *Store) RIDs(ctx context.Context) ([]string, error) { return nil, errNotImplemented }

// List returns a page of records in rid order and the total count.
func (s *Store) List(ctx context.Context, offset, limit int) ([]ListItem, int, error) {
	return nil, 0, errNotImplemented
}

// Search returns a page of matching records in rid order and the number of hits.
func (s *Store) Search(ctx context.Context, q SearchQuery) ([]SearchHit, int, error) {
	return nil, 0, errNotImplemented
}

// Schema counts merged fields by path (numeric segments folded to "*").
func (s *Store) Schema(ctx context.Context) (map[string]SchemaField, error) {
	return nil, errNotImplemented
}

// Stats returns store-wide counters.
func (s *Store) Stats(ctx context.Context) (Stats, error) { return Stats{}, errNotImplemented }

// ---- local files ----

// ApplyFiles applies file watcher changes in one transaction.
func (s *Store) ApplyFiles(ctx context.Context, updates []FileUpdate) ([]FileResult, error) {
	return nil, errNotImplemented
}

// LocalFiles returns every local_file row (the watcher compares them with
// the disk to skip unchanged files).
func (s *Store) LocalFiles(ctx context.Context) ([]LocalFile, error) {
	return nil, errNotImplemented
}

// LocalFileForCID returns the local file of the record holding cid (the
// lexicographically first path). ErrNotFound when there is none.
func (s *Store) LocalFileForCID(ctx context.Context, cid string) (LocalFile, error) {
	return LocalFile{}, errNotImplemented
}

// FileTuples lists every record with a local file, and their total size.
func (s *Store) FileTuples(ctx context.Context) ([]FileTuple, int64, error) {
	return nil, 0, errNotImplemented
}

// ---- scratch keys and wipe ----

// KVGet reads a service scratch key.
func (s *Store) KVGet(ctx context.Context, key string) (string, bool, error) {
	return "", false, errNotImplemented
}

// KVPut writes a service scratch key; reserved prefixes give ErrReservedKV.
func (s *Store) KVPut(ctx context.Context, key, value string) error { return errNotImplemented }

// KVDelete deletes a service scratch key and reports whether it existed.
func (s *Store) KVDelete(ctx context.Context, key string) (bool, error) {
	return false, errNotImplemented
}

// Clear wipes both databases (trust list and identity excepted) and returns
// how many claims were deleted.
func (s *Store) Clear(ctx context.Context) (int, error) { return 0, errNotImplemented }

// ---- events ----

// Subscribe follows a stream. after == "": live tail only; a known id:
// replay strictly after it, then live; an id older than retention: the
// subscription's Gap is set and replay starts at the oldest retained event.
func (s *Store) Subscribe(stream Stream, after string) (*Subscription, error) {
	return nil, errNotImplemented
}

// Snapshot calls fn with one "set" event per merged key (key
// file:<rid>/<field>) as of one consistent read, and returns the id of the
// newest meta event at that point ("" when the stream is empty), to
// Subscribe after.
func (s *Store) Snapshot(ctx context.Context, fn func(Event) error) (string, error) {
	return "", errNotImplemented
}

// Subscription is a live feed of one stream.
type Subscription struct {
	C   <-chan Event // closed when dropped as too slow, on Close, or when the store closes
	Gap *Gap
}

// Close stops the subscription.
func (sub *Subscription) Close() {}

// Err says why C was closed: ErrSlowConsumer, ErrClosed, or nil after Close.
func (sub *Subscription) Err() error { return nil }

// ErrSlowConsumer closes a subscription whose buffer overflowed.
var ErrSlowConsumer = errors.New("subscriber too slow: buffer overflowed")

// ---- trust ----

// TrustMode returns the node's policy.
func (s *Store) TrustMode() TrustMode { return s.cfg.Trust }

// Trusted reports whether claims of uid count (fast, in memory).
func (s *Store) Trusted(uid string) bool { return false }

// TrustList returns every signer this node accepts, and why.
func (s *Store) TrustList(ctx context.Context) ([]TrustEntry, error) {
	return nil, errNotImplemented
}

// Trust puts uid on the trust list (lifting a distrust).
func (s *Store) Trust(ctx context.Context, uid, note string) error { return errNotImplemented }

// Distrust removes uid from the trust list and blocks it even when vouched
// for, until trusted again. Its claims stay in truth but stop counting.
func (s *Store) Distrust(ctx context.Context, uid string) error { return errNotImplemented }

// TrustChanges receives a value (coalesced) whenever the effective trusted
// set changes, by the list or by a vouch claim; the swarm then re-syncs.
func (s *Store) TrustChanges() <-chan struct{} { return nil }

// ---- swarm support ----

// SyncSet is the (ts, id) set of the claims this node shares: every stored
// claim of a trusted signer, tombstones included. Wait for SyncReady first.
func (s *Store) SyncSet() *SyncSet { return nil }

// SyncReady is closed once the sync set is loaded (in the background after Open).
func (s *Store) SyncReady() <-chan struct{} { return nil }

// ClaimsByItems returns the stored claims with these (ts, id), skipping any
// no longer stored.
func (s *Store) ClaimsByItems(ctx context.Context, items []SyncItem) ([]Claim, error) {
	return nil, errNotImplemented
}

// ClaimsInRange returns up to limit shared claims with lo <= (ts, id) < hi, in order.
func (s *Store) ClaimsInRange(ctx context.Context, lo, hi SyncItem, limit int) ([]Claim, error) {
	return nil, errNotImplemented
}

// FetchClaims returns every shared claim (tombstones included) of the group
// holding cid, for the fetch protocol. Empty when cid is unknown.
func (s *Store) FetchClaims(ctx context.Context, cid string) ([]Claim, error) {
	return nil, errNotImplemented
}

// CIDs returns up to limit cids that have shared claims, after the given
// one in string order ("" from the start): what the node provides in the DHT.
func (s *Store) CIDs(ctx context.Context, after string, limit int) ([]string, error) {
	return nil, errNotImplemented
}

// HasCID reports whether cid belongs to a record (claimed, linked, or a local file).
func (s *Store) HasCID(ctx context.Context, cid string) (bool, error) {
	return false, errNotImplemented
}
