package api

import (
	"context"
	"encoding/json"
	"time"

	"github.com/metanode/metanode/store"
)

// Store is the claims engine as the API reads it; *store.Store implements it.
type Store interface {
	Record(ctx context.Context, h, as string) (store.Record, error)
	Resolve(ctx context.Context, h string) (string, error)
	Field(ctx context.Context, h, key string) (string, error)
	Claims(ctx context.Context, h string, f store.ClaimFilter) (store.GroupClaims, error)
	// FetchClaims returns every claim of the group holding cid, retractions
	// included (a legacy write reads its own earlier votes).
	FetchClaims(ctx context.Context, cid string) ([]store.Claim, error)
	Merge(ctx context.Context, claims []store.Claim, as string) (store.MergeResult, error)
	RIDs(ctx context.Context) ([]string, error)
	List(ctx context.Context, offset, limit int) ([]store.ListItem, int, error)
	SearchEach(ctx context.Context, q store.SearchQuery, fn func(rid string, fields []store.Field) error) (int, error)
	Schema(ctx context.Context) (map[string]store.SchemaField, error)
	Stats(ctx context.Context) (store.Stats, error)
	LocalFileForCID(ctx context.Context, cid string) (store.LocalFile, error)
	FileTuples(ctx context.Context) ([]store.FileTuple, int64, error)
	KVGet(ctx context.Context, key string) (string, bool, error)
	KVPut(ctx context.Context, key, value string) error
	KVDelete(ctx context.Context, key string) (bool, error)
	Clear(ctx context.Context) (int, error)
	Subscribe(stream store.Stream, after string) (*store.Subscription, error)
	// Explain is a record's claims field by field, with why each won or
	// lost (GET /api/meta/{cid}/explain).
	Explain(ctx context.Context, h string) (store.Explanation, error)
	// RecentEvents are a stream's newest events, oldest first
	// (GET /api/events/files/recent).
	RecentEvents(ctx context.Context, st store.Stream, n int) ([]store.Event, error)
	Snapshot(ctx context.Context, fn func(store.Event) error) (string, error)
	// Gone names, as del events, the merged keys a consumer whose cursor
	// is after may hold that no event will delete any more (a replay
	// after a gap sends them before the snapshot).
	Gone(ctx context.Context, after string, fn func(store.Event) error) error
	// AwaitRebuild returns once no rebuild of the cache runs.
	AwaitRebuild(ctx context.Context) error
}

var _ Store = (*store.Store)(nil)

// Node is what only the running node can answer; node.Node implements it.
type Node interface {
	// SubmitClaims is a local write: auto-trust and vouch for new local
	// signers (when enabled), store, then publish what was stored.
	SubmitClaims(ctx context.Context, claims []store.Claim) ([]store.Result, error)
	// ImportClaims is SubmitClaims with the store's options (POST
	// /api/claims with rids: new records take the rids named). The API
	// sets only RIDs.
	ImportClaims(ctx context.Context, claims []store.Claim, opt store.SubmitOptions) ([]store.Result, error)
	// RemoteRecord answers GET /api/meta/{cid}?remote=1: the local record,
	// or on a local miss a lookup through the swarm. store.ErrNotFound when
	// no peer knows the cid within the timeout.
	RemoteRecord(ctx context.Context, cid, as string) (store.Record, error)
	// RegisterFile hashes and records a file under the files root
	// (POST /api/files/register); rel is relative to the root.
	RegisterFile(ctx context.Context, rel string) (RegisterResult, error)
	SwarmStatus(ctx context.Context) (SwarmStatus, error)
	SwarmPeers(ctx context.Context) ([]PeerInfo, error)
	TrustList(ctx context.Context) (TrustList, error)
	Trust(ctx context.Context, uid string) error
	Distrust(ctx context.Context, uid string) error
	// Invite makes a pairing code valid for ttl (0: the node's default)
	// for POST /api/swarm/invite.
	Invite(ctx context.Context, ttl time.Duration) (InviteResponse, error)
	Health(ctx context.Context) Health
	// Info is the node's own facts for the owner's page (GET /api/node).
	Info(ctx context.Context) NodeInfo
	// Join pairs this running node with the home that made code, in the
	// background (POST /api/swarm/join); JoinStatus is its progress.
	Join(ctx context.Context, code string) (JoinStatus, error)
	JoinStatus() JoinStatus
	// Neighbors answers GET /neighbors: the beacon v2 nodes this node
	// hears, every instance with all, else the latest of each name.
	Neighbors(all bool) NeighborsResponse
}

