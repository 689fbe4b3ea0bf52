package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/metanode/metanode/node"
)

// Pairing two homes: `metanode invite` on the inviter's machine asks its
// running node for a code; `metanode join CODE` on the other home writes the
// swarm settings into its config, starts its node, trusts the inviter and
// presents the code. See docs/trust.md ("Pairing").

func (c *cli) invite(ctx context.Context, args []string) error {
	fl := c.flagSet("invite", "invite [--ttl DURATION] [--api URL]",
		`Asks the running node for a pairing code and prints it (stdout: the code
only). Give it to the other home, which runs 'metanode join CODE'. The code
holds the swarm name, the swarm key if the swarm is private, this node's
addresses and uid, and a token good for one home until it expires: treat it
like a password.`)
	tgt := c.apiFlag(fl)
	ttl := fl.Duration("ttl", node.DefaultInviteTTL, "how long the code stays valid")
	if err := c.noArgs(fl, args); err != nil {
		return err
	}
	if *ttl < node.MinInviteTTL || *ttl > node.MaxInviteTTL {
		return usagef("invite", "--ttl %v: want %v to %v", *ttl, node.MinInviteTTL, node.MaxInviteTTL)
	}
	cl, base, err := c.target(tgt)
	if err != nil {
		return err
	}
	inv, err := cl.Invite(ctx, *ttl)
	if err != nil {
		return explainClient(err, base)
	}
	fmt.Fprintln(c.stdout, inv.Code)
	what := "public swarm " + inv.Swarm
	if inv.Private {
		what = "private swarm " + inv.Swarm + " (the code holds its key)"
	}
	fmt.Fprintf(c.stderr, "Pairing code for %s, valid until %s for one home.\nOn the other home run: metanode join <code>\n",
		what, inv.Expires.Local().Format(time.DateTime))
	return nil
}

func (c *cli) join(ctx context.Context, args []string) error {
	fl := c.flagSet("join", "join CODE [serve flags]",
		`Pairs this home with the home that made CODE ('metanode invite'), then keeps
serving like 'metanode serve'. It starts this node with the inviter's swarm
name, swarm key and addresses and presents the code; the inviter then trusts
this node's uid. Only once the inviter accepted does it trust the inviter's
node uid and write those settings, and every other serve setting given to join
as a flag or an environment variable (--http or METANODE_HTTP, --listen,
--no-mdns, --files, …), into this node's config (<data>/metanode.yml, or
--config, made if missing) and the swarm key into <data>/swarm.key.
Later starts then need only the command join prints when done:
'metanode serve', plus --data DIR when DIR is not the default (or --config
FILE when the config is not in the data directory). A refused or unreachable
pairing leaves both files, and this node's trust list, as they were. Progress goes to stderr (connecting, syncing n of m claims); stdout
stays empty. Stop a node already running on the same data directory first.`)
	vals, configPath := configFlags(fl)
	pos, err := c.parse(fl, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("join", "want exactly one pairing code (from 'metanode invite' on the other home)")
	}
	// Everything the code carries is checked before anything is written.
	inv, err := node.ParseInvite(pos[0])
	if err != nil {
		if strings.HasPrefix(strings.TrimSpace(pos[0]), node.InvitePrefix) {
			// What does not decode after the prefix is a code cut short
			// or mangled on its way (a half-selected line, a wrapped
			// terminal): the decoder's words would not help.
			return usagef("join", "the pairing code is incomplete or damaged: copy the whole code, one line from %q to its end, as 'metanode invite' printed it", node.InvitePrefix)
		}
		return usagef("join", "%v", err)
	}
	if !validSwarmName(inv.Swarm) {
		return usagef("join", "the code names swarm %q, which is not a valid swarm name", inv.Swarm)
	}
	if msg := checkPeerAddrs(append(slices.Clone(inv.Addrs), inv.Bootstrap...)); msg != "" {
		return usagef("join", "the code's addresses: %s", msg)
	}
	if err := inv.CheckPeer(); err != nil {
		// Pairing with one key while trusting another: refused before
		// anything is written or trusted.
		return usagef("join", "%v", err)
	}
	if inv.SwarmKey != "" {
		if err := node.CheckSwarmKey(inv.SwarmKey); err != nil {
			return usagef("join", "the code's %v", err)
		}
	}
	cfg, layers, confPath, err := c.joinLoadConfig(vals, *configPath)
	if err != nil {
		return err
	}
	fileRead := layers.file != ""
	given, next, err := joinPersisted(cfg, layers, vals, confPath)
	if err != nil {
		return err
	}
	if filepath.Clean(confPath) != filepath.Clean(filepath.Join(cfg.Data, node.ConfigFile)) {
		// The data directory is made and written by the node before
		// pairing; a config elsewhere is written only once paired.
		if err := prepareConfigDir(confPath); err != nil {
			return err
		}
	}
	keyPath, keyNew := "", false
	if inv.SwarmKey != "" {
		if keyPath, keyNew, err = checkSwarmKeyFile(cfg.Data, inv.SwarmKey); err != nil {
			return err
		}
	}
	conf, err := joinConfig(confPath, inv, keyPath, given)
	if err != nil {
		return err
	}
	// The node runs on the config as it will be written (flags still win);
	// the files change only once the inviter accepted.
	if cfg, layers, err = LoadConfig(loadOptions{getenv: c.getenv, configPath: confPath, fileBytes: conf, flags: vals}); err != nil {
		return err
	}
	if !fileRead {
		layers.file = "" // not read: it is written once paired
	}
	if keyNew && cfg.SwarmKey == keyPath {
		// The node reads the key at start, before pairing: give it a
		// private copy until the key may be written where it belongs.
		tmp, err := os.MkdirTemp("", "metanode-join-")
		if err != nil {
			return fmt.Errorf("swarm key: %w", err)
		}
		defer os.RemoveAll(tmp)
		cfg.SwarmKey = filepath.Join(tmp, node.SwarmKeyFile)
		if err := os.WriteFile(cfg.SwarmKey, []byte(inv.SwarmKey), 0o600); err != nil {
			return fmt.Errorf("swarm key: %w", err)
		}
	}
	commit := func() error {
		if keyNew {
			if err := writeSwarmKey(keyPath, inv.SwarmKey); err != nil {
				return err
			}
		}
		if err := writeFileAtomic(confPath, conf); err != nil {
			return err
		}
		fmt.Fprintf(c.stderr, "joining: swarm %q written to %s\n", inv.Swarm, confPath)
		return nil
	}
	return c.runNode(ctx, cfg, layers, func(ctx context.Context, n *node.Node, _ *slog.Logger) error {
		return c.pairAndSync(ctx, n, inv, commit, next, cfg.Replicate == "interest")
	})
}

