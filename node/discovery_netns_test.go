//go:build linux

package node_test

import (
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/metanode/metanode/internal/netnstest"
	"github.com/metanode/metanode/node/beacon"
)

// probeCore does what meta-stremio's locator does: it multicasts a probe
// wanting metamesh.core and reads the unicast advertise that answers it.
func probeCore(t *testing.T, group string) beacon.Message {
	t.Helper()
	conn, err := net.ListenPacket("udp4", "10.77.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dst, err := net.ResolveUDPAddr("udp4", group)
	if err != nil {
		t.Fatal(err)
	}
	probe, _ := json.Marshal(beacon.Message{Proto: beacon.Proto, V: beacon.Version, Type: beacon.TypeProbe, From: "meta-stremio-test", Want: []string{beacon.CapCore}})
	buf := make([]byte, 2*beacon.MaxDatagram)
	for range 20 { // the probe is resent as the locator does, every 500 ms
		if _, err := conn.WriteTo(probe, dst); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			continue
		}
		if m, err := beacon.Parse(buf[:n]); err == nil && m.Type == beacon.TypeAdvertise {
			return m
		}
	}
	t.Fatal("no answer to the probe in 10 s")
	return beacon.Message{}
}

// TestBeacon_NodeNetns: a home node with the beacon on, in a private
// network namespace, as a meta service finds it: a probe for the core is
// answered with data.urls whose apiUrl serves the API (this is all
// meta-stremio needs to start); GET /api/neighbors lists a service that
// advertised. (The bye of a clean stop: the beacon's own netns test.)
func TestBeacon_NodeNetns(t *testing.T) {
	if !netnstest.Enter(t, "ip link add v0 type veth peer name v1",
		"ip addr add 10.77.0.1/24 dev v0", "ip addr add 10.77.0.2/24 dev v1", "ip link set v0 up", "ip link set v1 up") {
		return
	}
	cfg := testConfig(t, dataDir(t, "home"))
	cfg.HTTPAddr = "0.0.0.0:0"
	cfg.Beacon, cfg.BeaconInterval = true, time.Second
	n := openNodeNoCleanup(t, cfg)

	ad := probeCore(t, beacon.DefaultGroup)
	if ad.Node.Name != "meta-core" || ad.Node.Instance != n.UID() || len(ad.Resources) != 1 {
		t.Fatalf("answer %+v", ad)
	}
	var data struct {
		URLs map[string]string `json:"urls"`
	}
	if err := json.Unmarshal(ad.Resources[0].Data, &data); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(data.URLs["apiUrl"] + "/health")
	if err != nil {
		t.Fatalf("the advertised apiUrl %q: %v", data.URLs["apiUrl"], err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/health: %d", data.URLs["apiUrl"], resp.StatusCode)
	}
	if _, ok := data.URLs["redisUrl"]; ok {
		t.Errorf("data.urls carries a redisUrl: %v", data.URLs)
	}

	// A service advertises; the node lists it.
	conn, err := net.ListenPacket("udp4", "10.77.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dst, _ := net.ResolveUDPAddr("udp4", beacon.DefaultGroup)
	svc, _ := json.Marshal(beacon.Message{Proto: beacon.Proto, V: beacon.Version, Type: beacon.TypeAdvertise,
		Node:      &beacon.NodeInfo{Name: "meta-fuse", Instance: "fuse-1"},
		Resources: []beacon.Resource{{ID: "service", Caps: []string{"metamesh.service/meta-fuse"}}}})
	var list struct {
		Enabled   bool              `json:"enabled"`
		Count     int               `json:"count"`
		Neighbors []beacon.Neighbor `json:"neighbors"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for list.Count == 0 && time.Now().Before(deadline) {
		if _, err := conn.WriteTo(svc, dst); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		resp, err := http.Get(n.APIURL() + "/api/neighbors")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if !list.Enabled || list.Count != 1 || list.Neighbors[0].Name != "meta-fuse" || list.Neighbors[0].Addr != "10.77.0.2" {
		t.Fatalf("GET /api/neighbors: %+v", list)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}
