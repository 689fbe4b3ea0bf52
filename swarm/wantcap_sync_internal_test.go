package swarm

import (
	"testing"
	"time"

	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/metanode/metanode/store"
)

// TestSync_WantsCappedPerTurn: id lists within a turn's limits may name
// more claims the node lacks than a peer may ask for in one turn; the node
// must not answer with more wants than it would accept itself, or a peer
// holding it to the documented limit strikes it (protocol review, F8).
func TestSync_WantsCappedPerTurn(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	s := mockSwarm(t, mn, 5)
	att, fw, fr := rawSyncSession(t, mn, s, 60*time.Second)

	// maxWantsInTurn + 1000 ids the node lacks, in id lists of 4,096.
	const total, per = maxWantsInTurn + 1000, 4096
	ts0 := uint64(time.Now().UnixMilli()) - 3_600_000
	var entries []rangeEntry
	for k := 0; k < total; k += per {
		ids := make([]shortID, 0, per)
		for i := k; i < min(k+per, total); i++ {
			ids = append(ids, shortID{ts: ts0 + uint64(i)})
		}
		upper := store.SyncItem{TS: ts0 + uint64(min(k+per, total))}
		if k+per >= total {
			upper = store.MaxSyncItem
		}
		entries = append(entries, rangeEntry{upper: upper, mode: modeIDList, count: uint64(len(ids)), ids: ids})
	}
	if err := fw.write(appendHello(nil, hello{version: protoVersion})); err != nil {
		t.Fatal(err)
	}
	for _, f := range encodeRanges(entries) {
		if err := fw.write(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.write([]byte{frameEnd}); err != nil || fw.flush() != nil {
		t.Fatal("write the turn:", err)
	}
	wants := 0
	for ended := false; !ended; {
		f, err := fr.next()
		if err != nil {
			t.Fatalf("the node's answer: %v (after %d wants)", err, wants)
		}
		switch f[0] {
		case frameWant:
			w, err := decodeWant(f)
			if err != nil {
				t.Fatal(err)
			}
			wants += len(w)
		case frameEnd:
			ended = true
		}
	}
	if wants == 0 || wants > maxWantsInTurn {
		t.Fatalf("the node asked for %d claims in one turn (limit %d, the peer listed %d it lacks)", wants, maxWantsInTurn, total)
	}
	if s.Struck(att.ID()) {
		t.Fatal("an id list within the turn's limits struck the peer")
	}
}
