package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/node/beacon"
)

// beaconName is the name this node advertises under: the meta services'
// name for their core.
const beaconName = "meta-core"

// coreURLs is the /urls block without redisUrl: the beacon's data.urls.
type coreURLs struct {
	Hostname          string `json:"hostname"`
	BaseURL           string `json:"baseUrl"`
	APIURL            string `json:"apiUrl"`
	WebDAVURL         string `json:"webdavUrl"`
	WebDAVURLInternal string `json:"webdavUrlInternal"`
}

// urlsFor is the /urls block for a consumer that reaches this node from
// local's network: the API's own address when it listens on one, else
// local's (the first non-loopback IPv4 when local is not valid). hostname
// is the host's name, as the api answers it.
func (n *Node) urlsFor(local netip.Addr) api.URLs {
	hostname, _ := os.Hostname()
	host, port, _ := net.SplitHostPort(n.api.URL()[len("http://"):])
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		host = hostname
		if !local.IsValid() {
			local = firstIPv4()
		}
		if local.IsValid() {
			host = local.String()
		}
	}
	return api.NewURLs(hostname, "http://"+net.JoinHostPort(host, port), "", port, n.cfg.FilesRoot != "")
}

// firstIPv4 is the machine's first non-loopback IPv4 address.
func firstIPv4() netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			ip, _ := netip.AddrFromSlice(ipn.IP.To4())
			return ip
		}
	}
	return netip.Addr{}
}

// coreResources is what the beacon advertises: one resource with the
// capability metamesh.core whose data.urls is the /urls block for the
// interface the datagram leaves on.
func (n *Node) coreResources(local netip.Addr) []beacon.Resource {
	u := n.urlsFor(local)
	data, err := json.Marshal(struct {
		URLs coreURLs `json:"urls"`
	}{coreURLs{u.Hostname, u.BaseURL, u.APIURL, u.WebDAVURL, u.WebDAVURLInternal}})
	if err != nil {
		return nil
	}
	return []beacon.Resource{{ID: "core", Caps: []string{beacon.CapCore}, Endpoints: map[string]string{"http": u.APIURL}, Data: data}}
}

// openBeacon starts advertising the API by beacon v2 (Config.Beacon).
func (n *Node) openBeacon(ctx context.Context) error {
	if !n.cfg.Beacon {
		return nil
	}
	b := beacon.New(beacon.Config{
		Name:       beaconName,
		Instance:   n.identity.UID(),
		Group:      n.cfg.BeaconGroup,
		Interval:   n.cfg.BeaconInterval,
		Resources:  n.coreResources,
		Logger:     n.cfg.Logger,
		Registerer: n.reg,
	})
	if err := b.Open(ctx); err != nil {
		return err
	}
	n.beacon = b
	n.addCloser("", b.Close) // "close beacon: …"
	return nil
}

// Neighbors lists what the beacon hears (api.Node).
func (n *Node) Neighbors(all bool) api.NeighborsResponse {
	out := api.NeighborsResponse{Current: beaconName, Neighbors: []json.RawMessage{}}
	if n.beacon == nil {
		return out
	}
	out.Enabled = true
	rows := n.beacon.NeighborsByName()
	if all {
		rows = n.beacon.Neighbors()
	}
	for _, nb := range rows {
		if b, err := json.Marshal(nb); err == nil {
			out.Neighbors = append(out.Neighbors, b)
		}
	}
	out.Self, _ = json.Marshal(n.beacon.Self())
	return out
}

// leaderInfo is the leader file's content, as the single-box core wrote
// it and its older consumers (meta-fuse, meta-sort) parse it.
type leaderInfo struct {
	api.URLs
	Timestamp int64 `json:"timestamp"` // ms
	PID       int   `json:"pid"`
}

// openLeaderFile writes the API's URLs to Config.LeaderFile (upstream's
// <META_CORE_PATH>/locks/kv-leader.info), where consumers that do not
// speak the beacon find their core; Close removes it. A file that cannot
// be written is logged, not fatal: the node serves all the same.
func (n *Node) openLeaderFile(context.Context) error {
	path := n.cfg.LeaderFile
	if path == "" {
		return nil
	}
	info := leaderInfo{URLs: n.urlsFor(netip.Addr{}), Timestamp: n.cfg.Now().UnixMilli(), PID: os.Getpid()}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return fmt.Errorf("leader file: %w", err)
	}
	err = os.MkdirAll(filepath.Dir(path), 0o755)
	if err == nil {
		err = writeFileAtomic(path, append(b, '\n'), 0o644)
	}
	if err != nil {
		n.log.Warn("cannot write the leader file: services that read it will not find this node (they may use the beacon or META_CORE_URL)",
			"path", path, "err", err)
		return nil
	}
	n.log.Info("leader file written", "path", path, "apiUrl", info.APIURL)
	n.addCloser("leader file", func() error { return removeLeaderFile(path, b) })
	return nil
}

// removeLeaderFile removes the leader file if it still holds what this
// node wrote: another core may have taken it over since.
func removeLeaderFile(path string, wrote []byte) error {
	cur, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if string(cur) != string(append(wrote, '\n')) {
		return nil
	}
	return os.Remove(path)
}
