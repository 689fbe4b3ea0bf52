package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/metanode/metanode/node"
)

// Config is everything `serve` can be told. Each setting has one name: the
// YAML key, the flag (--name) and the variable METANODE_<NAME> (upper case,
// '-' as '_'); a few also answer to their upstream variable (META_CORE_*,
// FILES_PATH). Precedence: defaults < YAML < environment < flags.
type Config struct {
	Data           string   `yaml:"data"`               // data directory (keys, databases)
	TruthDB        string   `yaml:"truth-db"`           // truth database; default <data>/truth.db
	CacheDB        string   `yaml:"cache-db"`           // cache database; default <data>/cache.db
	HTTP           string   `yaml:"http"`               // API listen address
	HTTPAllowed    []string `yaml:"http-allowed-hosts"` // Host names besides loopback the API answers to
	HTTPSocket     string   `yaml:"http-socket"`        // a Unix socket the API serves too
	LocalNetworks  []string `yaml:"local-networks"`     // CIDRs whose callers are local
	CORSOrigins    []string `yaml:"cors-origins"`       // browser origins answered with CORS
	GUIUser        string   `yaml:"gui-user"`           // the owner's page beyond loopback: user
	GUIPassword    string   `yaml:"gui-password"`       // and bcrypt hash of the password
	Listen         []string `yaml:"listen"`             // swarm listen multiaddrs
	Bootstrap      []string `yaml:"bootstrap"`          // peers to join through (…/p2p/<peerId>)
	Swarm          string   `yaml:"swarm"`              // swarm name
	SwarmKey       string   `yaml:"swarm-key"`          // pre-shared key file: a private swarm
	Files          string   `yaml:"files"`              // files root for the watcher; "" = none
	Trust          string   `yaml:"trust"`              // open | list
	AutoTrustLocal bool     `yaml:"auto-trust-local"`   // trust and vouch for local writers
	Replicate      string   `yaml:"replicate"`          // all | interest
	Profile        string   `yaml:"profile"`            // home | bootstrap
	MDNS           bool     `yaml:"mdns"`               // LAN discovery
	MaxConns       int      `yaml:"max-conns"`          // connection manager high water
	Relays         []string `yaml:"relays"`             // static relays for a home behind NAT
	PortMap        bool     `yaml:"port-map"`           // ask the router for a port mapping
	LogLevel       string   `yaml:"log-level"`          // debug | info | warn | error
	LogFormat      string   `yaml:"log-format"`         // text | json
	MemoryLimit    string   `yaml:"memory-limit"`       // auto | off | a size (memlimit.go)
	LegacyWrites   string   `yaml:"legacy-writes"`      // sign | refuse: the single-box core's unsigned writes
	Beacon         bool     `yaml:"beacon"`             // beacon v2 discovery for the meta services
	LeaderFile     string   `yaml:"leader-file"`        // "" <data>/locks/kv-leader.info, off, or a path
	WebDAVWrites   bool     `yaml:"webdav-writes"`      // WebDAV clients may write under the files root's plugin/
}

// DefaultListen are the swarm's listen addresses unless told otherwise
// (swarmport.go says why the port is 4821).
var DefaultListen = []string{"/ip4/0.0.0.0/tcp/4821", "/ip4/0.0.0.0/udp/4821/quic-v1"}

// BootstrapListen are a bootstrap node's: IPv6 too, as homes may reach a
// public host by either (configs/bootstrap.yml lists the same).
var BootstrapListen = []string{"/ip4/0.0.0.0/tcp/4821", "/ip4/0.0.0.0/udp/4821/quic-v1", "/ip6/::/tcp/4821", "/ip6/::/udp/4821/quic-v1"}

// bootstrapMaxConns is a bootstrap node's connection budget: it serves
// every home of the swarm, not a few peers.
const bootstrapMaxConns = 512

// DefaultConfig is the embedded default configuration (data directory
// aside, which depends on the environment: see defaultDataDir).
func DefaultConfig() Config {
	return Config{
		HTTP:           node.DefaultHTTPAddr,
		Listen:         slices.Clone(DefaultListen),
		Swarm:          "metamesh",
		Trust:          "list",
		AutoTrustLocal: true,
		Replicate:      "all",
		Profile:        "home",
		MDNS:           true,
		MaxConns:       64,
		LogLevel:       "info",
		LogFormat:      "text",
		MemoryLimit:    "auto",
		LegacyWrites:   "sign",
		Beacon:         true,
	}
}

