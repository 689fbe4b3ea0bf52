package swarm

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/metanode/metanode/store"
)

// Gossip message: version byte, uvarint count, claims in wire form.
const (
	gossipVersion      = 1
	maxGossipClaims    = 1024      // claims in one message
	maxGossipBytes     = 512 << 10 // one message's data
	gossipBatchBytes   = 64 << 10  // a batch is sent once it holds this much
	gossipBatchWindow  = time.Millisecond
	gossipStoreWorkers = 4 // Submit calls in flight for gossip
	validateQueue      = 4096
	pubsubMaxMessage   = 1 << 20
)

// encodeGossip packs claims into one message body.
func encodeGossip(claims []store.Claim) []byte {
	b := make([]byte, 0, 16+len(claims)*300)
	b = append(b, gossipVersion)
	b = binary.AppendUvarint(b, uint64(len(claims)))
	for i := range claims {
		b = claims[i].AppendWire(b)
	}
	return b
}

// decodeGossip decodes and bounds a message body.
func decodeGossip(data []byte) ([]store.Claim, error) {
	if len(data) > maxGossipBytes {
		return nil, fmt.Errorf("%w: gossip message of %d bytes", errProtocol, len(data))
	}
	if len(data) < 1 || data[0] != gossipVersion {
		return nil, fmt.Errorf("%w: unknown gossip message version", errProtocol)
	}
	return decodeClaims(data[1:], maxGossipClaims)
}

// gossipMsgID is the content address of a message: SHA-256 of its bytes.
// The same batch from two publishers is one message.
func gossipMsgID(m *pb.Message) string {
	h := sha256.Sum256(m.Data)
	return string(h[:])
}

func (s *Swarm) openGossip() error {
	psCtx, cancel := context.WithCancel(context.Background())
	s.psCancel = cancel
	topic := s.Topic()
	opts := []pubsub.Option{
		pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
		pubsub.WithNoAuthor(),
		pubsub.WithMessageIdFn(gossipMsgID),
		pubsub.WithFloodPublish(true),
		pubsub.WithGossipSubParams(gossipParams()),
		pubsub.WithPeerExchange(s.cfg.PeerExchange),
		pubsub.WithValidateQueueSize(validateQueue),
		pubsub.WithMaxMessageSize(pubsubMaxMessage),
		pubsub.WithPeerOutboundQueueSize(256),
		pubsub.WithPeerScore(s.scoreParams(topic), scoreThresholds()),
		pubsub.WithRawTracer(&tracer{s: s}),
		// pubsub warns about routine events (e.g. a host without a decaying
		// tag manager); only its errors reach the owner's log.
		pubsub.WithLogger(slog.New(minLevel{s.log.With("sub", "pubsub").Handler(), slog.LevelError})),
	}
	if s.scoreInspect != nil {
		opts = append(opts, pubsub.WithPeerScoreInspect(s.scoreInspect, 50*time.Millisecond))
	}
	ps, err := pubsub.NewGossipSub(psCtx, s.host, opts...)
	if err != nil {
		return fmt.Errorf("gossipsub: %w", err)
	}
	s.ps = ps
	// The validator is registered before Join: nothing reaches the topic
	// unchecked.
	if err := ps.RegisterTopicValidator(topic, s.validate, pubsub.WithValidatorTimeout(10*time.Second)); err != nil {
		return fmt.Errorf("gossip validator: %w", err)
	}
	if s.topic, err = ps.Join(topic); err != nil {
		return fmt.Errorf("join %s: %w", topic, err)
	}
	if s.sub, err = s.topic.Subscribe(pubsub.WithBufferSize(1024)); err != nil {
		return fmt.Errorf("subscribe %s: %w", topic, err)
	}
	return nil
}

// gossipParams narrow the mesh from gossipsub's D=6 to D=3 (Dlo 2, Dhi 4):
// claims are ~250 B, below the 1 KiB size at which peers send IDONTWANT,
// so a node receives a message about once per mesh peer. Measured on 10
// nodes: 3.4 copies per claim per node (D=4: 4.1, D=6: 7.4), and less CPU
// per claim, so lower latency too. Dhi 5 let meshes grow past what D
// asks often enough that 1 run in 6 received 4.17 copies; with Dhi 4,
// 3.27–3.46 in 5 runs (2026-12-01). A home swarm (a handful of homes and
// bootstrap nodes) stays connected; gossip to non-mesh peers (Dlazy 3) and
// sync cover the rest.
func gossipParams() pubsub.GossipSubParams {
	p := pubsub.DefaultGossipSubParams()
	p.D, p.Dlo, p.Dhi, p.Dscore, p.Dout, p.Dlazy = 3, 2, 4, 1, 0, 3
	return p
}

