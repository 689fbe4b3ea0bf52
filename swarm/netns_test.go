//go:build linux

package swarm_test

import (
	"testing"

	"github.com/metanode/metanode/internal/netnstest"
)

// inNetns runs the calling test inside a private user + network namespace
// (internal/netnstest).
func inNetns(t *testing.T, setup ...string) bool {
	t.Helper()
	return netnstest.Enter(t, setup...)
}
