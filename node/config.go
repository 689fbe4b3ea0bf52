package node

import (
	"log/slog"
	"net/netip"
	"time"

	"github.com/metanode/metanode/store"
)

// Replicate says which peer claims a node keeps.
type Replicate string

const (
	// ReplicateAll keeps every claim of a trusted signer.
	ReplicateAll Replicate = "all"
	// ReplicateInterest keeps only claims about cids the node already has a
	// record for (local files, looked-up cids and cids linked to them);
	// gossip is still validated and relayed.
	ReplicateInterest Replicate = "interest"
)

// File names inside the data directory.
const (
	KeyFile      = "node.key"     // the node's secp256k1 identity, hex, 0600
	TruthFile    = "truth.db"     // the truth database: back it up
	CacheFile    = "cache.db"     // the derived cache: rebuilt when missing
	SwarmKeyFile = "swarm.key"    // a private swarm's pre-shared key
	ConfigFile   = "metanode.yml" // optional config, read by serve
	// LegacyKeyFile signs the unsigned writes of the single-box core's
	// routes (legacy-writes: sign), hex, 0600.
	LegacyKeyFile = "legacy-writer.key"
	TokenFile     = "api.token" // the API token, 0600, made at first start
)

// DefaultHTTPAddr is where the local API listens unless told otherwise.
const DefaultHTTPAddr = "127.0.0.1:9000"

// Config configures a Node. Zero fields take the documented defaults.
type Config struct {
	// DataDir holds the node key and, by default, both databases. Required;
	// created 0700 when missing.
	DataDir   string
	KeyPath   string // node identity; default DataDir/node.key (made on first Open)
	TruthPath string // default DataDir/truth.db
	CachePath string // default DataDir/cache.db

	HTTPAddr    string   // local API; default DefaultHTTPAddr; "127.0.0.1:0" picks a free port
	HTTPAllowed []string // Host names besides loopback the API answers to (api.Config.AllowedHosts)
	Access      Access   // who may use the API besides loopback

	Listen       []string // swarm multiaddrs; nil: the swarm's default (TCP and QUIC on swarm.DefaultPort)
	Bootstrap    []string // peers to join through (multiaddrs ending in /p2p/<peerId>)
	SwarmName    string   // default swarm.DefaultName ("metamesh")
	SwarmKeyPath string   // go-ipfs swarm.key file: a private swarm; "" for a public one

	FilesRoot string // files root for the watcher (and WebDAV); "" runs no watcher
	// WebDAVWrites lets WebDAV clients write under the files root's
	// plugin/ (webdav-writes); otherwise /webdav/ is read-only.
	WebDAVWrites bool

	Trust store.TrustMode // default store.TrustList
	// NoAutoTrust turns off trusting and vouching for local writers: then a
	// local write by an untrusted signer is rejected with untrusted_signer.
	NoAutoTrust bool
	Replicate   Replicate // default ReplicateAll

	// RefuseLegacyWrites answers the single-box core's unsigned write
	// routes (PATCH /meta/{h}, …) 410 gone instead of signing them with
	// the legacy writer key (legacy-writes: refuse).
	RefuseLegacyWrites bool
	LegacyKeyPath      string // default DataDir/legacy-writer.key (made on first Open)

	// Beacon advertises the API to the meta services by beacon v2 (UDP
	// multicast on the local network) and lists what it hears
	// (GET /neighbors). BeaconGroup and BeaconInterval default to the
	// protocol's (239.255.99.1:9099, 10 s).
	Beacon         bool
	BeaconGroup    string
	BeaconInterval time.Duration
	// LeaderFile, when set, is written with the API's URLs once it serves
	// (upstream's <META_CORE_PATH>/locks/kv-leader.info) and removed on Close.
	LeaderFile string

	MDNS         bool     // LAN discovery
	DHTServer    bool     // kad-dht server mode
	RelayService bool     // act as a relay (bootstrap profile)
	PeerExchange bool     // gossipsub peer exchange (bootstrap profile)
	MaxConns     int      // connection manager high water; default swarm.DefaultMaxConns
	Public       bool     // force public reachability (a bootstrap node on a public address)
	PortMap      bool     // ask the router for a port mapping (UPnP / NAT-PMP)
	Relays       []string // static relays (multiaddrs with /p2p/) for a home behind NAT

	SyncInterval  time.Duration // periodic reconciliation; default the swarm's
	LookupTimeout time.Duration // remote lookups; default the swarm's

	// OnJoined, when set, records a join made from the owner's page
	// (POST /api/swarm/join) once the inviter accepted: the command writes
	// the inviter's addresses to the config's bootstrap, as join does.
	OnJoined func(Invite) error

	// StoreOnly opens the identity and the store alone: no swarm, watcher
	// or API, and no goroutine of the node's own (metanode import into a
	// stopped node's data directory). What it stores is shared when the
	// node next serves (catch-up sends it to peers).
	StoreOnly bool

	Scrub store.ScrubConfig // the store's background signature check; zero: its defaults

	Logger *slog.Logger // default slog.Default()
	Now    func() time.Time
}

// Access says who may use the API besides loopback callers (docs/http.md
// "Who may use the API"). The API token is DataDir/api.token, made at the
// first Open; without a data directory there is none.
type Access struct {
	Socket        string         // a Unix socket served besides HTTPAddr (api.Config.Socket)
	LocalNetworks []netip.Prefix // callers from these networks are local
	CORSOrigins   []string       // browser origins answered with CORS headers
	// GUIUser and GUIPassword (a bcrypt hash) open the owner's page to
	// browsers beyond loopback (api.Config.GUIUser).
	GUIUser     string
	GUIPassword string
}

func (c Config) withDefaults() Config {
	if c.KeyPath == "" {
		c.KeyPath = join(c.DataDir, KeyFile)
	}
	if c.TruthPath == "" {
		c.TruthPath = join(c.DataDir, TruthFile)
	}
	if c.CachePath == "" {
		c.CachePath = join(c.DataDir, CacheFile)
	}
	if c.LegacyKeyPath == "" {
		c.LegacyKeyPath = join(c.DataDir, LegacyKeyFile)
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = DefaultHTTPAddr
	}
	if c.Trust == "" {
		c.Trust = store.TrustList
	}
	if c.Replicate == "" {
		c.Replicate = ReplicateAll
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}
