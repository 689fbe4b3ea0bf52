//go:build unix

package node

import (
	"errors"
	"sync/atomic"
	"testing"
)

// TestLockDataDir_ProbeDoesNotRefuseAStart: DataDirInUse polled without
// pause (a monitoring script running metanode id) never makes a starting
// node take the directory for another node's (review s11 C2: 3 of 2,000
// starts were refused).
func TestLockDataDir_ProbeDoesNotRefuseAStart(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDataDir(dir) // the lock file exists, as after any run
	if err != nil {
		t.Fatal(err)
	}
	if !DataDirInUse(dir) {
		t.Fatal("DataDirInUse: false while the lock is held")
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			DataDirInUse(dir)
		}
	}()
	refused := 0
	for range 2000 {
		unlock, err := lockDataDir(dir)
		if errors.Is(err, ErrDataDirInUse) {
			refused++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	<-done
	if refused > 0 {
		t.Fatalf("%d of 2000 starts refused while only DataDirInUse ran", refused)
	}
	if DataDirInUse(dir) {
		t.Fatal("DataDirInUse: true with no node running")
	}
}