// scoreParams penalise invalid deliveries hard (P4) and leave mesh
// delivery rates (P3) alone: a claims topic is sparse, and honest peers
// must not be pruned for having little to say. No IP colocation penalty:
// homes behind one NAT share an address.
func (s *Swarm) scoreParams(topic string) *pubsub.PeerScoreParams {
	return &pubsub.PeerScoreParams{
		Topics: map[string]*pubsub.TopicScoreParams{topic: {
			TopicWeight:                    1,
			TimeInMeshWeight:               0.01,
			TimeInMeshQuantum:              time.Second,
			TimeInMeshCap:                  100,
			FirstMessageDeliveriesWeight:   1,
			FirstMessageDeliveriesDecay:    pubsub.ScoreParameterDecay(10 * time.Minute),
			FirstMessageDeliveriesCap:      50,
			InvalidMessageDeliveriesWeight: -100,
			InvalidMessageDeliveriesDecay:  pubsub.ScoreParameterDecay(time.Hour),
		}},
		TopicScoreCap: 50,
		AppSpecificScore: func(p peer.ID) float64 {
			if s.penalties.isBlocked(p) {
				return -1000
			}
			return 0
		},
		AppSpecificWeight:           1,
		BehaviourPenaltyWeight:      -10,
		BehaviourPenaltyThreshold:   6,
		BehaviourPenaltyDecay:       pubsub.ScoreParameterDecay(10 * time.Minute),
		DecayInterval:               time.Second,
		DecayToZero:                 0.01,
		RetainScore:                 10 * time.Minute,
		IPColocationFactorThreshold: 1,
	}
}

func scoreThresholds() *pubsub.PeerScoreThresholds {
	return &pubsub.PeerScoreThresholds{
		GossipThreshold:             -50,
		PublishThreshold:            -100,
		GraylistThreshold:           -200,
		AcceptPXThreshold:           10,
		OpportunisticGraftThreshold: 2,
	}
}

