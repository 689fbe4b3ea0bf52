package store

import (
	"encoding/json"
	"time"
)

// Outcome is what happened to one submitted claim (claims.md §4).
type Outcome uint8

const (
	Accepted  Outcome = iota + 1 // became the row, value differs from the row it replaced
	Unchanged                    // same id already stored, or became the row with the same value
	Stale                        // the stored row wins by (ts, id)
	Rejected                     // invalid or refused by policy; Result.Err says why
)

func (o Outcome) String() string {
	switch o {
	case Accepted:
		return "accepted"
	case Unchanged:
		return "unchanged"
	case Stale:
		return "stale"
	case Rejected:
		return "rejected"
	}
	return "unknown"
}

// Origin says where a submitted claim came from.
type Origin uint8

const (
	OriginLocal Origin = iota // the local HTTP API (the owner's plugins)
	OriginPeer                // gossip or sync from another node
	OriginFetch               // a remote lookup's fetch
)

// SubmitOptions qualify a Submit call.
type SubmitOptions struct {
	Origin Origin
	// Verified means the caller already verified every signature (the gossip
	// validator does, in parallel); the store then skips verification.
	Verified bool
	// RIDs names the record id wanted for a cid that has no record yet
	// (cid → rid): metanode import keeps the rids of the store it imports.
	// A hint is taken only when it is a well-formed rid that no group has;
	// otherwise the record gets a fresh rid as usual. It never moves a cid
	// that already has a record, and never joins two groups: links do.
	RIDs map[string]string
}

// Result is the outcome of one submitted claim, in submission order.
type Result struct {
	ID      ID
	Outcome Outcome
	Err     error // why it was rejected (wraps a rejection sentinel)
	// Stored is true when this claim became the stored row and was not stored
	// before: Accepted, or Unchanged with a new id. Such claims are worth
	// forwarding to other nodes.
	Stored bool
}

// Record is the merged view of one record (a cid group).
type Record struct {
	RID  string
	CIDs []string // the group's cids, sorted
	// Fields is the flat merged view: one value per key, including
	// cids/<cid> = "true" for every cid of the group and the box-local
	// filePath, sizeByte and mtimeNano.
	Fields       map[string]string
	CanonicalCID string   // derived by rank on read
	Paths        []string // every local path holding one of the group's cids, sorted
}

// ClaimFilter narrows the claims of a group.
type ClaimFilter struct {
	Key string // exact key; "" for all
	UID string // exact signer; "" for all
}

// GroupClaims are the live signed claims of one record.
type GroupClaims struct {
	RID    string
	CIDs   []string
	Claims []Claim // every live claim (text and ciphertext) of every signer; no tombstones
}

// MergeResult is a merge computed in memory (POST /api/merge).
type MergeResult struct {
	Fields   map[string]string
	NSrc     map[string]int
	Rejected []Rejection
}

// Rejection names one refused input claim by its index.
type Rejection struct {
	Index int
	Err   error
}

// ListItem is one row of the record listing.
type ListItem struct {
	RID, Title, FileName, FilePath, Type, Year string
}

// SearchFilter constrains one property: values OR together, filters AND.
type SearchFilter struct {
	Property string
	Values   []string
	Exact    bool
}

// SearchQuery is a record search (POST /api/metadata/search).
type SearchQuery struct {
	Query   string // whitespace tokens, each a case-insensitive substring of the haystack
	Filters []SearchFilter
	Offset  int
	Limit   int // <= 0: the default of 100
}

// SearchHit is one matching record.
type SearchHit struct {
	RID    string
	Fields map[string]string
}

// FileTuple is one local file as consumers list them.
type FileTuple struct {
	RID       string
	FilePath  string
	SizeByte  int64
	MtimeNano int64
}

// LocalFile is one row of local_file: a file under the files root.
type LocalFile struct {
	Path      string // absolute path
	CID       string // its midhash256
	Size      int64
	MtimeNano int64
}

// FileOp is a file watcher change.
type FileOp string

const (
	FileAdd    FileOp = "add"
	FileChange FileOp = "change"
	FileDelete FileOp = "delete"
	FileRename FileOp = "rename"
	FileReset  FileOp = "reset" // forget every local file and clear the file event stream
)

// FileUpdate is one change reported by the file watcher (or
// POST /api/files/register). The store applies it to local_file, gives a new
// cid a record, updates the merged box-local fields with their meta events,
// and appends one file event, all in one cache transaction.
type FileUpdate struct {
	Op        FileOp
	File      LocalFile // the file after the change (Path only, for delete)
	OldPath   string    // absolute; rename only
	EventPath string    // path as shown in the file event: relative to the files root
	EventOld  string    // old path as shown in the event (rename)
}

// FileResult says what a FileUpdate did.
type FileResult struct {
	RID     string // the record holding the file's cid
	Created bool   // the file was not known before
}

// SchemaField describes one merged field path across records.
type SchemaField struct {
	Type  string `json:"type"` // string, int, float, bool or mixed
	Count int    `json:"count"`
}

// Stats are store-wide counters.
type Stats struct {
	Records    int64 `json:"records"`
	Claims     int64 `json:"claims"`     // live claims in truth (tombstones excluded)
	Tombstones int64 `json:"tombstones"` // retractions kept
	Signers    int64 `json:"signers"`
	Files      struct {
		Count     int64 `json:"count"`
		TotalSize int64 `json:"totalSize"`
	} `json:"files"`
	LastSeq    int64 `json:"lastSeq"`
	AppliedSeq int64 `json:"appliedSeq"`
}

// Stream names an event stream.
type Stream string

const (
	StreamMeta  Stream = "meta:events" // every change of a merged value
	StreamFiles Stream = "file:events" // the file watcher's changes
)

// Event is one stream entry. Data is the JSON object sent as SSE data.
type Event struct {
	ID   string // "<ms13>-<seq10>": opaque, increasing
	Type string // meta: set|del; files: add|change|delete|rename|reset
	Data json.RawMessage
}

// Gap reports that a subscriber's cursor was older than retention.
type Gap struct {
	Requested  string `json:"requested"`
	ResumeFrom string `json:"resumeFrom"`
	Reason     string `json:"reason"`
	// Reset says the stream started over since the cursor (the cache was
	// rebuilt or cleared, or the watcher reset): what the consumer holds
	// from before may name keys or files that no event will ever remove.
	// Otherwise only events were trimmed.
	Reset bool `json:"-"`
}

// TrustMode is the node's trust policy.
type TrustMode string

const (
	TrustList TrustMode = "list" // signers on the trust list, plus one-hop vouches
	TrustOpen TrustMode = "open" // any valid signer
)

// TrustEntry is one signer this node accepts, and why.
type TrustEntry struct {
	UID       string    `json:"uid"`
	Source    string    `json:"source"` // "own", "list" or "vouch"; "distrusted" in Store.DistrustList
	VouchedBy []string  `json:"vouchedBy,omitempty"`
	Note      string    `json:"note,omitempty"`
	Added     time.Time `json:"added,omitzero"`
}
