package swarmbench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/metanode/metanode/swarm/swarmbench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs every part of the benchmark at a small size: the harness
// works end to end and reports each figure.
func TestRun(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // a fixture of this size only
	var out bytes.Buffer
	err := swarmbench.Run(context.Background(), swarmbench.Options{
		Nodes: 3, Claims: 600, Diffs: 40, Rate: 40, Duration: time.Second, Dir: t.TempDir(),
	}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"verify limit", "cold catch-up: ", "warm reconcile", "1 difference",
		"scattered", "live propagation, 3 nodes", "copies"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
