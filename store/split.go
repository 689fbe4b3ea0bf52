package store

import (
	"database/sql/driver"
	"slices"
	"strconv"
	"strings"
)

// Groups are the connected components of the links of trusted signers.
// Every live link a signer ever sent is kept as an edge in truth's
// group_edge, even after the signer retracts it or a newer claim replaces
// it: a retraction never splits a group (claims.md §5), and keeping the
// edge makes the groups independent of arrival order. A signer that stops
// being trusted takes its edges out of the count: the groups they joined
// are split along the links of the signers still trusted.

// edgesBy returns the (cid, other) links a signer ever sent.
func (w *writer) edgesBy(pid int64) ([][2]string, error) {
	var out [][2]string
	err := w.tEdgesBy.query(func(d []driver.Value) error {
		a, o := asString(d[0]), asString(d[1])
		if !isPeerCID(a) && !isPeerCID(o) {
			out = append(out, [2]string{a, o})
		}
		return nil
	}, pid)
	return out, err
}

// splitGroups splits the groups of cids into the components still joined
// by trusted links.
func (w *writer) splitGroups(b *batch, cids []string) error {
	rids := map[string]bool{}
	for _, c := range cids {
		if rid, ok := w.s.groups.ridOf(c); ok {
			rids[rid] = true
		}
	}
	for _, rid := range sortedKeys(rids) {
		if err := w.split(b, rid); err != nil {
			return err
		}
	}
	return nil
}

// split recomputes one group's components. The largest keeps the rid
// (consumers keep their reference to the bulk of the record; ties go to
// the component holding the smallest cid); each other one gets a new rid.
func (w *writer) split(b *batch, rid string) error {
	cids := w.s.groups.cidsOf(rid)
	if len(cids) < 2 {
		return nil
	}
	at := make(map[string]int, len(cids))
	for i, c := range cids {
		at[c] = i
	}
	parent := make([]int, len(cids))
	for i := range parent {
		parent[i] = i
	}
	root := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for i, c := range cids {
		err := w.tEdgesOf.query(func(d []driver.Value) error {
			j, in := at[asString(d[0])]
			if in && w.trustedPID(asInt(d[1])) {
				parent[root(i)] = root(j)
			}
			return nil
		}, c)
		if err != nil {
			return err
		}
	}
	byRoot := map[int][]string{}
	for i, c := range cids {
		r := root(i)
		byRoot[r] = append(byRoot[r], c) // cids is sorted: so is each part
	}
	if len(byRoot) == 1 {
		return nil
	}
	parts := make([][]string, 0, len(byRoot))
	for _, p := range byRoot {
		parts = append(parts, p)
	}
	slices.SortFunc(parts, func(x, y []string) int {
		if len(x) != len(y) {
			return len(y) - len(x)
		}
		return strings.Compare(x[0], y[0])
	})
	moved := make(map[string][]string, len(parts)-1)
	for _, p := range parts[1:] {
		nr := NewRID()
		for _, c := range p {
			if _, err := w.tSetGroup.exec(c, nr); err != nil {
				return err
			}
		}
		moved[nr] = p
		b.full[nr] = true
		b.regrouped[nr] = true
	}
	w.s.groups.split(rid, parts[0], moved)
	b.full[rid] = true
	b.regrouped[rid] = true
	b.rebuild = true
	return nil
}

func cutLink(key string) (string, bool) {
	if !IsLinkKey(key) {
		return "", false
	}
	return key[len(LinkPrefix):], true
}

// edgeRef names a link stored in a batch: its cid and its signer.
type edgeRef struct {
	cid string
	pid int64
}

// trustPolicy names what the configuration decides of the trust view: the
// mode and the node's own uid (the list and the vouches live in truth).
// In open mode the own uid changes no one's trust.
func (w *writer) trustPolicy() string {
	if w.s.cfg.Trust == TrustOpen {
		return string(TrustOpen)
	}
	return string(w.s.cfg.Trust) + " " + w.s.cfg.OwnUID
}

// regroup makes the groups the components of trusted signers' links again,
// at boot, when whom the configuration trusts may have changed since truth
// was last open (another trust mode or own uid, or a truth file from before
// group_edge, whose groups never split): every trusted signer's links join,
// the groups of the others' links split, and the cache is rebuilt after.
// A new truth file only records the policy.
func (w *writer) regroup() error {
	// At boot the truth connection commits with synchronous=FULL.
	if err := w.t.exec("BEGIN IMMEDIATE"); err != nil {
		return err
	}
	err := func() error {
		var pids []int64
		err := w.t.queryOnce(`SELECT DISTINCT pid FROM group_edge`, func(d []driver.Value) error {
			pids = append(pids, asInt(d[0]))
			return nil
		})
		if err != nil {
			return err
		}
		b := newBatch(w)
		for _, pid := range pids {
			edges, err := w.edgesBy(pid)
			if err != nil {
				return err
			}
			trusted := w.trustedPID(pid)
			for _, e := range edges {
				if !trusted {
					b.regroup = append(b.regroup, e[0])
				} else if _, ok := w.s.groups.ridOf(e[0]); ok {
					if err := w.link(b, e[0], e[1]); err != nil {
						return err
					}
				}
			}
		}
		if err := w.splitGroups(b, b.regroup); err != nil {
			return err
		}
		if !w.s.truthNew {
			// Whose votes count may have changed too: the merged view
			// is rebuilt whether or not a group did.
			w.lastSeq++
			w.rebuildSeq = w.lastSeq
			for _, m := range [][2]string{{"rebuild_seq", strconv.FormatInt(w.rebuildSeq, 10)}, {"last_seq", strconv.FormatInt(w.lastSeq, 10)}} {
				if _, err := w.tSetMeta.exec(m[0], m[1]); err != nil {
					return err
				}
			}
		}
		if _, err := w.tSetMeta.exec("trust_policy", w.trustPolicy()); err != nil {
			return err
		}
		_, err = w.t.execOnce(`DELETE FROM meta WHERE name = 'regroup_pending'`)
		return err
	}()
	if err == nil {
		err = w.t.exec("COMMIT")
	}
	if err != nil {
		_ = w.t.exec("ROLLBACK")
		if lerr := w.loadState(); lerr != nil {
			w.s.log.Error("reload state", "err", lerr)
		}
		return err
	}
	w.regroupPending, w.policySaved = false, w.trustPolicy()
	return nil
}
