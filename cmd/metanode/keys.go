package main

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"golang.org/x/crypto/bcrypt"

	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// defaultYAML is the config `init` writes: the embedded defaults, commented.
//
//go:embed default.yml
var defaultYAML string

// identity is what init and id print.
type identity struct {
	PeerID string   `json:"peerId"`
	UID    string   `json:"uid"`
	Addrs  []string `json:"addrs"`
	// AddrsFrom says where addrs came from: "node" (the running node's
	// API answered for this key) or "config" (the configured listen
	// addresses, resolved offline).
	AddrsFrom string `json:"addrsFrom,omitempty"`
	DataDir   string `json:"dataDir,omitempty"`
	Created   bool   `json:"created,omitempty"`
	Config    string `json:"config,omitempty"`
}

func (c *cli) initCmd(ctx context.Context, args []string) error {
	fl := c.flagSet("init", "init [--data DIR]", `Creates the data directory (0700), the node key (node.key, 0600) and a default
config (metanode.yml) when they do not exist, and prints the node's uid and
peer id. Running it again changes nothing.`)
	vals, configPath := configFlags(fl, "data")
	if err := c.noArgs(fl, args); err != nil {
		return err
	}
	cfg, _, err := c.loadConfig(vals, *configPath)
	if err != nil {
		return err
	}
	if err := node.EnsureDataDir(cfg.Data); err != nil {
		return fmt.Errorf("%w: choose a --data directory you can write (or set METANODE_DATA)", err)
	}
	keyPath := filepath.Join(cfg.Data, node.KeyFile)
	signer, created, err := node.LoadOrCreateIdentity(keyPath)
	if err != nil {
		return badNodeKey(err, keyPath)
	}
	confPath := filepath.Join(cfg.Data, node.ConfigFile)
	f, err := os.OpenFile(confPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		_, werr := f.WriteString(defaultYAML)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("write %s: %w", confPath, werr)
		}
	case errors.Is(err, fs.ErrExist):
	default:
		return fmt.Errorf("write default config: %w", err)
	}
	id, err := describe(signer, cfg)
	if err != nil {
		return err
	}
	id.DataDir, id.Created, id.Config, id.AddrsFrom = cfg.Data, created, confPath, "config"
	return c.printJSON(id)
}

// idConfig resolves what id needs: the data directory and the listen
// addresses. A config that fails elsewhere (a ${VAR} set only where serve
// runs, as operations.md's restore has the other home run id) does not stop
// id: those two settings are then resolved on their own.
func (c *cli) idConfig(vals map[string][]string, configPath string) (Config, error) {
	cfg, _, err := c.loadConfig(vals, configPath)
	var ce *ConfigError
	var ue *usageError // a bad flag: the command line is wrong, say so
	if err == nil || errors.As(err, &ue) || (errors.As(err, &ce) && (ce.Field == "data" || ce.Field == "listen")) {
		return cfg, err
	}
	out := DefaultConfig()
	for _, name := range []string{"data", "listen"} {
		one, _, err := LoadConfig(loadOptions{getenv: c.getenv, configPath: configPath, flags: vals, only: name})
		if err != nil {
			return out, err
		}
		if name == "data" {
			out.Data = one.Data
		} else {
			out.Listen = one.Listen
		}
	}
	return out, nil
}

func (c *cli) id(ctx context.Context, args []string) error {
	fl := c.flagSet("id", "id [--data DIR] [--api URL] [--listen MULTIADDR]", `Prints {"peerId","uid","addrs","addrsFrom"} as JSON, from the node key in the
data directory. addrs end in /p2p/<peerId>, dialable ones first. When the node
with this key answers at --api, they are its actual listen addresses
("addrsFrom":"node"); otherwise (the node stopped, or --listen given) they
are the configured listen addresses, unspecified IPs resolved to this
machine's interfaces ("addrsFrom":"config"). Works with the node stopped.`)
	vals, configPath := configFlags(fl, "data", "listen")
	tgt := c.apiFlagWith(fl, vals, configPath)
	field := fl.String("field", "", "print only this field, bare: uid, peerId or addr (the first address)")
	if err := c.noArgs(fl, args); err != nil {
		return err
	}
	switch *field {
	case "", "uid", "peerId", "addr":
	default:
		return usagef("id", "--field must be uid, peerId or addr")
	}
	cfg, err := c.idConfig(vals, *configPath)
	if err != nil {
		return err
	}
	keyPath := filepath.Join(cfg.Data, node.KeyFile)
	signer, err := store.LoadSigner(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no node key at %s: run 'metanode init' (or 'metanode serve') first, or pass --data", keyPath)
	}
	if err != nil {
		return badNodeKey(err, keyPath)
	}
	id, err := describe(signer, cfg)
	if err != nil {
		return err
	}
	id.AddrsFrom = "config"
	if _, listenGiven := vals["listen"]; !listenGiven {
		// No URL (a config http on port 0): the node cannot be asked.
		base, uerr := c.url(tgt)
		addrs, ok, err := []string(nil), false, error(nil)
		if uerr == nil {
			addrs, ok, err = c.runningAddrs(ctx, base, id.PeerID)
		}
		if err != nil {
			return err
		}
		if ok {
			id.Addrs, id.AddrsFrom = addrs, "node"
		} else if (*field == "" || *field == "addr") && node.DataDirInUse(cfg.Data) {
			// Running, yet not answering where the config says: starting,
			// stopping, or started with another --http, when its real
			// addresses are not these.
			where := "the configured API address"
			if uerr == nil {
				where = base
			}
			fmt.Fprintf(c.stderr, "metanode id: a node runs on %s but did not answer at %s (starting, stopping, or started with another --http): these are the configured addresses; to get its own, pass --api with its --http address\n", cfg.Data, where)
		}
	}
	switch *field {
	case "uid":
		fmt.Fprintln(c.stdout, id.UID)
		return nil
	case "peerId":
		fmt.Fprintln(c.stdout, id.PeerID)
		return nil
	case "addr":
		if len(id.Addrs) == 0 {
			return errors.New("no listen address resolves to an address of this machine: pass --listen")
		}
		fmt.Fprintln(c.stdout, id.Addrs[0])
		return nil
	}
	return c.printJSON(id)
}