// validate is the topic validator: decode and bound, skip claims already
// held, check, apply the trust policy and the peer's rate, skip claims the
// store holds a newer row for (stale), verify the rest in parallel.
// Reject (penalised) for anything malformed or a bad signature; Ignore (no
// penalty) when nothing new and trusted is left, or some claim is
// untrusted, future-dated or over the rate; else Accept. Valid trusted new
// claims of an ignored message are stored anyway and, those the store
// takes as new, published again as this node's own batch (relayGossip). A
// message that vouches for a signer and carries that signer's claims is
// accepted whole (admitVouched).
func (s *Swarm) validate(ctx context.Context, from peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	if from == s.host.ID() {
		return pubsub.ValidationAccept // our own batch: stored and verified already
	}
	if s.penalties.isBlocked(from) { // its connection is being closed
		s.met.gossipMsgs.WithLabelValues("ignored").Inc()
		return pubsub.ValidationIgnore
	}
	if len(msg.Data) > 0 && msg.Data[0] != gossipVersion {
		// A newer format this node cannot read: not the sender's fault.
		s.met.gossipMsgs.WithLabelValues("ignored").Inc()
		return pubsub.ValidationIgnore
	}
	claims, err := decodeGossip(msg.Data)
	if err != nil {
		s.penalize(from, "gossip: "+err.Error())
		s.met.gossipMsgs.WithLabelValues("rejected").Inc()
		return pubsub.ValidationReject
	}
	set := s.cfg.Store.SyncSet()
	now := time.Now()
	fresh := make([]store.Claim, 0, len(claims))
	ids := make([]store.ID, 0, len(claims))
	var held []int // claims of signers not trusted (yet): see admitVouched
	var heldIDs []store.ID
	var known []store.Claim // held already: not stored again (see below)
	var knownIDs []store.ID
	ignore := false
	for i := range claims {
		c := &claims[i]
		id := c.ID()
		if set.Has(store.SyncItem{TS: c.TS, ID: id}) {
			s.met.gossipClaims.WithLabelValues("known").Inc()
			known, knownIDs = append(known, *c), append(knownIDs, id)
			continue
		}
		if err := c.Check(now, s.cfg.MaxSkew); err != nil {
			if errors.Is(err, store.ErrFutureTimestamp) {
				s.met.gossipClaims.WithLabelValues("future").Inc()
				ignore = true
				continue
			}
			s.met.gossipClaims.WithLabelValues("invalid").Inc()
			s.met.gossipMsgs.WithLabelValues("rejected").Inc()
			s.penalize(from, "gossip: "+err.Error())
			return pubsub.ValidationReject
		}
		if !s.cfg.Store.Trusted(c.UID) {
			held = append(held, i)
			heldIDs = append(heldIDs, id)
			continue
		}
		fresh = append(fresh, *c)
		ids = append(ids, id)
	}
	if len(fresh) > 0 && !s.limiter.allow(from, len(fresh)) {
		s.met.gossipClaims.WithLabelValues("ratelimited").Add(float64(len(fresh)))
		s.met.gossipMsgs.WithLabelValues("ignored").Inc()
		return pubsub.ValidationIgnore
	}
	var admitted []store.Claim // vouches stored while validating
	if len(held) > 0 {
		n := len(fresh)
		var vouched []int
		vouched, admitted, err = s.admitVouched(ctx, claims, held, fresh, ids)
		if err != nil {
			s.met.gossipClaims.WithLabelValues("invalid").Inc()
			s.met.gossipMsgs.WithLabelValues("rejected").Inc()
			s.penalize(from, "gossip: "+err.Error())
			return pubsub.ValidationReject
		}
		for _, k := range vouched {
			fresh = append(fresh, claims[held[k]])
			ids = append(ids, heldIDs[k])
		}
		if untrusted := len(held) - len(vouched); untrusted > 0 {
			s.met.gossipClaims.WithLabelValues("untrusted").Add(float64(untrusted))
			ignore = true
		}
		if len(fresh) > n && !s.limiter.allow(from, len(fresh)-n) {
			s.met.gossipClaims.WithLabelValues("ratelimited").Add(float64(len(fresh) - n))
			fresh, ids = fresh[:n], ids[:n]
			ignore = true
		}
	}
	// Stale claims (a signer's superseded or current claims, replayed by
	// anyone: they are genuine and verify) change nothing here: skipped
	// like known ones, so they neither spend their signer's budget nor make
	// a message worth forwarding. Read after the peer's rate is charged,
	// so each read is paid for.
	stale, staleIDs := s.dropStale(ctx, &fresh, &ids)
	if !s.verifyGossip(from, fresh, ids) {
		return pubsub.ValidationReject
	}
	// After verification: only valid claims spend their signer's budget
	// (claims forged in a trusted signer's name must not use it up).
	if s.limitSigners(&fresh, &ids) {
		ignore = true
	}
	s.met.gossipClaims.WithLabelValues("new").Add(float64(len(fresh)))
	if len(fresh) > 0 { // verified, trusted (or vouched for) and new here
		s.markUseful(from)
	}
	if len(fresh) == 0 {
		s.met.gossipMsgs.WithLabelValues("ignored").Inc()
		s.storeGossip(ctx, gossipBatch{relay: true, vouches: admitted}) // nothing if none
		return pubsub.ValidationIgnore
	}
	// Forwarding sends the message byte for byte, known claims included:
	// their signatures must hold too (a claim's id covers only its payload,
	// so a known claim may come with a broken signature, and a peer that
	// lacks it would penalise this node). Checked only now, for messages
	// this node would forward, and counted in the peer's rate.
	if !ignore && len(known) > 0 && !s.limiter.allow(from, len(known)) {
		ignore = true
	}
	if !ignore && !s.verifyGossip(from, append(known, stale...), append(knownIDs, staleIDs...)) {
		return pubsub.ValidationReject
	}
	if ignore {
		s.met.gossipMsgs.WithLabelValues("ignored").Inc()
		// The vouches stored above are held by now, so the relay below
		// would leave them out, and the vouched claims would reach the
		// next homes without what makes them count (review 9, R9-3).
		s.storeGossip(ctx, gossipBatch{claims: fresh, relay: true, vouches: admitted})
		return pubsub.ValidationIgnore
	}
	s.met.gossipMsgs.WithLabelValues("accepted").Inc()
	msg.ValidatorData = fresh
	return pubsub.ValidationAccept
}

// verifyGossip verifies claims in parallel; on a bad signature it
// penalises the peer that sent them and reports false.
func (s *Swarm) verifyGossip(from peer.ID, claims []store.Claim, ids []store.ID) bool {
	for i, err := range store.VerifyAll(claims, ids, nil) {
		if err != nil {
			s.met.gossipClaims.WithLabelValues("invalid").Inc()
			s.met.gossipMsgs.WithLabelValues("rejected").Inc()
			s.penalize(from, fmt.Sprintf("gossip: claim %s: %v", ids[i], err))
			return false
		}
	}
	return true
}

