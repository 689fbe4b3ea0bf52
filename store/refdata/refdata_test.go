package refdata_test

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/metanode/metanode/store/refdata"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLoad: the first call generates and says so, the second reads the
// cache silently and gets the same bytes; an unusable cache directory is
// an error, not a panic.
func TestLoad(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	said := 0
	logf := func(string, ...any) { said++ }
	d, err := refdata.Load(200, logf)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := d.Claims()
	if err != nil || len(claims) != 200 {
		t.Fatalf("claims=%d err=%v", len(claims), err)
	}
	if err := claims[0].Verify(); err != nil {
		t.Fatal(err)
	}
	if claims[0].UID != refdata.Signer(1000).UID() || claims[0].TS != refdata.FixtureBase+1 {
		t.Fatalf("first claim by %s at %d: the generator changed", claims[0].UID, claims[0].TS)
	}
	again, err := refdata.Load(200, logf)
	if err != nil || again.Checksum() != d.Checksum() || said != 1 {
		t.Fatalf("second load: err=%v same=%v generations=%d", err, again.Checksum() == d.Checksum(), said)
	}

	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", blocker) // a file where the directory should be
	if _, err := refdata.Load(10, nil); err == nil {
		t.Fatal("no error for an unusable cache directory")
	}
}