// describe computes the node's peer id and dialable addresses offline.
func describe(signer *store.Signer, cfg Config) (identity, error) {
	pid, err := node.PeerID(signer)
	if err != nil {
		return identity{}, err
	}
	id := identity{PeerID: pid.String(), UID: signer.UID(), Addrs: []string{}}
	var listen []ma.Multiaddr
	for _, a := range cfg.Listen {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			return identity{}, fmt.Errorf("listen address %q: %w", a, err)
		}
		listen = append(listen, m)
	}
	ifaces, err := manet.InterfaceMultiaddrs()
	if err == nil {
		if resolved, err := manet.ResolveUnspecifiedAddresses(listen, ifaces); err == nil {
			listen = resolved
		}
	}
	// Addresses other machines can dial first: the first is what
	// `id --field addr` prints.
	slices.SortStableFunc(listen, func(a, b ma.Multiaddr) int { return rankAddr(a) - rankAddr(b) })
	for _, m := range listen {
		id.Addrs = append(id.Addrs, m.String()+"/p2p/"+pid.String())
	}
	return id, nil
}

// runningAddrs asks the node at base for its addresses; ok only when it
// answers, soon, as the node with peer id pid (not some other node on the
// default port). err is a bad --api only.
func (c *cli) runningAddrs(ctx context.Context, base, pid string) (addrs []string, ok bool, err error) {
	cl, err := c.client(base)
	if err != nil {
		return nil, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := cl.SwarmStatus(ctx)
	if err != nil || st.PeerID != pid || len(st.Addrs) == 0 {
		return nil, false, nil
	}
	rank := func(s string) int {
		m, err := ma.NewMultiaddr(s)
		if err != nil {
			return 3
		}
		return rankAddr(m)
	}
	addrs = slices.Clone(st.Addrs)
	slices.SortStableFunc(addrs, func(a, b string) int { return rank(a) - rank(b) })
	return addrs, true, nil
}

// rankAddr orders addresses: public, then private (LAN), then loopback.
func rankAddr(m ma.Multiaddr) int {
	switch {
	case manet.IsIPLoopback(m):
		return 2
	case manet.IsPrivateAddr(m):
		return 1
	}
	return 0
}

func (c *cli) keygen(ctx context.Context, args []string) error {
	fl := c.flagSet("keygen", "keygen [--out FILE]", `Writes a new signer key (secp256k1, hex, mode 0600) and prints its uid. It
never overwrites a file. Give the key to a service that signs claims
('metanode claim sign --signer FILE', or its own client library).`)
	out := fl.String("out", "signer.key", "file to write")
	if err := c.noArgs(fl, args); err != nil {
		return err
	}
	s, err := store.GenerateSigner()
	if err != nil {
		return err
	}
	if err := s.WriteFile(*out); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists: choose another --out (keys are never overwritten)", *out)
		}
		return fmt.Errorf("%w: choose an --out file in a directory you can write", err)
	}
	fmt.Fprintln(c.stdout, s.UID())
	return nil
}

// guiPassword prints the bcrypt hash of a password read from stdin, for
// the gui-password setting.
func (c *cli) guiPassword(ctx context.Context, args []string) error {
	fl := c.flagSet("gui-password", "gui-password < FILE", `Reads a password (the first line of stdin) and prints its bcrypt hash, the
value of the gui-password setting: with gui-user, it opens the owner's page
(http://<host>:<port>/) to browsers beyond loopback. The config holds only
the hash. Example: printf '%s\n' 'correct horse' | metanode gui-password`)
	if err := c.noArgs(fl, args); err != nil {
		return err
	}
	line, err := bufio.NewReader(io.LimitReader(c.stdin, 1<<10)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the password: %w", err)
	}
	pass := strings.TrimRight(line, "\r\n")
	if len(pass) < 8 || len(pass) > 72 {
		return usagef("gui-password", "want a password of 8 to 72 bytes on stdin, got %d", len(pass))
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, string(hash))
	return nil
}

// badNodeKey says what to do about a node key that cannot be read: it is
// the node's identity, so never a new one in its place.
func badNodeKey(err error, path string) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w: run this as the user that owns the data directory %s, or give another --data", err, filepath.Dir(path))
	}
	return fmt.Errorf("%w: restore %s from your backup (docs/operations.md), or give another --data", err, path)
}

func (c *cli) noArgs(fl *flag.FlagSet, args []string) error {
	pos, err := c.parse(fl, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef(fl.Name(), "unexpected argument %q", pos[0])
	}
	return nil
}

func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