// setting describes one configuration key.
type setting struct {
	name  string                 // YAML key and flag name
	env   []string               // variables, lowest precedence first
	usage string                 // flag help
	field func(c *Config) any    // pointer to the field
	check func(c *Config) string // "" when valid, else what is wrong
}

var settings = []setting{
	{name: "data", env: []string{"METANODE_DATA"}, usage: "data directory (node key, truth and cache databases) (default $XDG_DATA_HOME/metanode, else ~/.local/share/metanode)",
		field: func(c *Config) any { return &c.Data }, check: func(c *Config) string { return notEmpty(c.Data) }},
	{name: "truth-db", env: []string{"META_CORE_DB_PATH", "METANODE_TRUTH_DB"}, usage: "truth database file (default <data>/truth.db)",
		field: func(c *Config) any { return &c.TruthDB }},
	{name: "cache-db", env: []string{"META_CORE_CACHE_PATH", "METANODE_CACHE_DB"}, usage: "cache database file (default <data>/cache.db)",
		field: func(c *Config) any { return &c.CacheDB }},
	{name: "http", env: []string{"META_CORE_HTTP_PORT", "METANODE_HTTP"}, usage: "HTTP API listen address",
		field: func(c *Config) any { return &c.HTTP }, check: checkHTTP},
	{name: "http-allowed-hosts", env: []string{"METANODE_HTTP_ALLOWED_HOSTS"}, usage: "host names besides localhost, IP addresses and this machine's name the API answers to and whose web pages may write: a reverse proxy's or a container's name; * for any (repeatable)",
		field: func(c *Config) any { return &c.HTTPAllowed }, check: checkHostNames},
	{name: "http-socket", env: []string{"METANODE_HTTP_SOCKET"}, usage: "a Unix socket the API serves too, made 0600: every caller on it may write (e.g. <data>/api.sock; default none)",
		field: func(c *Config) any { return &c.HTTPSocket }},
	{name: "local-networks", env: []string{"METANODE_LOCAL_NETWORKS"}, usage: "networks (CIDR) whose callers may use the whole API, writes included, as loopback's do; others need the API token in <data>/api.token (repeatable)",
		field: func(c *Config) any { return &c.LocalNetworks }, check: checkLocalNetworks},
	{name: "cors-origins", env: []string{"METANODE_CORS_ORIGINS"}, usage: "browser origins (scheme://host[:port]) whose pages may read the API (CORS); writes need the API token too (repeatable; default none)",
		field: func(c *Config) any { return &c.CORSOrigins }, check: checkCORSOrigins},
	{name: "gui-user", env: []string{"METANODE_GUI_USER"}, usage: "user name the owner's page asks for beyond loopback (with gui-password; default none: the page answers on loopback only)",
		field: func(c *Config) any { return &c.GUIUser }, check: checkGUI},
	{name: "gui-password", env: []string{"METANODE_GUI_PASSWORD"}, usage: "bcrypt hash of the owner's page password beyond loopback ('metanode gui-password' makes one)",
		field: func(c *Config) any { return &c.GUIPassword }, check: checkGUIPassword},
	{name: "listen", env: []string{"METANODE_LISTEN"}, usage: "swarm listen multiaddr (repeatable)",
		field: func(c *Config) any { return &c.Listen }, check: checkListen},
	{name: "bootstrap", env: []string{"METANODE_BOOTSTRAP"}, usage: "peer to join through, a multiaddr ending in /p2p/<peerId> (repeatable)",
		field: func(c *Config) any { return &c.Bootstrap }, check: checkBootstrap},
	{name: "swarm", env: []string{"METANODE_SWARM"}, usage: "swarm name (gossip topic and DHT namespace)",
		field: func(c *Config) any { return &c.Swarm }, check: checkSwarmName},
	{name: "swarm-key", env: []string{"METANODE_SWARM_KEY"}, usage: "pre-shared key file (go-ipfs swarm.key format): a private swarm",
		field: func(c *Config) any { return &c.SwarmKey }},
	{name: "files", env: []string{"FILES_PATH", "METANODE_FILES"}, usage: "files root for the watcher (none: no watcher)",
		field: func(c *Config) any { return &c.Files }},
	{name: "trust", env: []string{"METANODE_TRUST"}, usage: "trust policy: open or list",
		field: func(c *Config) any { return &c.Trust }, check: func(c *Config) string { return oneOf(c.Trust, "open", "list") }},
	{name: "auto-trust-local", env: []string{"METANODE_AUTO_TRUST_LOCAL"}, usage: "trust and vouch for signers that write through the local API",
		field: func(c *Config) any { return &c.AutoTrustLocal }},
	{name: "replicate", env: []string{"METANODE_REPLICATE"}, usage: "keep every trusted claim (all) or only claims about known cids (interest)",
		field: func(c *Config) any { return &c.Replicate }, check: func(c *Config) string { return oneOf(c.Replicate, "all", "interest") }},
	{name: "profile", env: []string{"METANODE_PROFILE"}, usage: "preset: home or bootstrap (DHT server, relay, peer exchange; unless set: open trust, no mDNS, max-conns 512, listen on IPv4 and IPv6 port 4821; no watcher)",
		field: func(c *Config) any { return &c.Profile }, check: func(c *Config) string { return oneOf(c.Profile, "home", "bootstrap") }},
	{name: "mdns", env: []string{"METANODE_MDNS"}, usage: "discover peers on the LAN (mDNS)",
		field: func(c *Config) any { return &c.MDNS }},
	{name: "max-conns", env: []string{"METANODE_MAX_CONNS"}, usage: "most swarm connections kept",
		field: func(c *Config) any { return &c.MaxConns }, check: func(c *Config) string {
			if c.MaxConns < 1 {
				return "must be at least 1"
			}
			return ""
		}},
	{name: "relays", env: []string{"METANODE_RELAYS"}, usage: "static relay for a home behind NAT, a multiaddr ending in /p2p/<peerId> (repeatable)",
		field: func(c *Config) any { return &c.Relays }, check: func(c *Config) string { return checkPeerAddrs(c.Relays) }},
	{name: "port-map", env: []string{"METANODE_PORT_MAP"}, usage: "ask the router for a port mapping (UPnP / NAT-PMP)",
		field: func(c *Config) any { return &c.PortMap }},
	{name: "log-level", env: []string{"METANODE_LOG_LEVEL"}, usage: "log level: debug, info, warn or error",
		field: func(c *Config) any { return &c.LogLevel }, check: func(c *Config) string { return oneOf(c.LogLevel, "debug", "info", "warn", "error") }},
	{name: "log-format", env: []string{"METANODE_LOG_FORMAT"}, usage: "log format: text or json",
		field: func(c *Config) any { return &c.LogFormat }, check: func(c *Config) string { return oneOf(c.LogFormat, "text", "json") }},
	{name: "memory-limit", env: []string{"METANODE_MEMORY_LIMIT"}, usage: "soft limit on the Go runtime's memory: auto (128MiB, raised with a larger library; off on a bootstrap node), off, or a size such as 512MiB; GOMEMLIMIT wins",
		field: func(c *Config) any { return &c.MemoryLimit }, check: func(c *Config) string {
			if _, err := parseMemoryLimit(c.MemoryLimit); err != nil {
				return err.Error()
			}
			return ""
		}},
	{name: "legacy-writes", env: []string{"METANODE_LEGACY_WRITES"}, usage: "unsigned writes to the single-box core's routes (PATCH /meta/{h}, …): sign (claims by the node's legacy writer key) or refuse (410)",
		field: func(c *Config) any { return &c.LegacyWrites }, check: func(c *Config) string { return oneOf(c.LegacyWrites, "sign", "refuse") }},
	{name: "beacon", env: []string{"METANODE_BEACON"}, usage: "advertise the API to the meta services by beacon v2 (UDP multicast 239.255.99.1:9099 on the local network) and list what it hears (GET /neighbors)",
		field: func(c *Config) any { return &c.Beacon }},
	{name: "leader-file", env: []string{"META_CORE_PATH", "METANODE_LEADER_FILE"}, usage: "file the API's URLs are written to for the meta services (META_CORE_PATH: <dir>/locks/kv-leader.info); off for none (default <data>/locks/kv-leader.info)",
		field: func(c *Config) any { return &c.LeaderFile }},
	{name: "webdav-writes", env: []string{"METANODE_WEBDAV_WRITES"}, usage: "let WebDAV clients (plugins) write under the files root's plugin/ at /webdav/plugin/; otherwise WebDAV is read-only",
		field: func(c *Config) any { return &c.WebDAVWrites }},
}

