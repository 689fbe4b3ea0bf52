package node_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// leaderFile is the leader file as meta-fuse's older LeaderClient reads it.
type leaderFile struct {
	Hostname          string `json:"hostname"`
	BaseURL           string `json:"baseUrl"`
	APIURL            string `json:"apiUrl"`
	RedisURL          string `json:"redisUrl"`
	WebDAVURL         string `json:"webdavUrl"`
	WebDAVURLInternal string `json:"webdavUrlInternal"`
	Timestamp         int64  `json:"timestamp"`
	PID               int    `json:"pid"`
}

// TestLeaderFile: the leader file is written once the API serves, holds
// URLs a consumer can use (its apiUrl answers /health; no redisUrl), and
// is removed on a clean stop; a file another core wrote since is left.
func TestLeaderFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "meta-core", "locks", "kv-leader.info")
	cfg := testConfig(t, dataDir(t, "a"))
	cfg.LeaderFile = path
	n := openNodeNoCleanup(t, cfg)
	b, err := os.ReadFile(path)
	if err != nil {
		n.Close()
		t.Fatal(err)
	}
	var info leaderFile
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatalf("leader file %s: %v", b, err)
	}
	if info.APIURL != n.APIURL() || info.RedisURL != "" || info.PID != os.Getpid() || info.Hostname == "" || info.Timestamp == 0 {
		t.Errorf("leader file %+v (API at %s)", info, n.APIURL())
	}
	resp, err := http.Get(info.APIURL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET apiUrl/health: %d", resp.StatusCode)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the leader file is still there after a clean stop: %v", err)
	}

	// Another core took the file over: this node's stop leaves it.
	n = openNodeNoCleanup(t, cfg)
	other := []byte(`{"apiUrl":"http://10.0.0.9:9000"}`)
	if err := os.WriteFile(path, other, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != string(other) {
		t.Fatalf("another core's leader file: %q, %v", got, err)
	}
}