// joinLoadConfig is loadConfig for join, which also says which file join
// writes: --config (or METANODE_CONFIG), else <data>/metanode.yml. A named
// config file that does not exist yet is an empty config, not an error:
// join writes it (review W6: 'join --config NEW.yml' was refused with "no
// such file or directory" although the help says join writes it). The
// returned layers name no file then, as nothing was read.
func (c *cli) joinLoadConfig(vals map[string][]string, configFlag string) (Config, configLayers, string, error) {
	named := configFlag
	if named == "" {
		named = c.getenv("METANODE_CONFIG")
	}
	if named == "" {
		cfg, layers, err := c.loadConfig(vals, "")
		return cfg, layers, filepath.Join(cfg.Data, node.ConfigFile), err
	}
	if _, err := os.Stat(named); !errors.Is(err, fs.ErrNotExist) {
		// There, or unreadable for another reason, which loadConfig
		// explains.
		cfg, layers, err := c.loadConfig(vals, named)
		return cfg, layers, named, err
	}
	cfg, layers, err := LoadConfig(loadOptions{getenv: c.getenv, configPath: named, fileBytes: []byte{}, flags: vals})
	var ce *ConfigError
	if errors.As(err, &ce) && ce.ByFlag {
		err = &usageError{msg: err.Error()} // as loadConfig says it
	}
	layers.file = ""
	return cfg, layers, named, err
}