// leaderFileOff is the leader-file value that writes none.
const leaderFileOff = "off"

// leaderFile is the leader file's path: the setting, else its default
// under the data directory; "" when it is off.
func (c *Config) leaderFile() string {
	switch c.LeaderFile {
	case leaderFileOff:
		return ""
	case "":
		return filepath.Join(c.Data, "locks", "kv-leader.info")
	}
	return c.LeaderFile
}

func settingNamed(name string) *setting {
	for i := range settings {
		if settings[i].name == name {
			return &settings[i]
		}
	}
	return nil
}

// ConfigError names the setting that is wrong, where its value came from,
// and what is wrong with it.
type ConfigError struct {
	Field  string // YAML key / flag name
	Value  string
	Source string // "config file X line N", "environment VAR", "flag --x", or "" (the default)
	Err    error
	// ByFlag: the value came from the command line, so the error is a
	// usage error (exit 2); from the file or the environment it is one of
	// the setup (exit 1).
	ByFlag bool
}

func (e *ConfigError) Error() string {
	where := ""
	if e.Source != "" {
		where = " (" + e.Source + ")"
	}
	return fmt.Sprintf("config %s = %q%s: %v", e.Field, e.Value, where, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// ErrUnknownKey is wrapped by the error for a YAML key that is not a setting.
var ErrUnknownKey = errors.New("unknown key")

// errYAMLSyntax is wrapped by the error for a config file that is not YAML.
var errYAMLSyntax = errors.New("not valid YAML")

// configLayers records which settings a layer above the defaults set, so the
// profile fills only what nobody chose.
type configLayers struct {
	set     map[string]bool
	src     map[string]string // where each set value came from, as ConfigError.Source
	fileSrc map[string]string // the config file's line for each key it set, even when overridden
	file    string            // the config file read, if any
	ignored []ignoredSetting  // values the profile dropped; serve warns about each
}

// ignoredSetting is a value the profile dropped instead of refusing it:
// one that only the environment set, which a container image may set for
// every command (FILES_PATH) and docker can empty but not unset.
type ignoredSetting struct {
	field, value, source, why string
}

// loadOptions are the inputs of LoadConfig besides the flags.
type loadOptions struct {
	getenv     func(string) string
	configPath string              // --config
	fileBytes  []byte              // when set, the config file's content (not read from configPath)
	flags      map[string][]string // flag name -> values, in command-line order
	// only, when set, resolves that one setting: other keys, variables and
	// flags are not read, and a config file that cannot be read or parsed
	// is passed over (a client command needs only the API address, and
	// must not fail on a ${VAR} set only where serve runs).
	only string
}

// LoadConfig builds the serve configuration: defaults, then the YAML file
// (--config, else $METANODE_CONFIG, else <data>/metanode.yml when present),
// then the environment, then flags; then the profile fills what is unset,
// and the result is validated.
func LoadConfig(opt loadOptions) (Config, configLayers, error) {
	c := DefaultConfig()
	layers := configLayers{set: make(map[string]bool), src: make(map[string]string), fileSrc: make(map[string]string)}
	c.Data = defaultDataDir(opt.getenv)

	path, required := opt.configPath, true
	if path == "" {
		path = opt.getenv("METANODE_CONFIG")
	}
	if path == "" {
		required = false
		data := c.Data
		if v := opt.getenv("METANODE_DATA"); v != "" {
			data = v
		}
		if v := opt.flags["data"]; len(v) > 0 {
			data = v[len(v)-1]
		}
		path = filepath.Join(expandHome(data, opt.getenv), node.ConfigFile)
	}
	b, err := opt.fileBytes, error(nil)
	if b == nil {
		b, err = os.ReadFile(path)
	}
	switch {
	case err == nil:
		err := decodeYAML(&c, b, path, opt.getenv, layers, opt.only)
		if err != nil && !(opt.only != "" && errors.Is(err, errYAMLSyntax)) {
			return c, layers, err
		}
		layers.file = path
	case opt.only != "":
		// Unreadable: the setting comes from the other layers or the default.
	case !required && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)):
		// No file in the data directory (or no data directory yet, or a
		// file where it should be: opening the data directory says so).
	case required:
		return c, layers, fmt.Errorf("config file: %w: check --config (or METANODE_CONFIG)", err)
	case errors.Is(err, fs.ErrPermission):
		// The file, or the directory holding it (a data directory of
		// another user: the file may not even exist).
		return c, layers, fmt.Errorf("config file: %w: run this as the user that owns %s, or fix its permissions, or give another --data", err, filepath.Dir(path))
	default:
		return c, layers, fmt.Errorf("config file: %w: make it readable or remove it", err)
	}

	for _, s := range settings {
		if opt.only != "" && s.name != opt.only {
			continue
		}
		for _, name := range s.env {
			v := opt.getenv(name)
			if v == "" {
				continue
			}
			if name == "META_CORE_PATH" { // upstream meaning: the directory holding locks/
				v = filepath.Join(v, "locks", "kv-leader.info")
			}
			if name == "META_CORE_HTTP_PORT" { // upstream meaning: a port on loopback
				if _, err := strconv.ParseUint(v, 10, 16); err != nil {
					return c, layers, &ConfigError{Field: s.name, Value: v, Source: "environment " + name,
						Err: errors.New("want a port number (the API listens on 127.0.0.1:<port>); give host:port with METANODE_HTTP or --http")}
				}
				v = net.JoinHostPort("127.0.0.1", v)
			}
			if err := s.parse(&c, []string{v}, "environment "+name); err != nil {
				return c, layers, err
			}
			layers.set[s.name] = true
			layers.src[s.name] = "environment " + name
		}
	}
	for _, s := range settings {
		if opt.only != "" && s.name != opt.only {
			continue
		}
		if v, ok := opt.flags[s.name]; ok {
			if err := s.parse(&c, v, "flag --"+s.name); err != nil {
				var ce *ConfigError
				if errors.As(err, &ce) {
					ce.ByFlag = true
				}
				return c, layers, err
			}
			layers.set[s.name] = true
			layers.src[s.name] = "flag --" + s.name
		}
	}
	c.expandPaths(opt.getenv)
	if opt.only != "" {
		err = c.validateOne(opt.only)
	} else if err = c.applyProfile(&layers); err == nil {
		err = c.Validate()
	}
	// Say where the offending value came from: the line of the file, or
	// the variable (FILES_PATH left over from another container, …).
	var ce *ConfigError
	if errors.As(err, &ce) && ce.Source == "" {
		ce.Source = layers.src[ce.Field]
		_, ce.ByFlag = opt.flags[ce.Field]
	}
	return c, layers, err
}

