//go:build unix

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
	holdRequest(t, srv)

	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLog(t, srv, "shutting down")
	// A signal within signalWindow of the first is the same delivery: wait
	// it out, so the next one is a second signal for certain.
	time.Sleep(signalWindow)
	select {
	case err := <-srv.done:
		t.Fatalf("serve exited (%v) with a request in flight: no drain\n%s", err, srv.logs.String())
	default:
	}
	err := termAndWait(t, srv)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("serve after two signals: %v, want exit 1", err)
	}
	if !strings.Contains(srv.logs.String(), "second signal, exiting without a clean shutdown") {
		t.Fatalf("no word of the second signal:\n%s", srv.logs.String())
	}
}

// TestE2E_SignalTwiceAtOnce: GNU timeout (and a terminal's Ctrl-C) signals
// the process and its process group, so one stop request arrives twice
// within microseconds. That is one request: serve shuts down cleanly and
// exits 0. The kernel may merge two pending SIGTERMs into one; SIGTERM then
// SIGINT are two deliveries for certain.
func TestE2E_SignalTwiceAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	for _, pair := range [][2]syscall.Signal{{syscall.SIGTERM, syscall.SIGINT}, {syscall.SIGTERM, syscall.SIGTERM}} {
		srv := startServe(t, filepath.Join(t.TempDir(), "data"))
		pid := srv.cmd.Process.Pid
		for _, sig := range pair {
			if err := syscall.Kill(pid, sig); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case err := <-srv.done:
			srv.done <- err
			if err != nil {
				t.Fatalf("serve after %v and %v at once: %v, want exit 0\n%s", pair[0], pair[1], err, srv.logs.String())
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("serve did not stop within 60s of %v\n%s", pair, srv.logs.String())
		}
		if logs := srv.logs.String(); !strings.Contains(logs, `"msg":"stopped"`) || strings.Contains(logs, "without a clean shutdown") {
			t.Fatalf("%v and %v at once: no clean stop:\n%s", pair[0], pair[1], logs)
		}
	}
}

// TestE2E_OneSignalWithSlowClientExitsZero: one SIGTERM while a client
// holds a request open past the api's drain (a slow upload here; a slow
// /file download does the same) is still a clean stop: the request is
// cut, serve says so at WARN and exits 0 (cli.md: graceful, exits 0), so
// systemd neither marks the unit failed nor restarts it (Restart=on-failure).
func TestE2E_OneSignalWithSlowClientExitsZero(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServe(t, filepath.Join(t.TempDir(), "data"))
	holdRequest(t, srv) // past the drain
	if err := termAndWait(t, srv); err != nil {
		t.Fatalf("serve after one SIGTERM with a slow client: %v, want exit 0\n%s", err, srv.logs.String())
	}
	if !strings.Contains(srv.logs.String(), "requests still running after the shutdown timeout were cut") {
		t.Errorf("no word of the cut request:\n%s", srv.logs.String())
	}
}

// holdRequest starts a POST whose body never completes, so the request is
// in flight until the server cuts it; the connection closes with the test.
// With "Expect: 100-continue" the server says "100 Continue" only when the
// handler starts reading the body: the request is then in flight for
// certain (a request whose headers are read after the shutdown began is
// dropped unserved, which is no drain to test).
func holdRequest(t *testing.T, srv *server) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /api/claims HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.Contains(line, "100") {
		t.Fatalf("want 100 Continue from the handler: %q %v", line, err)
	}
	fmt.Fprintf(conn, "{\"claims\":[") // part of the body: the handler waits for the rest
}

// termAndWait sends serve a SIGTERM and returns how it exited (within 60 s).
func termAndWait(t *testing.T, srv *server) error {
	t.Helper()
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-srv.done:
		srv.done <- err
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not exit within 60 s of a SIGTERM")
		return nil
	}
}
