package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/node"
	"github.com/metanode/metanode/store"
)

// defaultAPI is where client commands find the node when nothing says
// otherwise.
const defaultAPI = "http://127.0.0.1:9000"

// apiTarget is how a client command finds the node: --api, else
// METANODE_API, else the HTTP address serve would listen on with the same
// config (--config or METANODE_CONFIG, <data>/metanode.yml, META_CORE_HTTP_PORT,
// METANODE_HTTP), so a node whose API moved the documented ways is found.
// Only that address is read: the rest of the config, and a file that cannot
// be read or parsed, do not stop a client command.
type apiTarget struct {
	api        *string
	vals       map[string][]string // --data (and the command's own config flags)
	configPath *string
}

// apiFlag adds --api, --config and --data to a client command.
func (c *cli) apiFlag(fl *flag.FlagSet) *apiTarget {
	vals, configPath := configFlags(fl, "data")
	return c.apiFlagWith(fl, vals, configPath)
}

// apiFlagWith adds --api to a command that has its config flags already.
func (c *cli) apiFlagWith(fl *flag.FlagSet, vals map[string][]string, configPath *string) *apiTarget {
	api := fl.String("api", "", "the node's HTTP API, e.g. "+defaultAPI+" (default: env METANODE_API, else the http address of the config serve would read (--config, METANODE_CONFIG, <data>/metanode.yml; META_CORE_HTTP_PORT, METANODE_HTTP), else "+defaultAPI+")")
	return &apiTarget{api: api, vals: vals, configPath: configPath}
}