// parse applies string values (from a variable or flags) to the setting.
// A list takes comma-separated values; repeated flags add up.
func (s *setting) parse(c *Config, vals []string, src string) error {
	last := vals[len(vals)-1]
	bad := func(err error) error { return &ConfigError{Field: s.name, Value: last, Source: src, Err: err} }
	switch p := s.field(c).(type) {
	case *string:
		*p = last
	case *[]string:
		var out []string
		for _, v := range vals {
			for part := range strings.SplitSeq(v, ",") {
				if part = strings.TrimSpace(part); part != "" {
					out = append(out, part)
				}
			}
		}
		*p = out
	case *bool:
		b, err := strconv.ParseBool(last)
		if err != nil {
			return bad(errors.New("want true or false"))
		}
		*p = b
	case *int:
		n, err := strconv.Atoi(last)
		if err != nil {
			return bad(errors.New("want an integer"))
		}
		*p = n
	}
	return nil
}

// applyProfile fills what no layer set. The bootstrap profile trusts any
// valid signer by default, runs no mDNS (a server has no LAN to discover),
// keeps 512 connections, listens on IPv4 and IPv6 (the values of
// configs/bootstrap.yml), sets no memory limit, keeps everything and runs
// no watcher: a files
// root from the config file or a flag is refused, one from the environment
// alone is dropped and recorded in layers.ignored (the container image sets
// FILES_PATH for every command).
func (c *Config) applyProfile(layers *configLayers) error {
	if c.Profile != "bootstrap" {
		return nil
	}
	set := layers.set
	if !set["trust"] {
		c.Trust = "open"
	}
	if !set["mdns"] {
		c.MDNS = false
	}
	if !set["max-conns"] {
		c.MaxConns = bootstrapMaxConns
	}
	if !set["listen"] {
		c.Listen = slices.Clone(BootstrapListen)
	}
	if !set["memory-limit"] {
		c.MemoryLimit = "off" // it holds the swarm's claims: Go's defaults
	}
	if !set["beacon"] {
		c.Beacon = false // no meta services beside a bootstrap node
	}
	if !set["leader-file"] {
		c.LeaderFile = leaderFileOff
	}
	if c.Files != "" {
		const why = "a bootstrap node runs no file watcher"
		src, fromFile := layers.fileSrc["files"]
		switch {
		case strings.HasPrefix(layers.src["files"], "environment ") && !fromFile:
			layers.ignored = append(layers.ignored, ignoredSetting{field: "files", value: c.Files, source: layers.src["files"], why: why})
			c.Files = ""
			delete(layers.set, "files")
			delete(layers.src, "files")
		case fromFile && !strings.HasPrefix(layers.src["files"], "flag "):
			// The file's line is what to change, even under a variable.
			return &ConfigError{Field: "files", Value: c.Files, Err: errors.New(why + ": remove files from " + src + " or use profile home")}
		default:
			return &ConfigError{Field: "files", Value: c.Files, Err: errors.New(why + ": drop it or use profile home")}
		}
	}
	if c.Replicate != "all" {
		return &ConfigError{Field: "replicate", Value: c.Replicate, Err: errors.New("a bootstrap node keeps every claim: use replicate all or profile home")}
	}
	return nil
}

