package swarm

import (
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
)

// TestScaledLimits_CoverMaxConns: the resource manager admits at least
// one and a half times the connection manager's high water, whatever the
// machine's memory (libp2p's scaling gave a 4 GB VPS about 88 inbound
// connections, below a bootstrap node's 512), and a home's 64 keeps
// libp2p's scaled limits where they are higher.
func TestScaledLimits_CoverMaxConns(t *testing.T) {
	defaults := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&defaults)
	auto := rcmgr.NewFixedLimiter(defaults.AutoScale()).GetSystemLimits()
	for _, maxConns := range []int{64, 512, 4096} {
		sys := rcmgr.NewFixedLimiter(scaledLimits(maxConns)).GetSystemLimits()
		floor := maxConns + maxConns/2
		for _, dir := range []network.Direction{network.DirInbound, network.DirOutbound} {
			got, was := sys.GetConnLimit(dir), auto.GetConnLimit(dir)
			if got < floor || got != max(floor, was) {
				t.Errorf("max-conns %d, %v: %d connections (libp2p's scaling %d), want max(%d, that)", maxConns, dir, got, was, floor)
			}
		}
		if got := sys.GetConnTotalLimit(); got < floor {
			t.Errorf("max-conns %d: %d connections in all, want at least %d", maxConns, got, floor)
		}
		if sys.GetStreamTotalLimit() != auto.GetStreamTotalLimit() || sys.GetMemoryLimit() != auto.GetMemoryLimit() {
			t.Errorf("max-conns %d: limits other than connections changed", maxConns)
		}
	}
}
