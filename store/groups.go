package store

import (
	"slices"
	"strings"
	"sync"
)

// groups is the in-memory copy of truth's cid_group: each cid's rid and
// each rid's cids (sorted). Only the writer changes it, after writing the
// same change in its truth transaction; HasCID and the swarm helpers read
// it under the read lock.
type groups struct {
	mu   sync.RWMutex
	rid  map[string]string   // cid → rid
	cids map[string][]string // rid → sorted cids
}

func newGroups() *groups {
	return &groups{rid: map[string]string{}, cids: map[string][]string{}}
}

func (g *groups) ridOf(cid string) (string, bool) {
	g.mu.RLock()
	r, ok := g.rid[cid]
	g.mu.RUnlock()
	return r, ok
}

// cidsOf returns the group's cids. The slice must not be modified; the
// writer replaces, never edits, a group's slice, so readers may keep it.
func (g *groups) cidsOf(rid string) []string {
	g.mu.RLock()
	c := g.cids[rid]
	g.mu.RUnlock()
	return c
}

// add puts cid in rid's group.
func (g *groups) add(cid, rid string) {
	g.mu.Lock()
	g.rid[cid] = rid
	old := g.cids[rid]
	i, _ := slices.BinarySearch(old, cid)
	nc := make([]string, 0, len(old)+1)
	nc = append(append(append(nc, old[:i]...), cid), old[i:]...)
	g.cids[rid] = nc
	g.mu.Unlock()
}

// join merges two groups: the smaller rid survives and takes the other's
// cids. It returns the survivor, the loser and the cids that moved.
func (g *groups) join(a, b string) (survivor, loser string, moved []string) {
	survivor, loser = a, b
	if strings.Compare(b, a) < 0 {
		survivor, loser = b, a
	}
	g.mu.Lock()
	moved = g.cids[loser]
	for _, c := range moved {
		g.rid[c] = survivor
	}
	merged := append(slices.Clone(g.cids[survivor]), moved...)
	slices.Sort(merged)
	g.cids[survivor] = merged
	delete(g.cids, loser)
	g.mu.Unlock()
	return survivor, loser, moved
}

// split leaves keep (sorted) in rid and moves each part (sorted) to its
// new rid, in one pass: a group split into thousands of parts costs no
// more than its size.
func (g *groups) split(rid string, keep []string, parts map[string][]string) {
	g.mu.Lock()
	g.cids[rid] = keep
	for nr, p := range parts {
		g.cids[nr] = p
		for _, c := range p {
			g.rid[c] = nr
		}
	}
	g.mu.Unlock()
}

// rids returns every rid, sorted.
func (g *groups) rids() []string {
	g.mu.RLock()
	out := make([]string, 0, len(g.cids))
	for r := range g.cids {
		out = append(out, r)
	}
	g.mu.RUnlock()
	slices.Sort(out)
	return out
}

// ridsAfter returns up to n rids after the given one, in order: a cursor
// over the groups that costs one pass over the map and no sorted copy of
// every rid (the scrub's, cacherepair.go).
func (g *groups) ridsAfter(after string, n int) []string {
	out := make([]string, 0, n+1)
	g.mu.RLock()
	defer g.mu.RUnlock()
	for r := range g.cids {
		if r <= after || (len(out) == n && r >= out[n-1]) {
			continue
		}
		i, _ := slices.BinarySearch(out, r)
		out = slices.Insert(out, i, r)
		if len(out) > n {
			out = out[:n]
		}
	}
	return out
}

// reset replaces the content (after a load from truth).
func (g *groups) reset(rid map[string]string) {
	cids := make(map[string][]string, len(rid))
	for c, r := range rid {
		cids[r] = append(cids[r], c)
	}
	for _, cs := range cids {
		slices.Sort(cs)
	}
	g.mu.Lock()
	g.rid, g.cids = rid, cids
	g.mu.Unlock()
}

// principals maps uids to the local surrogate pids of truth's principal
// table and back. The writer adds; everyone reads.
type principals struct {
	mu  sync.RWMutex
	pid map[string]int64
	uid map[int64]string
}

func newPrincipals() *principals {
	return &principals{pid: map[string]int64{}, uid: map[int64]string{}}
}

func (p *principals) pidOf(uid string) (int64, bool) {
	p.mu.RLock()
	id, ok := p.pid[uid]
	p.mu.RUnlock()
	return id, ok
}

func (p *principals) uidOf(pid int64) string {
	p.mu.RLock()
	u := p.uid[pid]
	p.mu.RUnlock()
	return u
}

func (p *principals) add(uid string, pid int64) {
	p.mu.Lock()
	p.pid[uid] = pid
	p.uid[pid] = uid
	p.mu.Unlock()
}

func (p *principals) len() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.pid)
}

func (p *principals) reset() {
	p.mu.Lock()
	p.pid, p.uid = map[string]int64{}, map[int64]string{}
	p.mu.Unlock()
}

// isPeerCID reports whether a canonical cid has the libp2p-key codec
// (0x72): a node's peer id, where vouch claims live. In lower-case base32
// the bytes 0x01 0x72 always read "bafz" followed by a letter a–p (the
// next five bits start with the 0 that ends 0x72); no other codec
// gives that prefix.
func isPeerCID(cid string) bool {
	return len(cid) > 5 && cid[:4] == "bafz" && cid[4] >= 'a' && cid[4] <= 'p'
}