// defaultDataDir: $METANODE_DATA, else $XDG_DATA_HOME/metanode, else
// ~/.local/share/metanode.
func defaultDataDir(getenv func(string) string) string {
	if d := getenv("METANODE_DATA"); d != "" {
		return d
	}
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "metanode")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if home == "" {
		return "metanode-data" // no home at all (some containers): the working directory
	}
	return filepath.Join(home, ".local", "share", "metanode")
}

func expandHome(p string, getenv func(string) string) string {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, strings.TrimPrefix(p, "~"))
}

func (c *Config) expandPaths(getenv func(string) string) {
	for _, p := range []*string{&c.Data, &c.TruthDB, &c.CacheDB, &c.SwarmKey, &c.Files, &c.HTTPSocket, &c.LeaderFile} {
		*p = expandHome(*p, getenv)
	}
}

// NodeConfig translates the settings onto the node's typed fields.
func (c *Config) NodeConfig() node.Config {
	bootstrap := c.Profile == "bootstrap"
	return node.Config{
		DataDir:     c.Data,
		TruthPath:   c.TruthDB,
		CachePath:   c.CacheDB,
		HTTPAddr:    c.HTTP,
		HTTPAllowed: c.HTTPAllowed,
		Access: node.Access{
			Socket:        c.HTTPSocket,
			LocalNetworks: localNetworks(c.LocalNetworks), // checked by Validate
			CORSOrigins:   c.CORSOrigins,
			GUIUser:       c.GUIUser,
			GUIPassword:   c.GUIPassword,
		},
		Listen:       c.Listen,
		Bootstrap:    alsoNewPort(c.Bootstrap),
		SwarmName:    c.Swarm,
		SwarmKeyPath: c.SwarmKey,
		FilesRoot:    c.Files,
		Trust:        storeTrust(c.Trust),
		NoAutoTrust:  !c.AutoTrustLocal,
		Replicate:    node.Replicate(c.Replicate),
		MDNS:         c.MDNS,
		// A DHT forms only among servers: bootstrap nodes, and homes in a
		// private or LAN swarm, where auto mode would never turn server.
		DHTServer:    bootstrap || c.SwarmKey != "" || c.MDNS,
		RelayService: bootstrap,
		PeerExchange: bootstrap,
		MaxConns:     c.MaxConns,
		Public:       bootstrap,
		PortMap:      c.PortMap,
		Relays:       c.Relays,

		RefuseLegacyWrites: c.LegacyWrites == "refuse",
		Beacon:             c.Beacon,
		LeaderFile:         c.leaderFile(),
		WebDAVWrites:       c.WebDAVWrites,
	}
}

// String is the configuration as YAML-ish lines, for logs and tests.
func (c Config) String() string {
	var b strings.Builder
	for _, s := range settings {
		fmt.Fprintf(&b, "%s: %s\n", s.name, valueString(s.field(&c)))
	}
	return b.String()
}
