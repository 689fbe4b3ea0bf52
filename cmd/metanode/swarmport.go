package main

import (
	ma "github.com/multiformats/go-multiaddr"
)

// The swarm's default port is 4821 (TCP and UDP), chosen to be free on a
// home server that runs the usual daemons beside metanode: Kubo (4001),
// IPFS Cluster (9094-9096), Syncthing (22000, 21027), the *arr family
// (Radarr 7878, Sonarr 8989, Lidarr 8686, Readarr 8787, Prowlarr 9696,
// Bazarr 6767), Jellyfin and Emby (8096, 8920, 7359), Plex (32400, 32469),
// Transmission (9091, 51413), qBittorrent (8080, 6881), Home Assistant
// (8123), Docker Swarm (7946), Nebula (4242), Tailscale (41641), WireGuard
// (51820). Until this version it was Kubo's 4001 (docs/operations.md,
// "Ports and exposure").
const (
	oldDefaultPort = "4001"
	newDefaultPort = "4821"
)

// alsoNewPort is the upgrade path for paired homes: a bootstrap address
// on the old default port (join wrote the inviter's addresses, and an
// inviter that ran on the defaults has moved to the new port since) is
// dialed on the new default port too. The swarm merges a peer's addresses
// into one entry, so a peer is still dialed and counted once. Nodes whose
// config names 4001 in listen keep it, and are found there.
func alsoNewPort(addrs []string) []string {
	out := addrs
	for _, a := range addrs {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			continue // Validate reports it
		}
		moved := false
		var to ma.Multiaddr
		for _, c := range m {
			if (c.Code() == ma.P_TCP || c.Code() == ma.P_UDP) && c.Value() == oldDefaultPort {
				nc, err := ma.NewComponent(c.Protocol().Name, newDefaultPort)
				if err != nil {
					return addrs
				}
				c, moved = *nc, true
			}
			to = append(to, c)
		}
		if moved {
			if len(out) == len(addrs) {
				out = append([]string(nil), addrs...) // the config's own list stays as it was
			}
			out = append(out, to.String())
		}
	}
	return out
}
