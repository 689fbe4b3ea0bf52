package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metanode/metanode/store"
)

// TestRun_ClaimErrors: each error of claim sign and claim put names the
// subcommand and the flag at fault, says what to do in one line, and is a
// usage error (exit 2) when a flag's value is what a node would reject.
func TestRun_ClaimErrors(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "plugin.key")
	runCLI(t, nil, nil, "keygen", "--out", key).want(t, 0, "keygen")
	garbage := filepath.Join(dir, "garbage.key")
	if err := os.WriteFile(garbage, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const cid = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
	long := strings.Repeat("x", 70_000)
	for _, tc := range []struct {
		name string
		args []string // after "claim <sub>"
		code int
		want []string // in stderr
		not  string   // not in stderr
	}{
		{name: "missing key file", args: []string{"--signer", filepath.Join(dir, "none.key"), "--cid", cid, "--key", "k", "--value", "v"},
			code: 1, want: []string{"--signer", "no such file", "metanode keygen --out " + filepath.Join(dir, "none.key")}},
		// keygen refuses to overwrite a file: telling to run it there is wrong.
		{name: "not a key file", args: []string{"--signer", garbage, "--cid", cid, "--key", "k", "--value", "v"},
			code: 1, want: []string{"--signer", garbage, "64 hex"}, not: "keygen --out " + garbage},
		{name: "bad cid", args: []string{"--signer", key, "--cid", "not-a-cid", "--key", "title", "--value", "x"},
			code: 2, want: []string{"--cid", "not-a-cid", "CIDv1"}},
		{name: "future ts", args: []string{"--signer", key, "--cid", cid, "--key", "title", "--value", "x", "--ts", "99999999999999"},
			code: 2, want: []string{"--ts", "future", "leave --ts out"}},
		{name: "bad key", args: []string{"--signer", key, "--cid", cid, "--key", "a//b", "--value", "x"},
			code: 2, want: []string{"--key", "empty segment", "field path"}},
		{name: "reserved key", args: []string{"--signer", key, "--cid", cid, "--key", "filePath", "--value", "x"},
			code: 2, want: []string{"--key", "never signed", "another --key"}},
		{name: "value too large", args: []string{"--signer", key, "--cid", cid, "--key", "title", "--value", long},
			code: 2, want: []string{"--value", "exceeds", "at most"}},
		{name: "link value", args: []string{"--signer", key, "--cid", cid, "--key", "cids/bafkreia2kqqsxhyzhjvgyu4czxinlmcpzzn4bqdqmw6vaxhbrbd6qtyvcu", "--value", "yes"},
			code: 2, want: []string{"--value", "--value true"}},
	} {
		for _, sub := range []string{"sign", "put"} {
			t.Run(tc.name+"/"+sub, func(t *testing.T) {
				args := append([]string{"claim", sub, "--api", "http://127.0.0.1:1"}, tc.args...)
				if sub == "sign" {
					args = append([]string{"claim", sub}, tc.args...)
				}
				r := runCLI(t, nil, nil, args...)
				r.want(t, tc.code, args...)
				if prefix := "metanode claim " + sub + ": "; !strings.HasPrefix(r.stderr, prefix) {
					t.Errorf("stderr %q: want it to start with %q", r.stderr, prefix)
				}
				for _, w := range tc.want {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("stderr %q lacks %q", r.stderr, w)
					}
				}
				if tc.not != "" && strings.Contains(r.stderr, tc.not) {
					t.Errorf("stderr %q: says %q", r.stderr, tc.not)
				}
				if r.stdout != "" {
					t.Errorf("stdout %q: want nothing", r.stdout)
				}
			})
		}
	}
	// An error after the flags were fine names the subcommand too.
	r := runCLI(t, nil, nil, "claim", "put", "--api", "http://127.0.0.1:1", "--signer", key, "--cid", cid, "--key", "title", "--value", "x")
	r.want(t, 1, "claim put to no node")
	if !strings.HasPrefix(r.stderr, "metanode claim put: ") {
		t.Errorf("stderr %q: want it to name claim put", r.stderr)
	}
}