// admitVouched lets a message carry a vouch and the vouched signer's
// claims together (a home publishes a new local writer's vouch with, or
// just before, its first claims). The live vouches among the trusted
// claims (trusted) for signers of held claims are verified and stored
// first; then the store's own policy says which held signers are trusted
// now, and admitVouched returns their indexes into held. The store, not a
// per-message set, decides: it alone knows whether the voucher is trusted
// directly (vouching is one hop), whether the vouched uid is distrusted and
// whether the vouch is stale (a replayed vouch retracted since must not
// open the door even for one message). Vouches are rare, so the extra
// commit is too. It also returns the vouches the store took as new. An
// error means a vouch's signature is bad.
func (s *Swarm) admitVouched(ctx context.Context, claims []store.Claim, held []int,
	trusted []store.Claim, trustedIDs []store.ID) ([]int, []store.Claim, error) {
	signers := make(map[string]bool, len(held))
	for _, i := range held {
		signers[claims[i].UID] = true
	}
	var vouches []store.Claim
	var vids []store.ID
	for i := range trusted {
		if uid, ok := liveVouch(&trusted[i]); ok && signers[uid] {
			vouches = append(vouches, trusted[i])
			vids = append(vids, trustedIDs[i])
		}
	}
	if len(vouches) == 0 {
		return nil, nil, nil
	}
	for i, err := range store.VerifyAll(vouches, vids, nil) {
		if err != nil {
			return nil, nil, fmt.Errorf("vouch %s: %w", vids[i], err)
		}
	}
	res, err := s.cfg.Store.Submit(ctx, vouches, store.SubmitOptions{Origin: store.OriginPeer, Verified: true})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("store gossip vouches", "claims", len(vouches), "err", err)
		}
		return nil, nil, nil // the held claims stay untrusted; sync brings them later
	}
	var stored []store.Claim
	for i, r := range res {
		if r.Stored {
			stored = append(stored, vouches[i])
		}
	}
	var out []int
	for k, i := range held {
		if s.cfg.Store.Trusted(claims[i].UID) {
			out = append(out, k)
		}
	}
	return out, stored, nil
}

// liveVouch returns the uid a claim vouches for when it is a live vouch:
// key vouch/<uid> with value "true" on its signer's own peer-id cid.
func liveVouch(c *store.Claim) (string, bool) {
	uid, ok := strings.CutPrefix(c.Key, store.VouchPrefix)
	if !ok || uid == "" || c.Kind != store.KindText || string(c.Value) != "true" {
		return "", false
	}
	if pc, err := store.PeerIDCID(c.UID); err != nil || pc != c.CID {
		return "", false
	}
	return uid, true
}

// vouchesFirst moves vouch claims (and their retractions) ahead of the
// others, keeping the order within each part, so that one store batch
// applies a vouch before the claims of the signer it vouches for (the
// store updates its trust policy claim by claim within a batch).
func vouchesFirst(claims []store.Claim) {
	isVouch := func(c store.Claim) bool { return strings.HasPrefix(c.Key, store.VouchPrefix) }
	if !slices.ContainsFunc(claims, isVouch) {
		return
	}
	slices.SortStableFunc(claims, func(a, b store.Claim) int {
		va, vb := isVouch(a), isVouch(b)
		switch {
		case va == vb:
			return 0
		case va:
			return -1
		}
		return 1
	})
}

// gossipBatch is verified gossip on its way to the store. relay marks the
// claims of an ignored message: not forwarded by pubsub, so those the
// store takes as new are published again as this node's own batch. Else
// whoever first bundles a trusted claim with one junk claim would stop
// this node relaying it live: the genuine message, arriving second, holds
// only known claims (trust review R7-T3). Messages are content-addressed,
// so a peer that has the same batch already drops the copy unread.
// vouches are the message's vouches admitVouched stored already: relayed
// in the same message as, and ahead of, the claims, because the next node
// validates messages concurrently and would refuse a vouched claim that
// arrived apart from its vouch.
type gossipBatch struct {
	claims  []store.Claim
	relay   bool
	vouches []store.Claim
}

// storeGossip queues verified claims for the store.
func (s *Swarm) storeGossip(ctx context.Context, b gossipBatch) {
	if len(b.claims) == 0 && len(b.vouches) == 0 {
		return
	}
	select {
	case s.gossipIn <- b:
	case <-ctx.Done():
	case <-s.ctx.Done():
	}
}

// runGossipReader hands delivered messages to the store workers.
func (s *Swarm) runGossipReader(ctx context.Context) {
	for {
		msg, err := s.sub.Next(ctx)
		if err != nil {
			return // ctx done or subscription cancelled
		}
		if msg.ReceivedFrom == s.host.ID() {
			continue
		}
		if claims, ok := msg.ValidatorData.([]store.Claim); ok && len(claims) > 0 {
			s.storeGossip(ctx, gossipBatch{claims: claims})
		}
	}
}

