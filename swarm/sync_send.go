package swarm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/metanode/metanode/store"
)

// The writing side of a sync session: one turn's claims, wants, ranges and
// END (sync.go runs the session and reads the peer's turns).

// sendTurn writes one turn: the claims the peer asked for and the ones it
// lacks, our wants, our ranges, END.
func (ss *session) sendTurn(ctx context.Context, h *hello, plan turnPlan, peerWants []shortID) (err error) {
	defer func() {
		if errors.Is(err, errAskedTooMuch) {
			err = ss.violation(err)
		}
	}()
	w := func(frame []byte) error {
		ss.guard.progress(ss.work())
		_ = ss.stream.SetWriteDeadline(time.Now().Add(ss.s.sessionLimits.idle))
		err := ss.fw.write(frame)
		ss.stats.BytesSent = ss.fw.n
		return err
	}
	if h != nil {
		// Flushed on its own: the peer hears this node at once, however
		// long the rest of the turn takes (see firstAnswer).
		if err := w(appendHello(nil, *h)); err != nil {
			return fmt.Errorf("write sync frame: %w", err)
		}
		if err := ss.fw.flush(); err != nil {
			return fmt.Errorf("write sync frame: %w", err)
		}
	}
	cw := claimWriter{write: w, stats: &ss.stats, limit: int64(2*ss.rec.view.set.Len() + resendSlack),
		spend: func(n int) { ss.s.spendBudget(ss.budget, n) }}
	if ss.rec.push {
		// Each claim once, however often the peer asked for it (wants
		// repeat across WANT frames) or we found it lacking.
		wants := slices.Clone(peerWants)
		slices.SortFunc(wants, shortID.compare)
		wants = slices.Compact(wants)
		items := slices.Clone(plan.pushItems)
		for _, s := range wants {
			lo, hi := s.span()
			items = append(items, ss.rec.view.set.Items(lo, hi, 0)...)
		}
		slices.SortFunc(items, store.SyncItem.Compare)
		items = slices.Compact(items)
		for chunk := range slices.Chunk(items, claimsPage) {
			claims, err := ss.s.cfg.Store.ClaimsByItems(ctx, chunk)
			if err != nil {
				return fmt.Errorf("read claims to send: %w", err)
			}
			if err := cw.add(claims, nil); err != nil {
				return err
			}
		}
		for _, pr := range plan.pushRanges {
			if err := ss.streamRange(ctx, &cw, pr); err != nil {
				return err
			}
		}
		if err := cw.flush(); err != nil {
			return err
		}
	}
	// Never ask more than a peer may ask of us (compactWants).
	wants := compactWants(plan.wants)
	for chunk := range slices.Chunk(wants, maxWantPerFrame) {
		if err := w(appendWant(nil, chunk)); err != nil {
			return fmt.Errorf("write sync frame: %w", err)
		}
	}
	for _, f := range encodeRanges(plan.ranges) {
		if err := w(f); err != nil {
			return fmt.Errorf("write sync frame: %w", err)
		}
	}
	if err := w([]byte{frameEnd}); err != nil {
		return fmt.Errorf("write sync frame: %w", err)
	}
	ss.stats.Turns++
	if err := ss.fw.flush(); err != nil {
		return fmt.Errorf("write sync frame: %w", err)
	}
	ss.stats.BytesSent = ss.fw.n
	return nil
}

// streamRange sends every claim we hold in pr, page by page.
func (ss *session) streamRange(ctx context.Context, cw *claimWriter, pr pushRange) error {
	lo := pr.lo
	for {
		claims, err := ss.s.cfg.Store.ClaimsInRange(ctx, lo, pr.hi, claimsPage)
		if err != nil {
			return fmt.Errorf("read claims to send: %w", err)
		}
		if len(claims) == 0 {
			return nil
		}
		last := claims[len(claims)-1]
		if err := cw.add(claims, pr.skip); err != nil {
			return err
		}
		if len(claims) < claimsPage {
			return nil
		}
		lo = store.SyncItem{TS: last.TS, ID: last.ID()}.Next()
		if lo.Compare(pr.hi) >= 0 {
			return nil
		}
	}
}

// claimWriter packs claims into CLAIMS frames.
type claimWriter struct {
	write func([]byte) error
	stats *SyncStats
	cf    claimsFrame
	limit int64       // claims one session may send: see resendSlack
	spend func(n int) // charges the peer's sync budget (sync_budget.go)
}

// resendSlack: a session sends each claim it holds at most once, give or
// take the claims written while it runs, so one that would send more than
// twice the set (plus this) is a peer asking for ranges again and again,
// each time a few bytes for a whole set in return: ended, as a violation.
const resendSlack = 1024

var errAskedTooMuch = fmt.Errorf("%w: a peer asked for more than twice our claims in one session", errProtocol)

func (cw *claimWriter) add(claims []store.Claim, skip map[shortID]struct{}) error {
	for i := range claims {
		c := &claims[i]
		if skip != nil {
			if _, ok := skip[shortOf(store.SyncItem{TS: c.TS, ID: c.ID()})]; ok {
				continue
			}
		}
		if cw.limit > 0 && cw.stats.ClaimsSent >= cw.limit {
			return fmt.Errorf("%w: %d claims sent", errAskedTooMuch, cw.stats.ClaimsSent)
		}
		cw.cf.add(c)
		cw.stats.ClaimsSent++
		if cw.cf.size() >= claimsFrameFill {
			if err := cw.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (cw *claimWriter) flush() error {
	if cw.cf.n == 0 {
		return nil
	}
	if cw.spend != nil {
		cw.spend(cw.cf.n)
	}
	f := cw.cf.bytes()
	cw.stats.ClaimBytes += int64(len(f))
	cw.cf.reset()
	if err := cw.write(f); err != nil {
		return fmt.Errorf("write sync frame: %w", err)
	}
	return nil
}
