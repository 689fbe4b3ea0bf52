package main

import (
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// metanode gui-password prints a bcrypt hash of the password on stdin;
// serve takes only a hash, and gui-user and gui-password together.
func TestGUIPassword(t *testing.T) {
	env := map[string]string{"HOME": t.TempDir()}
	r := runCLI(t, env, strings.NewReader("correct horse\n"), "gui-password")
	r.want(t, 0, "gui-password")
	hash := strings.TrimSpace(r.stdout)
	if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte("correct horse")); err != nil {
		t.Fatalf("printed %q: %v", hash, err)
	}
	runCLI(t, env, strings.NewReader("short\n"), "gui-password").want(t, 2, "gui-password (short)")
	for _, args := range [][]string{
		{"serve", "--gui-user", "owner", "--gui-password", "correct horse"},
		{"serve", "--gui-user", "owner"},
		{"serve", "--gui-password", hash},
	} { // exit 2 for the flag given wrong, 1 for the one missing (not given)
		r := runCLI(t, env, nil, args...)
		if r.code == 0 || !strings.Contains(r.stderr, "gui-") {
			t.Errorf("%v: %s", args, r.stderr)
		}
	}
}
