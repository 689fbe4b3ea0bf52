//go:build linux

// Package netnstest runs a test inside a private user + network namespace
// (unshare -rn), where it may give lo addresses of its own (a LAN, a
// public-looking or an IPv6 address) and use multicast without touching
// the machine's network. A test calls Enter first: outside, Enter
// re-executes the test binary in the namespace running only that test,
// reports the child's verdict and returns false (the test returns at
// once); inside, it returns true. No goroutine is left behind: the child
// is waited for before Enter returns.
package netnstest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// env marks a test binary re-executed inside a private network namespace;
// its value is the one test the child runs.
const env = "METANODE_TEST_NETNS"

// setupFailed is the child's exit code when the namespace's setup commands
// are refused: the parent skips rather than fails.
const setupFailed = 97

// Enter runs the calling test inside a private network namespace. setup
// are `ip` commands run there first (lo is brought up before them). No
// unshare, no ip, or a refused namespace (unprivileged CI): the test is
// skipped with the reason.
func Enter(t *testing.T, setup ...string) bool {
	t.Helper()
	if os.Getenv(env) == t.Name() {
		return true
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	if out, err := exec.Command("unshare", "-rn", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot make a private network namespace: %v: %s", err, bytes.TrimSpace(out))
	}
	cmds := append([]string{"ip link set lo up"}, setup...)
	script := "{ " + strings.Join(cmds, " && ") + "; } || exit " + strconv.Itoa(setupFailed) + `; exec "$0" "$@"`
	args := []string{"-rn", "sh", "-c", script, os.Args[0],
		"-test.run", "^" + regexp.QuoteMeta(t.Name()) + "$", "-test.v", "-test.count=1"}
	if f := flag.Lookup("test.timeout"); f != nil {
		args = append(args, "-test.timeout="+f.Value.String())
	}
	// The child must not outlive this test: kill it a little before this
	// binary's own deadline, so its output is still reported.
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, "unshare", args...)
	cmd.Env = append(os.Environ(), env+"="+t.Name())
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("in a private network namespace:\n%s", out)
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() == setupFailed {
		t.Skipf("the namespace refused its setup (%s)", strings.Join(cmds, "; "))
	}
	if err != nil {
		t.Fatalf("the test failed in its network namespace: %v", err)
	}
	// Exit 0 without our test having passed would be a pattern that
	// matched nothing: a test that cannot fail.
	if !bytes.Contains(out, []byte("--- PASS: "+t.Name()+" ")) {
		t.Fatal("the test did not run in its network namespace")
	}
	return false
}
