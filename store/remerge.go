package store

import (
	"fmt"
	"time"
)

// A trust change re-merges every record the signer voted on: at the
// reference scale, a plugin with a vote on each of 58,000 records takes
// about as long as a full rebuild. Done in the batch's one cache
// transaction, it held every write, local and from peers, for that long.
// So a batch whose trust change touches more than remergeChunk records
// re-merges the first chunk itself and queues the rest here; the writer
// loop then re-merges them a chunk per cache transaction, taking queued
// requests between chunks. Meanwhile a record not yet reached still shows
// the old votes (a write to one of its keys merges that key under the new
// view at once), and readers see the change spread record by record.
//
// The trust request that caused it is answered when the queue is empty,
// so `metanode trust rm` still returns once the merged view agrees with
// it (or when the store closes: the change is durable, and the next start
// rebuilds the cache); claims in the same batch, and trust requests of
// batches that queued nothing, are answered at once.
//
// Crash safety: while the queue is not empty every cache commit records
// applied_seq as remergeFloor, which is below the rebuild_seq the trust
// change wrote to truth. A stop before the queue drains (crash or clean)
// leaves the cache "behind a change it cannot replay", so the next boot
// rebuilds it in full, as it did before.
const remergeChunk = 256

// remergeQueue is the writer's pending re-merge: rids in the order they
// are taken (queue) and the set still due (due). A rid recomputed in full
// by a batch meanwhile, or absorbed by a join, leaves due and is skipped.
type remergeQueue struct {
	queue []string
	due   map[string]bool
	floor int64      // applied_seq the cache records until the queue drains
	hold  []*request // trust requests answered when the queue drains
	start time.Time
}

func (q *remergeQueue) pending() bool { return len(q.due) > 0 }

// chunkSize is remergeChunk, or the store's test override.
func (w *writer) chunkSize() int {
	if n := w.s.remergeChunk; n > 0 {
		return n
	}
	return remergeChunk
}

// planRemerge decides which records of b.full this batch re-merges. A
// record still due that the batch wrote a claim to is re-merged now, so
// the writer reads its own write when it is answered. A trust-changing
// batch moves its records beyond the first chunk to the queue; only one
// that set rebuild_seq may (that is what makes a stop mid-queue rebuild).
// Records it wrote claims to, created, or joined or split stay in it: a
// cid that moved to another record must be found there at once.
func (w *writer) planRemerge(b *batch) {
	q := &w.remerge
	if !q.pending() && !b.rebuild {
		return // the usual batch: nothing queued, nothing to queue
	}
	for rid := range b.lost {
		delete(q.due, rid)
	}
	keep := map[string]bool{}
	for cid := range b.claimed {
		if rid, ok := w.s.groups.ridOf(cid); ok {
			keep[rid] = true
			if q.due[rid] {
				b.full[rid] = true
			}
		}
	}
	if !b.rebuild {
		return
	}
	var movable []string
	for _, rid := range sortedKeys(b.full) {
		if !keep[rid] && !b.created[rid] && !b.regrouped[rid] {
			movable = append(movable, rid)
		}
	}
	n := w.chunkSize()
	if len(movable) <= n {
		return
	}
	if !q.pending() {
		q.floor = w.rebuildSeq - 1
		q.start = time.Now()
		q.due = map[string]bool{}
		q.queue = q.queue[:0]
	}
	b.queued = true
	for _, rid := range movable[n:] {
		delete(b.full, rid)
		if !q.due[rid] {
			q.due[rid] = true
			q.queue = append(q.queue, rid)
		}
	}
	w.s.met.remerge.Set(float64(len(q.due)))
	w.s.log.Info("trust change: re-merging records in chunks, writes go on meanwhile", "records", len(q.due), "chunk", n)
}

// remerged drops from the queue the records a batch recomputed in full.
func (w *writer) remerged(b *batch) {
	q := &w.remerge
	if !q.pending() {
		return
	}
	for rid := range b.full {
		delete(q.due, rid)
	}
	w.s.met.remerge.Set(float64(len(q.due)))
}

// appliedSeq is the applied_seq a cache commit records.
func (w *writer) appliedSeq() int64 {
	if w.remerge.pending() {
		return w.remerge.floor
	}
	return w.lastSeq
}

// remergeNext re-merges one chunk of the queue in its own cache
// transaction, with events. A failure leaves the cache to the catch-up
// (a rebuild: applied_seq is still the floor) and ends the queue.
func (w *writer) remergeNext() {
	q := &w.remerge
	if err := w.catchUpIfBehind(); err != nil {
		w.endRemerge(err)
		return
	}
	if !q.pending() { // the catch-up rebuilt the cache
		return
	}
	if w.s.beforeRemerge != nil {
		w.s.beforeRemerge(len(q.due))
	}
	var rids []string
	i := 0
	for ; i < len(q.queue) && len(rids) < w.chunkSize(); i++ {
		rid := q.queue[i]
		// Skip a rid no longer due, or no longer a group (absorbed by a
		// join whose batch did not see it queued).
		if q.due[rid] && len(w.s.groups.cidsOf(rid)) > 0 {
			rids = append(rids, rid)
		}
		delete(q.due, rid)
	}
	q.queue = q.queue[i:]
	b := newBatch(w)
	err := func() error {
		if err := w.c.exec("BEGIN IMMEDIATE"); err != nil {
			return err
		}
		for _, rid := range rids {
			n := len(b.events)
			if err := w.recompute(b, rid, true); err != nil {
				return err
			}
			if w.check != nil && len(b.events) > n {
				// A cache check repaired it: read it back (cacherepair.go).
				if err := w.readBack(rid); err != nil {
					return err
				}
			}
		}
		return w.finishCache(b)
	}()
	if err != nil {
		w.rollbackCache()
		w.cacheBehind = true
		w.reloadCacheCounters()
		err = w.failed(false, err)
		w.s.log.Error("trust change re-merge failed; the cache will be rebuilt", "err", err)
		w.endRemerge(fmt.Errorf("%w: cache: %v", ErrUnavailable, err))
		return
	}
	w.committed()
	w.publishStats()
	w.s.hub.publish(b.events)
	w.s.met.remerge.Set(float64(len(q.due)))
	w.checkChunk(b)
	if !q.pending() {
		if w.check == nil {
			w.s.log.Info("trust change re-merged", "took", time.Since(q.start).Round(time.Millisecond))
		}
		w.endRemerge(nil)
	}
}

// endRemerge empties the queue and answers the trust requests it held.
func (w *writer) endRemerge(err error) {
	q := &w.remerge
	clear(q.due)
	q.queue = q.queue[:0]
	w.s.met.remerge.Set(0)
	if err != nil {
		w.abandonCheck() // the cache is rebuilt in full, or at the next start
	}
	reply(q.hold, err)
	q.hold = nil
}

// holdTrust keeps the trust requests of reqs until the queue drains and
// returns the others.
func (w *writer) holdTrust(b *batch, reqs []*request) []*request {
	q := &w.remerge
	if !q.pending() || !b.queued {
		return reqs
	}
	rest := reqs[:0:0]
	for _, r := range reqs {
		if r.kind == reqTrust {
			q.hold = append(q.hold, r)
		} else {
			rest = append(rest, r)
		}
	}
	return rest
}
