package node

import (
	"time"
)

// Damaged claims. The store sets aside (quarantines) a claim whose stored
// copy no longer verifies (store/damage.go) and takes it out of its sync
// set; the genuine claim is on the peers that have it. The node asks for
// it when the store signals some were set aside, and again every
// damageRetry while some are left (a peer that holds them may come online
// later): with full replication a re-sync with every connected peer brings
// them (they no longer count as held); with interest replication, which
// does not reconcile whole sets, it looks up each claim's cid, at most
// damageLookups a round.
const (
	damageRetry   = 10 * time.Minute
	damageLookups = 16
)

// watchDamage runs until the node closes.
func (n *Node) watchDamage() {
	tick := time.NewTicker(damageRetry)
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.store.Damaged():
		case <-tick.C:
		}
		n.refetchDamaged()
	}
}

// refetchDamaged asks the peers for the claims in quarantine.
func (n *Node) refetchDamaged() {
	qs, err := n.store.Quarantined(n.ctx, damageLookups)
	if err != nil || len(qs) == 0 {
		return
	}
	if n.cfg.Replicate != ReplicateInterest {
		n.swarm.Resync()
		return
	}
	seen := map[string]bool{}
	for _, q := range qs {
		if seen[q.CID] || n.ctx.Err() != nil {
			continue
		}
		seen[q.CID] = true
		if _, err := n.swarm.Lookup(n.ctx, q.CID); err != nil && n.ctx.Err() == nil {
			n.log.Debug("no peer sent a quarantined claim back", "cid", q.CID, "err", err)
		}
	}
}
