package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2E_SignalsDrainThenForce: the first SIGTERM drains requests in
// flight (serve keeps running while one is unfinished) and the second exits
// at once with status 1, saying why. The request is a POST whose body
// never completes, which holds the drain open for the api's whole
// shutdown timeout.
func TestE2E_SignalsDrainThenForce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServe(t, filepath.Join(t.TempDir(), "data"))
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Headers and part of the body: the handler is now reading it.
	fmt.Fprintf(conn, "POST /api/claims HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"claims\":[")
	waitRequestStarted(t, srv)

	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLog(t, srv, "shutting down")
	select {
	case err := <-srv.done:
		t.Fatalf("serve exited (%v) with a request in flight: no drain\n%s", err, srv.logs.String())
	default:
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-srv.done:
		srv.done <- err
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not exit after the second signal")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("serve after two signals: %v, want exit 1", err)
	}
	if !strings.Contains(srv.logs.String(), "second signal, exiting without a clean shutdown") {
		t.Fatalf("no word of the second signal:\n%s", srv.logs.String())
	}
}

// waitRequestStarted waits (bounded) until a request reaches a handler of
// s: a GET /health on a second connection answered after the POST was sent
// shows the server is serving; the POST's handler is reading its body by
// then or soon after, which the drain then waits for either way.
func waitRequestStarted(t *testing.T, s *server) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, "200") {
		t.Fatalf("health: %q %v", line, err)
	}
}