// prepareConfigDir makes the directory of a config kept outside the data
// directory (0700, as the node makes the data directory and the databases'
// directories, so a new path just works) and checks that a file can be
// written there. Both happen before the node starts: the pairing code is
// good for one home, so a config that cannot be written must fail before
// the code is spent, not after the inviter accepted.
func prepareConfigDir(confPath string) error {
	dir := filepath.Dir(confPath)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("config %s: make its directory: %w; choose a path you can write", confPath, err)
	}
	probe, err := os.CreateTemp(dir, filepath.Base(confPath)+".*")
	if err != nil {
		return fmt.Errorf("config %s: join writes it once paired, but %w; choose a path you can write", confPath, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

// pairAndSync presents the invite (retrying while the inviter is out of
// reach), calls commit once the inviter accepted, and reports sync progress
// until this node holds as many claims as the inviter shared or progress
// stops. An interest node keeps only claims about its files and lookups,
// so it does not wait for the inviter's count.
func (c *cli) pairAndSync(ctx context.Context, n *node.Node, inv node.Invite, commit func() error, next string, interest bool) error {
	fmt.Fprintf(c.stderr, "joining: connecting to %s (%d addresses)…\n", inv.UID, len(inv.Addrs))
	total, err := n.PairWithRetry(ctx, inv, func(attempt int, err error) {
		fmt.Fprintf(c.stderr, "joining: attempt %d of %d: %v\n", attempt, node.PairAttempts, err)
	})
	switch {
	case err == nil:
		// Paired, even if a stop request came meanwhile: the inviter trusts
		// this node now, so the config is written below all the same.
	case ctx.Err() != nil:
		// Not a success: a script or a service manager must be able to
		// tell that nothing was paired (exit 1).
		// A stop while the inviter's answer was on its way may leave the
		// inviter trusting this node: the same code pairs on a re-run.
		return errors.New("interrupted before pairing; the config and trust list are unchanged; run join again with the same code to pair")
	case errors.Is(err, node.ErrPairRefused):
		// The inviter's answer says what to do (a new code).
		// Named by uid, as the progress line above named it.
		return fmt.Errorf("inviter %s: %w; the config and trust list are unchanged", inv.UID, err)
	case err != nil:
		return fmt.Errorf("inviter %s out of reach: %w; check that its node runs and that one of its addresses is reachable from here; the config and trust list are unchanged", inv.UID, err)
	}
	fmt.Fprintf(c.stderr, "joining: paired with %s; it shares %d claims\n", inv.UID, total)
	if err := commit(); err != nil {
		return fmt.Errorf("paired with %s, but %w: add its swarm and addresses to the config by hand, or join again with a new code", inv.UID, err)
	}
	if interest {
		fmt.Fprintf(c.stderr, "joining: done (replicate: interest: this node keeps the claims about its own files and the cids it looks up, not all %d); serving at %s (next time: %s)\n", total, n.APIURL(), next)
		return nil
	}
	have, all := n.WaitClaims(ctx, total, func(have int) {
		fmt.Fprintf(c.stderr, "joining: syncing %d of %d claims\n", min(int64(have), total), total)
	})
	switch {
	case all:
		fmt.Fprintf(c.stderr, "joining: done; serving at %s (next time: %s)\n", n.APIURL(), next)
	case ctx.Err() == nil:
		fmt.Fprintf(c.stderr, "joining: %d of %d claims so far; the rest arrive as peers sync; serving at %s (next time: %s)\n", have, total, n.APIURL(), next)
	}
	return nil
}

// checkSwarmKeyFile says where a private swarm's key goes (<data>/swarm.key)
// and whether it must be written. A different key already there is an
// error: joining would leave the old swarm.
func checkSwarmKeyFile(data, key string) (path string, isNew bool, err error) {
	// Absolute: the config names it, and a later serve may start elsewhere.
	if path, err = filepath.Abs(filepath.Join(data, node.SwarmKeyFile)); err != nil {
		return "", false, fmt.Errorf("swarm key: %w", err)
	}
	old, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(bytes.TrimSpace(old), bytes.TrimSpace([]byte(key))):
		return path, false, nil
	case err == nil:
		return "", false, fmt.Errorf("%s holds another swarm's key: move it away to join this swarm", path)
	case errors.Is(err, fs.ErrNotExist):
		return path, true, nil
	}
	return "", false, fmt.Errorf("swarm key: %w", err)
}

// writeSwarmKey writes a private swarm's key (0600) at path, which must not
// exist yet.
func writeSwarmKey(path, key string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("swarm key: %w", err)
	}
	_, werr := f.WriteString(key)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return fmt.Errorf("swarm key: %w", werr)
	}
	return nil
}

// writeJoinConfig writes joinConfig's result to path.
func writeJoinConfig(path string, inv node.Invite, keyPath string, given map[string]any) error {
	b, err := joinConfig(path, inv, keyPath, given)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
}