// url resolves the target after the flags are parsed.
func (c *cli) url(t *apiTarget) (string, error) {
	if *t.api != "" {
		return *t.api, nil
	}
	if v := c.getenv("METANODE_API"); v != "" {
		return v, nil
	}
	// Only the http setting: the rest of the config is serve's business.
	cfg, layers, err := LoadConfig(loadOptions{getenv: c.getenv, configPath: *t.configPath, flags: t.vals, only: "http"})
	if err != nil {
		return "", err
	}
	if !layers.set["http"] {
		return defaultAPI, nil
	}
	host, port, err := net.SplitHostPort(cfg.HTTP)
	if err != nil { // Validate checked it
		return "", fmt.Errorf("config http %q: %w", cfg.HTTP, err)
	}
	if port == "0" {
		return "", fmt.Errorf("the node's http address %s (%s) takes any free port: give --api with the address it logged", cfg.HTTP, layers.src["http"])
	}
	// A node listening on every interface answers on loopback.
	switch ip := net.ParseIP(host); {
	case host == "" || (ip != nil && ip.IsUnspecified() && ip.To4() != nil):
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

func (c *cli) client(base string) (*api.Client, error) {
	u, err := url.Parse(base)
	if err != nil || ((u.Scheme != "http" && u.Scheme != "https") || u.Host == "") && !(u.Scheme == "unix" && u.Path != "") {
		return nil, usageErrorf("--api %q is not an http:// URL (or unix:///path/to/api.sock), e.g. %s", base, defaultAPI)
	}
	cl := api.NewClient(base)
	c.clients = append(c.clients, cl)
	return cl, nil
}

// target parses nothing: it resolves t and opens a client on it.
func (c *cli) target(t *apiTarget) (*api.Client, string, error) {
	base, err := c.url(t)
	if err != nil {
		return nil, "", err
	}
	cl, err := c.client(base)
	if err == nil {
		cl.SetToken(c.apiToken(t, base))
	}
	return cl, base, err
}

// apiToken is the API token a client command sends (docs/http.md "Who
// may use the API"): METANODE_API_TOKEN, else the one in the data
// directory when this user can read it and the API is the one that data
// directory's config names, or on this machine's loopback or a Unix
// socket. An --api elsewhere gets no token of this node's.
func (c *cli) apiToken(t *apiTarget, base string) string {
	if v := c.getenv("METANODE_API_TOKEN"); v != "" {
		return v
	}
	explicit := *t.api != "" || c.getenv("METANODE_API") != ""
	if u, err := url.Parse(base); explicit && (err != nil || (u.Scheme != "unix" && !isLoopbackName(u.Hostname()))) {
		return ""
	}
	cfg, _, err := LoadConfig(loadOptions{getenv: c.getenv, configPath: *t.configPath, flags: t.vals, only: "data"})
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(cfg.Data, node.TokenFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// isLoopbackName: localhost or a loopback address.
func isLoopbackName(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// errDropped: the node closed the connection after the request was sent.
var errDropped = errors.New("no answer")

// usageErrorf is a bad flag value found after parsing.
func usageErrorf(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// explainClient turns transport failures into what to do.
func explainClient(err error, base string) error {
	var ue *url.Error // the transport's, not a decode of an answer's body
	if errors.As(err, &ue) && (errors.Is(ue.Err, io.EOF) || errors.Is(ue.Err, io.ErrUnexpectedEOF) || errors.Is(ue.Err, syscall.ECONNRESET)) {
		// The request was sent; the node went away before it answered.
		return fmt.Errorf("the node at %s closed the connection before answering (did it stop?): %w", base, errDropped)
	}
	var op *net.OpError
	if errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &op) {
		return fmt.Errorf("no node answers at %s: start one with 'metanode serve', or point --api (or METANODE_API) at it", base)
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		return fmt.Errorf("the node answered %d %s: %s", ae.Status, ae.Slug, ae.Message)
	}
	return err
}

func (c *cli) claimPut(ctx context.Context, args []string) error {
	fl := c.flagSet("claim put", "claim put [--api URL] (--signer FILE --cid C --key K (--value V | --retract | --cipher-b64 B) [--ts MS] | -)",
		`Signs one claim from flags and posts it to the node, or, with '-' or with no
claim flags and piped input, posts the claim JSON lines read from stdin (as
'metanode claim sign' prints them). Prints one result line per claim posted
({"id","status","error"?,"message"?}). A malformed stdin line is reported on
stderr ("stdin line N: …") and not posted; the other lines still are. Exits 1
when any line was malformed or any claim rejected.`)
	tgt := c.apiFlag(fl)
	cf := addClaimFlags(fl)
	pos, err := c.parse(fl, args)
	if err != nil {
		return err
	}
	fromStdin := len(pos) == 1 && pos[0] == "-"
	if len(pos) > 0 && !fromStdin {
		return usagef("claim put", "unexpected argument %q", pos[0])
	}
	if !fromStdin && !cf.given() {
		if !stdinPiped(c.stdin) {
			return usagef("claim put", "give a claim with --signer, --cid, --key and a value, or pipe claim JSON lines with '-'")
		}
		fromStdin = true
	}
	if fromStdin && cf.given() {
		return usagef("claim put", "give claim flags or '-' (stdin), not both")
	}
	cl, base, err := c.target(tgt)
	if err != nil {
		return err
	}
	var total, rejected, malformed int
	var untrusted []string // signers refused as untrusted, in order, once each
	seen := make(map[string]bool)
	untrustedSlug := store.Slug(store.ErrUntrusted)
	post := func(batch []store.Claim) error {
		resp, err := cl.PostClaims(ctx, batch)
		if err != nil {
			err = explainClient(err, base)
			if errors.Is(err, errDropped) {
				// Claims reach the truth before the answer does: some may
				// be stored. A claim stored twice is the same claim.
				return fmt.Errorf("%w; some of these claims may be stored: posting them again is safe (stored ones answer unchanged)", err)
			}
			return err
		}
		for i, r := range resp.Results {
			if err := c.printLine(r); err != nil {
				return err
			}
			// Results are in request order: the claim names the signer.
			if r.Error == untrustedSlug && i < len(batch) && !seen[batch[i].UID] {
				seen[batch[i].UID] = true
				untrusted = append(untrusted, batch[i].UID)
			}
		}
		total += len(batch)
		rejected += resp.Rejected
		return nil
	}
	if fromStdin {
		err = readClaimLines(c.stdin, post, func(line int, err error) {
			malformed++
			fmt.Fprintf(c.stderr, "metanode claim put: stdin line %d: %s (want one claim JSON object per line, as 'metanode claim sign' prints); not posted\n", line, oneLine(err.Error()))
		})
	} else {
		var one store.Claim
		if one, err = cf.sign("claim put"); err == nil {
			err = post([]store.Claim{one})
		}
	}
	if err != nil {
		return err
	}
	hint := trustHint(untrusted)
	switch {
	case malformed > 0 && rejected > 0:
		return fmt.Errorf("%d malformed lines not posted (above); %d of %d claims posted were rejected (see the error of each result)%s", malformed, rejected, total, hint)
	case malformed > 0:
		return fmt.Errorf("%d malformed lines not posted (above); %d claims posted", malformed, total)
	case rejected > 0:
		return fmt.Errorf("%d of %d claims rejected (see the error of each result above)%s", rejected, total, hint)
	}
	return nil
}

// trustHint says how to accept the signers the node refused as untrusted
// ("" when none was).
func trustHint(uids []string) string {
	switch len(uids) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("; 'metanode trust add %s' accepts this signer%s", uids[0], distrustNote)
	}
	const shown = 3
	list := strings.Join(uids[:min(len(uids), shown)], ", ")
	if len(uids) > shown {
		list += fmt.Sprintf(" and %d more", len(uids)-shown)
	}
	return fmt.Sprintf("; 'metanode trust add UID' accepts a signer%s (%d untrusted: %s)", distrustNote, len(uids), list)
}

// distrustNote: with auto-trust on, a local write is refused as untrusted
// only when the owner removed its signer, which is then no slip to undo
// blindly (review 10, R10-6).
const distrustNote = " (check 'metanode trust ls' first: one removed with 'trust rm' is distrusted on purpose)"

func (c *cli) get(ctx context.Context, args []string) error {
	fl := c.flagSet("get", "get CID [--remote] [--as UID] [--api URL]",
		"Prints the merged record of CID as JSON. With --remote, a cid unknown here is\nlooked up in the swarm (DHT), fetched, verified and stored first.")
	tgt := c.apiFlag(fl)
	remote := fl.Bool("remote", false, "look the cid up in the swarm when this node has no record")
	as := fl.String("as", "", "overlay this signer's own votes")
	pos, err := c.parse(fl, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("get", "want exactly one CID")
	}
	if err := store.CheckCID(pos[0]); err != nil {
		return usagef("get", "%v", err)
	}
	if *as != "" {
		// Checked here, as trust add does: a bad flag value is a usage
		// error, not the node's 400.
		if err := store.CheckUID(*as); err != nil {
			return usagef("get", "--as: %v; give a signer's uid, as 'metanode keygen' or 'metanode id' prints it", err)
		}
	}
	cl, base, err := c.target(tgt)
	if err != nil {
		return err
	}
	rec, err := cl.Meta(ctx, pos[0], api.MetaOptions{Remote: *remote, As: *as})
	if errors.Is(err, store.ErrNotFound) {
		var ae *api.Error
		if *remote && errors.As(err, &ae) && ae.Message != "" {
			// The node says why: no peer knew the cid, or peers hold
			// claims about it only by signers it does not trust (and
			// what to do about that).
			return errors.New(ae.Message)
		}
		if *remote {
			return fmt.Errorf("no record for %s here or at any peer reached in time", pos[0])
		}
		return fmt.Errorf("no record for %s on this node (try --remote to ask the swarm)", pos[0])
	}
	if err != nil {
		return explainClient(err, base)
	}
	return c.printJSON(rec)
}

func (c *cli) status(ctx context.Context, args []string) error {
	return c.printGet(ctx, args, "status", "Prints the node's swarm state (GET /api/swarm/status) as JSON.",
		func(cl *api.Client) (any, error) { return cl.SwarmStatus(ctx) })
}

func (c *cli) peers(ctx context.Context, args []string) error {
	return c.printGet(ctx, args, "peers", "Prints the node's connected peers (GET /api/swarm/peers) as JSON.",
		func(cl *api.Client) (any, error) { return cl.SwarmPeers(ctx) })
}

// printGet runs a client command that takes only --api and prints what
// get reads from the node as JSON.
func (c *cli) printGet(ctx context.Context, args []string, name, help string, get func(*api.Client) (any, error)) error {
	fl := c.flagSet(name, name+" [--api URL]", help)
	tgt := c.apiFlag(fl)
	if err := c.noArgs(fl, args); err != nil {
		return err
	}
	cl, base, err := c.target(tgt)
	if err != nil {
		return err
	}
	v, err := get(cl)
	if err != nil {
		return explainClient(err, base)
	}
	return c.printJSON(v)
}

func (c *cli) trust(ctx context.Context, args []string) error {
	fl := c.flagSet("trust", "trust ls | trust add UID | trust rm UID [--api URL]",
		`Lists the signers the node accepts (and why), trusts a signer (e.g. another
home's node uid, from its 'metanode id'), or distrusts one (its votes leave
every merged value at once; a vouch does not override it).`)
	tgt := c.apiFlag(fl)
	pos, err := c.parse(fl, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("trust", "want ls, add UID or rm UID")
	}
	cl, base, err := c.target(tgt)
	if err != nil {
		return err
	}
	switch pos[0] {
	case "ls", "list":
		if len(pos) != 1 {
			return usagef("trust", "ls takes no argument")
		}
		tl, err := cl.Trust(ctx)
		if err != nil {
			return explainClient(err, base)
		}
		return c.printJSON(tl)
	case "add", "rm":
		if len(pos) != 2 {
			return usagef("trust", "%s wants exactly one UID", pos[0])
		}
		uid := pos[1]
		if err := store.CheckUID(uid); err != nil {
			return usagef("trust", "%v", err)
		}
		if pos[0] == "add" {
			err = cl.AddTrust(ctx, uid)
		} else {
			err = cl.RemoveTrust(ctx, uid)
		}
		if err != nil {
			return explainClient(err, base)
		}
		return c.printLine(map[string]any{"uid": uid, "trusted": pos[0] == "add"})
	}
	return usagef("trust", "unknown subcommand %q: want ls, add or rm", pos[0])
}

func (c *cli) printLine(v any) error {
	return json.NewEncoder(c.stdout).Encode(v)
}

func (c *cli) health(ctx context.Context, args []string) error {
	fl := c.flagSet("health", "health [--api URL] [--wait D]",
		`Prints the node's GET /health answer and exits 0 when its status is ok, 1
otherwise: for container health checks and service managers. With --wait, it
asks again (every 250ms) until the node is ok or D has passed.`)
	tgt := c.apiFlag(fl)
	wait := fl.Duration("wait", 0, "keep asking until ok, for at most this long")
	if err := c.noArgs(fl, args); err != nil {
		return err
	}
	cl, base, err := c.target(tgt)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(*wait)
	for {
		h, err := cl.Health(ctx)
		if err == nil && h.Status == "ok" {
			return c.printJSON(h)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil {
				return explainClient(err, base)
			}
			_ = c.printJSON(h)
			return fmt.Errorf("the node at %s is %s (see the checks above)", base, h.Status)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}
