package swarm

import "testing"

// TestProvideKey: the provider key of a cid is namespaced by the swarm name
// (cli.md: the name is the topic and the DHT namespace), with the vector
// docs/protocols.md gives so another implementation can check itself.
func TestProvideKey(t *testing.T) {
	const cid = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
	got := provideKey("metamesh", cid).String()
	if got != "bafkreigjtzp6os6fqeiufzvnlqqooi43vlmgks4g5gbfrlmynzie2rca64" {
		t.Fatalf("provideKey(metamesh)=%s", got)
	}
	if provideKey("other", cid).String() == got {
		t.Fatal("two swarm names share a provider key")
	}
}