// TestRun_FileErrorsSayWhatToDo: keygen, init and id name the flag to change
// when the file or directory they need is unusable.
func TestRun_FileErrorsSayWhatToDo(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	badKey := filepath.Join(dir, "bad-node")
	if err := os.MkdirAll(badKey, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(badKey, "node.key"), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": dir}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"keygen", "--out", filepath.Join(file, "k.key")}, []string{"metanode keygen: ", "--out"}},
		{[]string{"init", "--data", filepath.Join(file, "data")}, []string{"metanode init: ", "--data"}},
		{[]string{"init", "--data", badKey}, []string{"metanode init: ", "restore", "node.key", "--data"}},
		{[]string{"id", "--data", badKey}, []string{"metanode id: ", "restore", "node.key", "--data"}},
	} {
		r := runCLI(t, env, nil, tc.args...)
		r.want(t, 1, tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("metanode %s: stderr %q lacks %q", strings.Join(tc.args, " "), r.stderr, w)
			}
		}
	}
}

// TestRun_ClaimPutMalformedLine: claims stand alone, so a malformed stdin
// line does not keep the valid ones from the node (it used to post none):
// they are posted, the bad line is named on stderr, and the exit is 1.
func TestRun_ClaimPutMalformedLine(t *testing.T) {
	dir := t.TempDir()
	url, _, _ := serveInProcess(t, map[string]string{"HOME": dir}, "--data", filepath.Join(dir, "data"))
	s, err := store.GenerateSigner()
	if err != nil {
		t.Fatal(err)
	}
	const cid = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
	var in bytes.Buffer
	for i, line := range []string{"title=Heat", "garbage", "year=1995", `{"uid":1}`} {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			fmt.Fprintf(&in, "%s\n", line)
			continue
		}
		b, err := s.Text(cid, k, v, uint64(1_700_000_000_000+i)).MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&in, "%s\n", b)
	}
	r := runCLI(t, map[string]string{"METANODE_API": url}, &in, "claim", "put", "-")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if n := strings.Count(r.stdout, `"status":"accepted"`); n != 2 || strings.Count(r.stdout, "\n") != 2 {
		t.Fatalf("stdout %q: want the 2 valid claims accepted", r.stdout)
	}
	for _, want := range []string{"stdin line 2: ", "stdin line 4: ", "2 malformed lines not posted (above); 2 claims posted"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}
	r = runCLI(t, map[string]string{"METANODE_API": url}, nil, "get", cid)
	r.want(t, 0, "get", cid)
	if !strings.Contains(r.stdout, `"year": "1995"`) || !strings.Contains(r.stdout, `"title": "Heat"`) {
		t.Fatalf("get after the put: %s", r.stdout)
	}
}