// joinConfig is the YAML config at path with swarm, swarm-key and bootstrap
// set (the inviter's addresses added to any already there) and the settings
// given to join (joinPersisted); the commented defaults when path does not
// exist. A file without those keys gets them appended, so its comments stay
// as they are.
func joinConfig(path string, inv node.Invite, keyPath string, given map[string]any) ([]byte, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b = []byte(defaultYAML)
	case err != nil:
		return nil, fmt.Errorf("config: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	var m *yaml.Node
	if len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
		m = doc.Content[0]
	} else if len(doc.Content) == 1 && doc.Content[0].Tag != "!!null" {
		return nil, fmt.Errorf("config %s: want a mapping of settings", path)
	}
	boot := slices.Clone(inv.Addrs)
	extra, _ := given["bootstrap"].([]string)
	for _, a := range append(slices.Clone(inv.Bootstrap), extra...) {
		if !slices.Contains(boot, a) {
			boot = append(boot, a)
		}
	}
	set := map[string]any{"swarm": inv.Swarm, "bootstrap": boot}
	if keyPath != "" {
		set["swarm-key"] = keyPath
	}
	order := []string{"swarm", "swarm-key", "bootstrap"}
	for _, s := range settings { // in the settings' order, so the file reads like the defaults
		if v, ok := given[s.name]; ok && set[s.name] == nil {
			set[s.name] = v
			order = append(order, s.name)
		}
	}
	if m == nil || !hasAnyKey(m, order) {
		var add bytes.Buffer
		fmt.Fprintf(&add, "\n# Written by 'metanode join' on %s: the swarm of %s.\n", time.Now().Format(time.DateOnly), inv.UID)
		for _, k := range order {
			if v, ok := set[k]; ok {
				out, _ := yaml.Marshal(map[string]any{k: v})
				add.Write(out)
			}
		}
		return append(bytes.TrimRight(b, "\n"), append([]byte("\n"), add.Bytes()...)...), nil
	}
	// The file's bootstrap peers are kept (and the code's added) unless the
	// node moves into or out of a private swarm: a private swarm's peers
	// are unreachable from outside it and the other way round. A public
	// code also drops the file's swarm key.
	sameSwarm := false
	if old := mapValue(m, "swarm"); old != nil {
		var name string
		_ = old.Decode(&name)
		sameSwarm = name == inv.Swarm
	}
	hadKey := mapValue(m, "swarm-key") != nil
	keepBoot := sameSwarm || (keyPath == "" && !hadKey)
	if keyPath == "" {
		deleteKey(m, "swarm-key")
	}
	for _, k := range order {
		v, ok := set[k]
		if !ok {
			continue
		}
		if k == "bootstrap" && keepBoot {
			if old := mapValue(m, k); old != nil {
				var have []string
				_ = old.Decode(&have)
				for _, a := range boot {
					if !slices.Contains(have, a) {
						have = append(have, a)
					}
				}
				v = have
			}
		}
		var val yaml.Node
		if err := val.Encode(v); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		if old := mapValue(m, k); old != nil {
			*old = val
		} else {
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, &val)
		}
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return out, nil
}

// deleteKey removes key and its value from the mapping m.
func deleteKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = slices.Delete(m.Content, i, i+2)
			return
		}
	}
}

func hasAnyKey(m *yaml.Node, keys []string) bool {
	for _, k := range keys {
		if mapValue(m, k) != nil {
			return true
		}
	}
	return false
}

func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// writeFileAtomic replaces path (0600) through a temporary file.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(b)
	if werr == nil {
		werr = tmp.Chmod(0o600)
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("config: %w", werr)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// joinPersisted is what join writes into the config besides the code's
// swarm: the settings given to it as flags or by environment variables, so
// that a later plain serve (from a shell or unit without those variables)
// runs the same node on the same addresses, truth and data (review W6: the
// restart without METANODE_LISTEN listened on the default port with mDNS). It
// returns them with the command that restarts this node (the hint join
// prints when done). The data directory cannot live in <data>/metanode.yml:
// it is persisted only in a config elsewhere (--config, given by flag or
// METANODE_DATA), else the hint repeats --data.
func joinPersisted(cfg Config, layers configLayers, flags map[string][]string, confPath string) (map[string]any, string, error) {
	inDataDir := filepath.Clean(confPath) == filepath.Clean(filepath.Join(cfg.Data, node.ConfigFile))
	given := make(map[string]any)
	for _, s := range settings {
		// A flag wins over a variable in LoadConfig, so src names the
		// layer the value in cfg came from.
		src := layers.src[s.name]
		if _, byFlag := flags[s.name]; !byFlag && !strings.HasPrefix(src, "environment ") {
			continue
		}
		switch s.name {
		case "swarm", "swarm-key": // the code's win: they are the pairing
			continue
		case "data":
			if inDataDir {
				continue
			}
		}
		switch p := s.field(&cfg).(type) {
		case *string:
			v := *p
			if isPathSetting(s.name) && v != "" {
				// Absolute: a later serve may start from another directory.
				abs, err := filepath.Abs(v)
				if err != nil {
					return nil, "", fmt.Errorf("%s (%s): %w", s.name, src, err)
				}
				v = abs
			}
			given[s.name] = v
		case *[]string:
			given[s.name] = slices.Clone(*p)
		case *bool:
			given[s.name] = *p
		case *int:
			given[s.name] = *p
		}
	}
	src := layers.src["data"]
	next := "metanode serve"
	switch {
	case !inDataDir:
		abs, err := filepath.Abs(confPath)
		if err != nil {
			return nil, "", fmt.Errorf("config: %w", err)
		}
		next += " --config " + shellQuote(abs)
	case strings.HasPrefix(src, "flag ") || strings.HasPrefix(src, "environment "):
		abs, err := filepath.Abs(cfg.Data)
		if err != nil {
			return nil, "", fmt.Errorf("--data: %w", err)
		}
		next += " --data " + shellQuote(abs)
	}
	return given, next, nil
}

func isPathSetting(name string) bool {
	return slices.Contains([]string{"data", "truth-db", "cache-db", "swarm-key", "files"}, name)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:,=@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