// runTopicEvents tells the scheduler about peers joining the topic.
func (s *Swarm) runTopicEvents(ctx context.Context) {
	h, err := s.topic.EventHandler()
	if err != nil {
		s.log.Warn("topic events", "err", err)
		return
	}
	defer h.Cancel()
	for {
		ev, err := h.NextPeerEvent(ctx)
		if err != nil {
			return
		}
		if ev.Type != pubsub.PeerJoin {
			continue
		}
		select {
		case s.joinCh <- ev.Peer:
		default:
		}
	}
}

// runGossipStore stores verified gossip; several run so that a commit in
// progress does not hold back the next batch.
func (s *Swarm) runGossipStore(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-s.gossipIn:
			// Take whatever else is queued too: one commit for a burst (a
			// commit costs the store far more than a claim in it).
			claims := b.claims
			var relay []bool          // per claim, once any batch is to be relayed
			var vouches []store.Claim // relayed ahead of the claims
			mark := func(b gossipBatch, from int) {
				vouches = append(vouches, b.vouches...)
				if b.relay && relay == nil {
					relay = make([]bool, from, len(claims))
				}
				if relay != nil {
					for range b.claims {
						relay = append(relay, b.relay)
					}
				}
			}
			mark(b, 0)
		drain:
			for len(claims) < maxGossipClaims {
				select {
				case more := <-s.gossipIn:
					n := len(claims)
					claims = append(claims[:n:n], more.claims...)
					mark(more, n)
				default:
					break drain
				}
			}
			if len(claims) == 0 { // vouches only: stored already
				s.relayGossip(vouches, nil)
				continue
			}
			gen := s.refused.generation()
			res, err := s.cfg.Store.Submit(ctx, claims, store.SubmitOptions{Origin: store.OriginPeer, Verified: true})
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("store gossip", "claims", len(claims), "err", err)
					s.relayGossip(vouches, nil) // stored before: they still go on
				}
				continue
			}
			var again []store.Claim
			for i, r := range res {
				// Not of interest (an interest-mode node's filter) is
				// neutral: not refused, so a later interest may still bring it.
				if r.Outcome == store.Rejected && !errors.Is(r.Err, ErrNotInterested) && errors.Is(r.Err, store.ErrUntrusted) {
					s.refused.add(store.SyncItem{TS: claims[i].TS, ID: r.ID}, claims[i].UID, gen)
				}
				if r.Stored && relay != nil && relay[i] {
					again = append(again, claims[i])
				}
			}
			s.relayGossip(vouches, again)
			s.counters.gossipStored.Add(int64(len(claims)))
		}
	}
}

// relayGossip publishes vouches and the claims they may admit in one call,
// vouches first, so they travel in one message (see gossipBatch).
func (s *Swarm) relayGossip(vouches, claims []store.Claim) {
	all := append(vouches[:len(vouches):len(vouches)], claims...)
	if len(all) == 0 {
		return
	}
	s.met.gossipRelayed.Add(float64(len(all)))
	s.Publish(all)
}

// runPublisher batches local claims: a batch leaves after
// gossipBatchWindow or once it reaches gossipBatchBytes, cut into messages
// by packGossip (each Publish call kept whole where it fits).
func (s *Swarm) runPublisher(ctx context.Context) {
	var pending [][]store.Claim // one entry per Publish call
	queued, size := 0, 0
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	flush := func() {
		timer.Stop()
		for _, msg := range packGossip(pending) {
			if err := s.topic.Publish(ctx, encodeGossip(msg)); err != nil {
				if ctx.Err() == nil {
					s.log.Warn("publish gossip", "claims", len(msg), "err", err)
				}
			} else {
				s.met.gossipPublished.Add(float64(len(msg)))
				s.counters.published.Add(int64(len(msg)))
			}
		}
		pending, queued, size = nil, 0, 0
	}
	for {
		select {
		case <-ctx.Done():
			return
		case claims := <-s.pubCh:
			if len(pending) == 0 {
				timer.Reset(gossipBatchWindow)
			}
			pending = append(pending, claims)
			queued += len(claims)
			for i := range claims {
				size += len(claims[i].Value) + len(claims[i].CID) + len(claims[i].Key) + 120
			}
			if size >= gossipBatchBytes || queued >= maxGossipClaims {
				flush()
			}
		case <-timer.C:
			flush()
		}
	}
}

// minLevel drops records below a level.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
