package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// collect gathers a setting's flag values in command-line order.
type collect struct {
	name   string
	vals   map[string][]string
	isBool bool
	fixed  string // a flag that always sets this value (--no-mdns)
}

func (f *collect) String() string { return "" }
func (f *collect) Set(v string) error {
	if f.fixed != "" {
		b := strings.ToLower(v)
		if b != "true" && b != "1" && b != "t" {
			return nil // --no-mdns=false: leave mdns alone
		}
		v = f.fixed
	}
	f.vals[f.name] = append(f.vals[f.name], v)
	return nil
}
func (f *collect) IsBoolFlag() bool { return f.isBool }

// configFlags adds --config and one flag per setting to fs (only the named
// settings when names is given).
func configFlags(fs *flag.FlagSet, names ...string) (vals map[string][]string, configPath *string) {
	vals = make(map[string][]string)
	configPath = fs.String("config", "", "YAML config file (default <data>/metanode.yml when present; env METANODE_CONFIG)")
	def := DefaultConfig()
	for _, s := range settings {
		if len(names) > 0 && !slices.Contains(names, s.name) {
			continue
		}
		_, isBool := s.field(&def).(*bool)
		usage := s.usage
		if d := valueString(s.field(&def)); d != "" {
			usage += " (default " + d + ")"
		}
		usage += "; env " + strings.Join(s.env, ", ")
		fs.Var(&collect{name: s.name, vals: vals, isBool: isBool}, s.name, usage)
		switch s.name {
		case "mdns":
			fs.Var(&collect{name: "mdns", vals: vals, isBool: true, fixed: "false"}, "no-mdns", "no LAN discovery (same as --mdns=false)")
		case "beacon":
			fs.Var(&collect{name: "beacon", vals: vals, isBool: true, fixed: "false"}, "no-beacon", "no beacon v2 discovery (same as --beacon=false)")
		case "leader-file":
			fs.Var(&collect{name: "leader-file", vals: vals, isBool: true, fixed: "off"}, "no-leader-file", "write no leader file (same as --leader-file=off)")
		}
	}
	return vals, configPath
}

// loadConfig loads the configuration with the command's flags. A bad value
// of a setting given as a flag is a usage error (exit 2); from the
// environment or the file it is an error of the setup (exit 1).
func (c *cli) loadConfig(vals map[string][]string, configPath string) (Config, configLayers, error) {
	cfg, layers, err := LoadConfig(loadOptions{getenv: c.getenv, configPath: configPath, flags: vals})
	var ce *ConfigError
	if errors.As(err, &ce) && ce.ByFlag {
		return cfg, layers, &usageError{msg: err.Error()}
	}
	return cfg, layers, err
}

func (c *cli) serve(ctx context.Context, args []string) error {
	fs := c.flagSet("serve", "serve [flags]", `Runs a node until SIGINT or SIGTERM: the local HTTP API, the swarm and, with
--files, the file watcher. The first signal shuts down gracefully (exit 0);
signals within 250ms of it are the same stop request (timeout(1) and a
terminal signal the whole process group), and a later one exits at once
(exit 1, no clean shutdown). Every flag is also a key of the YAML config file and
an environment variable; flags win over the environment, which wins over the file.`)
	vals, configPath := configFlags(fs)
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("serve", "unexpected argument %q", pos[0])
	}
	cfg, layers, err := c.loadConfig(vals, *configPath)
	if err != nil {
		return err
	}
	return c.runNode(ctx, cfg, layers, nil)
}

