package swarm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/metanode/metanode/store"
)

// What a sync session received goes to the store here (sync.go runs the
// session, sync_send.go writes its turns).

// submitter stores claims received in a session, a few batches at a time,
// so verifying one batch overlaps committing another and reading the next.
type submitter struct {
	s        *Swarm
	peer     peer.ID
	ch       chan []store.Claim
	wg       sync.WaitGroup
	once     sync.Once
	mu       sync.Mutex
	err      error
	accepted atomicInt
	refused  atomicInt
	invalid  atomicInt

	uninterested atomicInt
}

func newSubmitter(ctx context.Context, s *Swarm, p peer.ID) *submitter {
	sub := &submitter{s: s, peer: p, ch: make(chan []store.Claim, submitWorkers)}
	for range submitWorkers {
		sub.wg.Go(func() {
			for batch := range sub.ch {
				if err := sub.store(ctx, batch); err != nil {
					sub.mu.Lock()
					if sub.err == nil {
						sub.err = err
					}
					sub.mu.Unlock()
				}
			}
		})
	}
	return sub
}

func (sub *submitter) add(ctx context.Context, batch []store.Claim) error {
	select {
	case sub.ch <- batch:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// wait drains the pipeline and returns the first store error.
func (sub *submitter) wait() error {
	sub.once.Do(func() { close(sub.ch) })
	sub.wg.Wait()
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.err
}

func (sub *submitter) store(ctx context.Context, batch []store.Claim) error {
	gen := sub.s.refused.generation()
	batch, untrusted := sub.s.dropUntrusted(batch)
	for _, r := range untrusted {
		sub.refuse(r, gen)
	}
	if len(batch) == 0 {
		return nil
	}
	vouchesFirst(batch) // a vouch in the batch trusts its signer's claims in the batch
	res, err := sub.s.cfg.Store.Submit(ctx, batch, store.SubmitOptions{Origin: store.OriginPeer})
	if err != nil {
		return fmt.Errorf("store synced claims: %w", err)
	}
	var bad int
	for i, r := range res {
		switch {
		case r.Stored:
			// New to this node: only these count as received (and start
			// the cascade); a claim held already, or superseded, is not.
			sub.accepted.Add(1)
		case r.Outcome != store.Rejected: // held already or superseded: neutral
		case errors.Is(r.Err, ErrNotInterested):
			// Neutral: the peer sent what we asked for; the filter is ours.
			sub.uninterested.Add(1)
		case errors.Is(r.Err, store.ErrUntrusted):
			sub.refuse(refusal{store.SyncItem{TS: batch[i].TS, ID: r.ID}, batch[i].UID}, gen)
		case isInvalid(r.Err):
			bad++
		}
	}
	if bad > 0 {
		sub.invalid.Add(int64(bad))
		sub.s.penalize(sub.peer, fmt.Sprintf("sync: %d claims with bad signatures or encoding", bad))
	}
	return nil
}

// refuse counts a claim of an untrusted signer and remembers it as refused
// while the session is within maxRefusedInSession.
func (sub *submitter) refuse(r refusal, gen uint64) {
	if sub.refused.Add(1) <= sub.s.refusedPerSession {
		sub.s.refused.add(r.item, r.uid, gen)
	}
}

// dropUntrusted takes the claims of signers this node does not trust out
// of a batch before anything verifies them: a peer must not make us spend
// signature checks on claims we refuse anyway (the store checks trust only
// after verifying). A signer vouched for by a trusted signer's live vouch in
// the same batch stays in, for the store to decide (one hop, distrust,
// staleness). It returns the claims kept and the refused claims' items.
func (s *Swarm) dropUntrusted(batch []store.Claim) ([]store.Claim, []refusal) {
	var vouched map[string]bool
	trusted := func(uid string) bool { return s.cfg.Store.Trusted(uid) || vouched[uid] }
	for i := range batch {
		if uid, ok := liveVouch(&batch[i]); ok && s.cfg.Store.Trusted(batch[i].UID) {
			if vouched == nil {
				vouched = map[string]bool{}
			}
			vouched[uid] = true
		}
	}
	if !slices.ContainsFunc(batch, func(c store.Claim) bool { return !trusted(c.UID) }) {
		return batch, nil
	}
	keep := make([]store.Claim, 0, len(batch))
	var refused []refusal
	for i := range batch {
		if c := &batch[i]; trusted(c.UID) {
			keep = append(keep, *c)
		} else {
			refused = append(refused, refusal{store.SyncItem{TS: c.TS, ID: c.ID()}, c.UID})
		}
	}
	return keep, refused
}

// refusal is a claim refused as untrusted and its signer.
type refusal struct {
	item store.SyncItem
	uid  string
}

// isInvalid reports a rejection that only a broken or hostile sender causes.
func isInvalid(err error) bool {
	return errors.Is(err, store.ErrBadSignature) || errors.Is(err, store.ErrMalformed) || errors.Is(err, store.ErrBadUID)
}
