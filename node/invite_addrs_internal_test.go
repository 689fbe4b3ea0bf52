package node

import (
	"slices"
	"testing"
)

// TestShareableAddrs: a code names the LAN or public addresses first and
// the loopback ones last (on another machine they are the joiner itself;
// on the same machine they may be the only way in).
func TestShareableAddrs(t *testing.T) {
	const id = "/p2p/16Uiu2HAmNxYKEK8ZZqKKW5w6Xxp8X4cBBfp3EfWFhFeNbAgFo2Pd"
	lan := []string{"/ip4/10.0.0.5/tcp/4001" + id, "/ip4/127.0.0.1/tcp/4001" + id,
		"/ip6/::1/udp/4001/quic-v1" + id, "/ip6/fd00::5/tcp/4001" + id}
	if got, want := shareableAddrs(lan), []string{lan[0], lan[3], lan[1], lan[2]}; !slices.Equal(got, want) {
		t.Errorf("with LAN addresses: %v, want %v", got, want)
	}
	loop := []string{"/ip4/127.0.0.1/tcp/4001" + id, "/ip6/::1/tcp/4001" + id}
	if got := shareableAddrs(loop); !slices.Equal(got, loop) {
		t.Errorf("loopback only: %v, want %v", got, loop)
	}
}
