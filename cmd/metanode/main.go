package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/metanode/metanode/api"
)

// version, commit and date are stamped at build time (make build, make
// release): -ldflags "-X main.version=v1.2.3 -X main.commit=… -X
// main.date=…". Left empty, buildVersion reads them from the binary's
// build information (go install …@v1.2.3, go build in a git checkout).
var version = ""

var (
	commit = ""
	date   = ""
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go onSignals(sigs, cancel, os.Stderr, os.Exit, time.Now)
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// signalWindow: signals this soon after the first are the same delivery.
// GNU timeout, a shell's Ctrl-C and some supervisors signal the process and
// its process group at once, so one stop request can arrive twice within
// microseconds; a person pressing Ctrl-C twice is far slower than this.
const signalWindow = 250 * time.Millisecond

// onSignals turns the first signal into cancel (serve then shuts down
// gracefully); a later one, arriving signalWindow or more after the first,
// exits 1 at once. It returns when sigs is closed.
func onSignals(sigs <-chan os.Signal, cancel func(), stderr io.Writer, exit func(int), now func() time.Time) {
	if _, ok := <-sigs; !ok {
		return
	}
	first := now()
	cancel()
	for {
		if _, ok := <-sigs; !ok {
			return
		}
		if now().Sub(first) >= signalWindow {
			break
		}
	}
	fmt.Fprintln(stderr, "metanode: second signal, exiting without a clean shutdown (the cache is repaired at the next start)")
	exit(1)
}

// Exit statuses (cli.md).
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// cli carries a command's streams and environment.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	clients        []*api.Client // closed when the command ends
	// setMemoryLimit is debug.SetMemoryLimit in the binary; nil in tests
	// that run nodes in their own process (the limit is process-wide).
	setMemoryLimit func(int64) int64
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, setMemoryLimit: debug.SetMemoryLimit}
	return c.run(ctx, args)
}

// usageError is a command line that does not make sense: exit 2.
type usageError struct {
	cmd string // "serve", "claim sign", …
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usagef(cmd, format string, a ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, a...)}
}

// subError labels an error of a subcommand ("claim sign"), so that its
// message names the command that failed, as a usage error does.
type subError struct {
	cmd string
	err error
}

func (e *subError) Error() string { return e.err.Error() }
func (e *subError) Unwrap() error { return e.err }

// inSub labels err as cmd's unless it is nil, the help or a usage error
// (which names its command already).
func inSub(cmd string, err error) error {
	var ue *usageError
	if err == nil || errors.Is(err, errHelp) || errors.As(err, &ue) {
		return err
	}
	return &subError{cmd: cmd, err: err}
}

// errHelp is returned after printing a command's help: exit 0.
var errHelp = errors.New("help printed")

type command struct {
	name    string
	summary string
	run     func(c *cli, ctx context.Context, args []string) error
}

var commands []command

func init() {
	commands = []command{
		{"serve", "run a node until SIGINT/SIGTERM", (*cli).serve},
		{"init", "create the data directory, the node key and a default config", (*cli).initCmd},
		{"id", "print the node's peer id, uid and addresses", (*cli).id},
		{"keygen", "write a new signer key and print its uid", (*cli).keygen},
		{"claim", "sign claims (claim sign) or sign and post them to a node (claim put)", (*cli).claim},
		{"get", "print the merged record of a cid", (*cli).get},
		{"status", "print the node's swarm state", (*cli).status},
		{"peers", "print the node's connected peers", (*cli).peers},
		{"health", "exit 0 when the node answers GET /health with ok (for health checks)", (*cli).health},
		{"trust", "list, add or remove trusted signers (trust ls|add UID|rm UID)", (*cli).trust},
		{"invite", "make a pairing code for another home", (*cli).invite},
		{"join", "pair with another home using its code", (*cli).join},
		{"gui-password", "print the bcrypt hash of a password for the owner's page (gui-password)", (*cli).guiPassword},
		{"import", "import the metadata of a Redis or SQLite core into this node", (*cli).importCmd},
		{"bench", "measure this machine (bench verify) or a swarm on loopback (bench swarm)", (*cli).bench},
		{"version", "print the version, commit, build date and Go version", (*cli).version},
	}
}

func (c *cli) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, "metanode: no command given\nRun 'metanode --help' for the list of commands.\n")
		return exitUsage
	}
	name := args[0]
	if name == "help" && len(args) > 1 {
		// "metanode help CMD" is "metanode CMD --help" (an unknown CMD is a
		// usage error below).
		name, args = args[1], []string{args[1], "--help"}
	}
	switch name {
	case "-h", "-help", "--help", "help":
		c.printUsage(c.stdout)
		return exitOK
	case "-version", "--version":
		name = "version"
	}
	var cmd *command
	for i := range commands {
		if commands[i].name == name {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(c.stderr, "metanode: unknown command %q\nRun 'metanode --help' for the list of commands.\n", name)
		return exitUsage
	}
	err := cmd.run(c, ctx, args[1:])
	for _, cl := range c.clients {
		cl.Close()
	}
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ue):
		if ue.cmd == "" {
			ue.cmd = name
		}
		fmt.Fprintf(c.stderr, "metanode %s: %s\nRun 'metanode %s --help' for usage.\n", ue.cmd, ue.msg, ue.cmd)
		return exitUsage
	default:
		var se *subError
		if errors.As(err, &se) {
			name = se.cmd
		}
		fmt.Fprintf(c.stderr, "metanode %s: %s\n", name, oneLine(err.Error()))
		return exitError
	}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func (c *cli) printUsage(w io.Writer) {
	fmt.Fprint(w, `metanode: a peer-to-peer metadata node.

Usage: metanode <command> [flags]

Commands:
`)
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprint(w, `
Run 'metanode <command> --help' for a command's flags.
Exit status: 0 success, 1 error, 2 usage error.
`)
}

// flagSet makes a command's flag set: errors are handled by parse, help
// goes to stdout.
func (c *cli) flagSet(name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(c.stdout, "Usage: metanode %s\n\n%s\n", synopsis, about)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(c.stdout, "\nFlags:")
			fs.SetOutput(c.stdout)
			fs.PrintDefaults()
			fs.SetOutput(io.Discard)
		}
	}
	return fs
}

// parse parses flags, interleaved with positional arguments (Go's flag
// package stops at the first positional one), and returns the positionals.
// The help goes to stdout only when asked for: the flag package calls Usage
// on every bad flag too, and stdout is a script's data.
func (c *cli) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	help := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = help }()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				help()
				return nil, errHelp
			}
			return nil, usagef(fs.Name(), "%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