// TestRun_ClaimPutUntrustedHint: a claim the node refuses as untrusted_signer
// gets, in the one error line, the command that accepts its signer (found
// from each result's slug, not its message); following it works. Other
// rejections get no such hint.
func TestRun_ClaimPutUntrustedHint(t *testing.T) {
	dir := t.TempDir()
	url, _, _ := serveInProcess(t, map[string]string{"HOME": dir}, "--data", filepath.Join(dir, "data"), "--auto-trust-local=false")
	env := map[string]string{"METANODE_API": url}
	const cid = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
	keys := make([]string, 3)
	uids := make([]string, 3)
	for i := range keys {
		keys[i] = filepath.Join(dir, fmt.Sprintf("p%d.key", i))
		r := runCLI(t, nil, nil, "keygen", "--out", keys[i])
		r.want(t, 0, "keygen")
		uids[i] = strings.TrimSpace(r.stdout)
	}
	put := []string{"claim", "put", "--signer", keys[0], "--cid", cid, "--key", "title", "--value", "Heat"}
	r := runCLI(t, env, nil, put...)
	r.want(t, 1, put...)
	if !strings.Contains(r.stdout, `"error":"untrusted_signer"`) {
		t.Fatalf("stdout %q: want the claim refused as untrusted_signer", r.stdout)
	}
	want := "metanode claim put: 1 of 1 claims rejected (see the error of each result above); 'metanode trust add " + uids[0] + "' accepts this signer (check 'metanode trust ls' first: one removed with 'trust rm' is distrusted on purpose)\n"
	if r.stderr != want {
		t.Fatalf("stderr %q, want %q", r.stderr, want)
	}
	// The hint's command, then the same put, accepted.
	runCLI(t, env, nil, "trust", "add", uids[0]).want(t, 0, "trust add")
	r = runCLI(t, env, nil, put...)
	r.want(t, 0, put...)

	// From stdin: two untrusted signers named once each, in order; a bad
	// signature from the trusted one adds no hint of its own.
	var in bytes.Buffer
	line := func(key string, k, v string, bad bool) {
		s, err := store.LoadSigner(key)
		if err != nil {
			t.Fatal(err)
		}
		c := s.Text(cid, k, v, 1_700_000_000_000)
		if bad {
			c.Value = []byte(v + "!") // the signature no longer matches
		}
		b, err := c.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&in, "%s\n", b)
	}
	line(keys[1], "year", "1995", false)
	line(keys[2], "year", "1996", false)
	line(keys[1], "genre", "crime", false)
	line(keys[0], "year", "1995", true)
	r = runCLI(t, env, &in, "claim", "put", "-")
	r.want(t, 1, "claim put -")
	if n := strings.Count(r.stdout, `"error":"untrusted_signer"`); n != 3 || !strings.Contains(r.stdout, `"error":"bad_signature"`) {
		t.Fatalf("stdout %q: want 3 untrusted and 1 bad signature", r.stdout)
	}
	want = "metanode claim put: 4 of 4 claims rejected (see the error of each result above); 'metanode trust add UID' accepts a signer (check 'metanode trust ls' first: one removed with 'trust rm' is distrusted on purpose) (2 untrusted: " + uids[1] + ", " + uids[2] + ")\n"
	if r.stderr != want {
		t.Fatalf("stderr %q, want %q", r.stderr, want)
	}
}

func TestTrustHint(t *testing.T) {
	for _, tc := range []struct {
		uids []string
		want string
	}{
		{nil, ""},
		{[]string{"za"}, "; 'metanode trust add za' accepts this signer (check 'metanode trust ls' first: one removed with 'trust rm' is distrusted on purpose)"},
		{[]string{"za", "zb", "zc", "zd", "ze"}, "; 'metanode trust add UID' accepts a signer (check 'metanode trust ls' first: one removed with 'trust rm' is distrusted on purpose) (5 untrusted: za, zb, zc and 2 more)"},
	} {
		if got := trustHint(tc.uids); got != tc.want {
			t.Errorf("trustHint(%q) = %q, want %q", tc.uids, got, tc.want)
		}
	}
}

// TestRun_ClaimPutNodeDropsConnection: a node that goes away after the
// claims were sent (killed mid-request) leaves them perhaps stored: claim
// put says so and that posting again is safe, not a bare EOF (review s11
// D3). The "node" reads the request and closes the connection.
func TestRun_ClaimPutNodeDropsConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for range 4 { // bounded: the client may retry an idempotent request
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = http.ReadRequest(bufio.NewReader(c))
			c.Close()
		}
	}()
	dir := t.TempDir()
	env := map[string]string{"HOME": dir}
	key := filepath.Join(dir, "p.key")
	runCLI(t, env, nil, "keygen", "--out", key).want(t, 0, "keygen")
	r := runCLI(t, env, nil, "claim", "put", "--api", "http://"+ln.Addr().String(), "--signer", key,
		"--cid", "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy", "--key", "title", "--value", "x")
	r.want(t, 1, "claim put")
	if !strings.Contains(r.stderr, "closed the connection before answering") || !strings.Contains(r.stderr, "posting them again is safe") {
		t.Fatalf("claim put to a node that dropped the connection: stderr %q", r.stderr)
	}
}

// TestRun_ClientEmptyAnswer: a server that answers 200 with no body (a
// wrong --api, a proxy with nothing behind it) is not a node that dropped
// the connection (review s11 E1).
func TestRun_ClientEmptyAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	r := runCLI(t, map[string]string{"HOME": t.TempDir()}, nil, "status", "--api", srv.URL)
	r.want(t, 1, "status")
	if strings.Contains(r.stderr, "closed the connection") {
		t.Fatalf("an empty 200 taken for a dropped connection: %q", r.stderr)
	}
}