// NeighborsResponse is the answer of GET /neighbors and /api/neighbors, as
// upstream's: Enabled is false (and the list empty) when the beacon is off.
type NeighborsResponse struct {
	Current   string            `json:"current"` // this node's beacon name
	Enabled   bool              `json:"enabled"`
	Neighbors []json.RawMessage `json:"neighbors"` // beacon rows: node, resources, caps, baseUrl?, addr, lastSeen
	Count     int               `json:"count"`
	Self      json.RawMessage   `json:"self,omitempty"` // this node as its neighbours list it
}

// InviteRequest is the optional body of POST /api/swarm/invite.
type InviteRequest struct {
	TTL string `json:"ttl,omitempty"` // a Go duration ("24h", "30m"); empty: the default (24h)
}

// InviteResponse is the answer of POST /api/swarm/invite: a pairing code
// for `metanode join`, and what it reveals.
type InviteResponse struct {
	Code    string    `json:"code"`
	Expires time.Time `json:"expires"`
	UID     string    `json:"uid"`   // this node's uid: the joiner trusts it
	Swarm   string    `json:"swarm"` // swarm name
	Private bool      `json:"private"`
	Addrs   []string  `json:"addrs"` // this node's addresses in the code
}

// RegisterResult is the answer of POST /api/files/register.
type RegisterResult struct {
	Root    string `json:"root"` // the record's rid
	CID     string `json:"cid"`  // the file's midhash256
	Created bool   `json:"created"`
	Path    string `json:"path"` // from Node: absolute; the API answers it relative to the files root (clean, under plugin/)
	Size    int64  `json:"size"`
}

// SwarmStatus is the answer of GET /api/swarm/status.
type SwarmStatus struct {
	PeerID    string     `json:"peerId"`
	UID       string     `json:"uid"`
	Addrs     []string   `json:"addrs"` // multiaddrs ending in /p2p/<peerId>
	Swarm     string     `json:"swarm"`
	Private   bool       `json:"private"`
	Peers     int        `json:"peers"`
	Trust     string     `json:"trust"`
	Replicate string     `json:"replicate"`
	DHT       DHTStatus  `json:"dht"`
	Sync      SyncStatus `json:"sync"`
	// Errors are recent problems an owner should see, e.g. "swarm key
	// mismatch / cannot negotiate with <peer>".
	Errors []string `json:"errors"`
}

// DHTStatus is the DHT part of SwarmStatus.
type DHTStatus struct {
	Mode         string `json:"mode"` // server or client
	RoutingTable int    `json:"routingTable"`
	Provided     int64  `json:"provided"` // cids provided so far
}

// SyncStatus is the catch-up part of SwarmStatus.
type SyncStatus struct {
	Sessions       int64                   `json:"sessions"`
	ClaimsSent     int64                   `json:"claimsSent"`
	ClaimsReceived int64                   `json:"claimsReceived"`
	Peers          map[string]PeerSyncInfo `json:"peers"`
}

// PeerSyncInfo is the sync state with one peer.
type PeerSyncInfo struct {
	LastSync       time.Time `json:"lastSync,omitzero"`
	LastError      string    `json:"lastError,omitempty"`
	RoundTrips     int       `json:"roundTrips"`
	ClaimsSent     int64     `json:"claimsSent"`
	ClaimsReceived int64     `json:"claimsReceived"`
}

// PeerInfo is one row of GET /api/swarm/peers.
type PeerInfo struct {
	PeerID         string     `json:"peerId"`
	UID            string     `json:"uid"` // the peer's node uid (its peer id's key as a uid)
	Addrs          []string   `json:"addrs"`
	ConnectedSince time.Time  `json:"connectedSince"`
	LatencyMs      float64    `json:"latencyMs"`
	LastSync       *time.Time `json:"lastSync"` // null until a sync with the peer finished
	ClaimsSent     int64      `json:"claimsSent"`
	ClaimsReceived int64      `json:"claimsReceived"`
}

// TrustList is the answer of GET /api/trust.
type TrustList struct {
	Mode    string             `json:"mode"` // list or open
	Trusted []store.TrustEntry `json:"trusted"`
	// Distrusted are the signers the owner blocked (trust rm): they never
	// count, whoever vouches for them (VouchedBy).
	Distrusted []store.TrustEntry `json:"distrusted"`
}

// Health is the answer of GET /health.
type Health struct {
	Status string `json:"status"` // ok or degraded
	// Checks name each part and its state ("ok" or what is wrong).
	Checks map[string]string `json:"checks,omitempty"`
}