// runNode opens a node on cfg, runs then (when set) and serves until ctx
// ends; then it shuts the node down gracefully.
func (c *cli) runNode(ctx context.Context, cfg Config, layers configLayers, then func(context.Context, *node.Node, *slog.Logger) error) error {
	logger := newLogger(c.stderr, cfg.LogLevel, cfg.LogFormat)
	if layers.file != "" {
		logger.Info("config file read", "path", layers.file)
	}
	for _, ig := range layers.ignored {
		logger.Warn(ig.field+" ignored: "+ig.why, "value", ig.value, "from", ig.source, "profile", cfg.Profile)
	}
	// The databases' directories are made like the data directory is, so
	// META_CORE_DB_PATH pointing into a directory not made yet just works.
	for _, db := range []struct{ name, path string }{{"truth-db", cfg.TruthDB}, {"cache-db", cfg.CacheDB}} {
		if db.path == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(db.path), 0o700); err != nil {
			return &ConfigError{Field: db.name, Value: db.path, Source: layers.src[db.name],
				Err: fmt.Errorf("make its directory: %w; choose a path you can write", err)}
		}
	}
	mem := startMemoryGovernor(cfg.MemoryLimit, c.getenv("GOMEMLIMIT"), c.setMemoryLimit, logger)
	defer mem.Close()
	ncfg := cfg.NodeConfig()
	ncfg.Logger = logger
	ncfg.OnJoined = func(inv node.Invite) error { // a join from the owner's page
		path := layers.file
		if path == "" {
			path = filepath.Join(cfg.Data, node.ConfigFile)
		}
		keyPath := cfg.SwarmKey
		if keyPath != "" {
			keyPath, _ = filepath.Abs(keyPath)
		}
		return writeJoinConfig(path, inv, keyPath, nil)
	}
	n := node.New(ncfg)
	if err := n.Open(ctx); err != nil {
		return explainOpen(err, cfg, layers)
	}
	logger.Info("serving", "api", n.APIURL(), "data", cfg.Data, "uid", n.UID(), "peer", n.PeerID(), "profile", cfg.Profile)
	var err error
	if then != nil {
		err = then(ctx, n, logger)
	}
	if err == nil {
		<-ctx.Done()
		logger.Info("shutting down (signal again to exit at once)")
	}
	if cerr := n.Close(); cerr != nil && err == nil {
		if !onlyDrainCut(cerr) {
			return fmt.Errorf("shut down: %w", cerr)
		}
		// Clients that held a request past the drain were cut; the store
		// and the swarm closed cleanly: still a graceful stop (exit 0).
		logger.Warn("shut down: " + cerr.Error())
	}
	if err == nil {
		logger.Info("stopped")
	}
	return err
}

// explainOpen adds what to do to the common start-up failures.
func explainOpen(err error, cfg Config, layers configLayers) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		// Said from the listener's error alone: the layers above it ("open
		// node", "open api") add nothing the owner can act on. Which program
		// holds the port is not ours to guess.
		var op *net.OpError
		if errors.As(err, &op) && op.Addr != nil {
			what, setting := "swarm", "listen"
			if _, port, perr := net.SplitHostPort(cfg.HTTP); perr == nil && strings.HasPrefix(op.Net, "tcp") && strings.HasSuffix(op.Addr.String(), ":"+port) {
				what, setting = "API", "http"
			}
			return &explained{err: err, msg: fmt.Sprintf("%s address %s is already in use by another program: stop it, or choose another address with the %s setting (%s)",
				what, op.Addr, setting, settingSources(setting, layers))}
		}
		return fmt.Errorf("%w: an address is already in use by another program: stop it, or choose other addresses with the http and listen settings", err)
	case errors.Is(err, node.ErrDataDirInUse):
		// The lock that failed may be the one beside a truth database kept
		// outside the data directory: then --data is not what to change.
		var pe *fs.PathError
		if errors.As(err, &pe) && cfg.TruthDB != "" && node.SameDir(pe.Path, filepath.Dir(cfg.TruthDB)) && !node.SameDir(pe.Path, cfg.Data) {
			return &explained{err: err, msg: fmt.Sprintf("truth database %s: another metanode is running on it (lock in %s): stop that node first, or give this one another --truth-db (META_CORE_DB_PATH)", cfg.TruthDB, pe.Path)}
		}
		if pe != nil {
			return &explained{err: err, msg: fmt.Sprintf("another metanode is running on the data directory %s: stop that node first, or give this one another --data", pe.Path)}
		}
		return fmt.Errorf("%w: stop that node first, or give this one another --data", err)
	case errors.Is(err, store.ErrSchema):
		return fmt.Errorf("%w: see docs/operations.md (upgrading)", err)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%w: check the permissions of the data directory %s (--data)", err, cfg.Data)
	}
	return err
}

// settingSources names the ways to set a setting and where its value came
// from: "--listen, METANODE_LISTEN or listen: in the config file; now from the default".
func settingSources(name string, layers configLayers) string {
	s := settingNamed(name)
	if s == nil {
		return name
	}
	from := layers.src[name]
	if from == "" {
		from = "the default"
	}
	return fmt.Sprintf("--%s, %s or %s: in the config file; now from %s", name, s.env[len(s.env)-1], name, from)
}

// explained is an error whose message says what happened and what to do
// in place of its chain's, which stays reachable for errors.Is.
type explained struct {
	err error
	msg string
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.LevelVar
	_ = lv.UnmarshalText([]byte(level)) // validated by Config.Validate
	opts := &slog.HandlerOptions{Level: &lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func storeTrust(s string) store.TrustMode { return store.TrustMode(s) }

// onlyDrainCut: every error of a node's Close is the api's cut of requests
// still running after its drain (nothing else failed to close).
func onlyDrainCut(err error) bool {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		if !errors.Is(e, api.ErrDrainCut) {
			return false
		}
	}
	return len(errs) > 0
}
