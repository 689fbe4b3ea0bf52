package node

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/metanode/metanode/api"
	"github.com/metanode/metanode/store"
	"github.com/metanode/metanode/swarm"
)

// Pairing: `metanode invite` asks the node for a code; the code carries what
// a fresh home needs to join (swarm name, swarm key, the inviter's addresses,
// its uid, a one-time token). `metanode join CODE` writes that into the
// joiner's data dir and presents the token over swarm.ProtocolPair; the
// inviter then trusts the joiner's node uid, and once it answered OK the
// joiner trusts the inviter's (so a refused or failed join trusts nothing). Both
// trust each other's node uid, so each home's plugin claims flow through
// its node's vouches (docs/trust.md).

// InvitePrefix starts every pairing code (version 1).
const InvitePrefix = "mn1:"

// InvitesFile keeps the inviter's outstanding invites (token hashes only).
const InvitesFile = "invites.json"

// Invite lifetimes.
const (
	DefaultInviteTTL = 24 * time.Hour
	MinInviteTTL     = time.Minute
	MaxInviteTTL     = 30 * 24 * time.Hour
	maxInvites       = 256 // outstanding invites kept; the oldest go first
	maxInviteAddrs   = 16
)

// ErrBadInvite is a pairing code that does not decode.
var ErrBadInvite = errors.New("not a metanode pairing code")

// ErrInvitePeer is a code whose addresses name a peer other than its
// inviter uid: the joiner would pair with one key and trust another.
var ErrInvitePeer = errors.New("the pairing code's addresses are not its inviter's")

// ErrPairRefused: the inviter answered no (an unknown, used or expired
// code); the error text carries its reason. It is the swarm's sentinel.
var ErrPairRefused = swarm.ErrPairRefused

// CheckSwarmKey reports whether key is a swarm.key file's content.
func CheckSwarmKey(key string) error {
	if _, err := swarm.ParseSwarmKey(strings.NewReader(key)); err != nil {
		return fmt.Errorf("swarm key: %w", err)
	}
	return nil
}

// Invite is what a pairing code carries.
type Invite struct {
	Swarm     string   `json:"swarm"`
	SwarmKey  string   `json:"key,omitempty"`  // swarm.key file content: a private swarm
	Addrs     []string `json:"addrs"`          // the inviter's addresses, each ending in /p2p/<peerId>
	Bootstrap []string `json:"boot,omitempty"` // the inviter's own bootstrap peers
	UID       string   `json:"uid"`            // the inviter's node uid
	Token     string   `json:"token"`          // base64url, single use
}

// Code is the copyable form: InvitePrefix + base64url(JSON).
func (i Invite) Code() string {
	b, _ := json.Marshal(i)
	return InvitePrefix + base64.RawURLEncoding.EncodeToString(b)
}

// ParseInvite decodes and checks a pairing code.
func ParseInvite(code string) (Invite, error) {
	code = strings.TrimSpace(code)
	body, ok := strings.CutPrefix(code, InvitePrefix)
	if !ok {
		return Invite{}, fmt.Errorf("%w: it should start with %q", ErrBadInvite, InvitePrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return Invite{}, fmt.Errorf("%w: %v (was it copied whole?)", ErrBadInvite, err)
	}
	var inv Invite
	if err := json.Unmarshal(raw, &inv); err != nil {
		return Invite{}, fmt.Errorf("%w: %v", ErrBadInvite, err)
	}
	tok, err := base64.RawURLEncoding.DecodeString(inv.Token)
	switch {
	case err != nil || len(tok) == 0 || len(tok) > swarm.MaxPairToken:
		return Invite{}, fmt.Errorf("%w: bad token", ErrBadInvite)
	case store.CheckUID(inv.UID) != nil:
		return Invite{}, fmt.Errorf("%w: bad inviter uid", ErrBadInvite)
	case len(inv.Addrs) == 0:
		return Invite{}, fmt.Errorf("%w: no inviter address", ErrBadInvite)
	case inv.Swarm == "":
		return Invite{}, fmt.Errorf("%w: no swarm name", ErrBadInvite)
	}
	return inv, nil
}

// CheckPeer checks that every address of the code that names a peer names
// the inviter's uid (ErrInvitePeer otherwise): pairing authenticates that
// peer, and the joiner then trusts the uid. Pair checks it; the join
// command checks it up front. Addresses that do not parse are left to the
// caller's address check (the join command words those better); swarm.Pair
// refuses them.
func (i Invite) CheckPeer() error {
	for _, a := range i.Addrs {
		ai, err := peer.AddrInfoFromString(a)
		if err != nil {
			continue
		}
		uid, err := swarm.PeerUID(ai.ID)
		if err != nil {
			uid = "none"
		}
		if uid != i.UID {
			return fmt.Errorf("%w: %s is peer %s (uid %s), not the inviter uid %s: ask the other home for a new code", ErrInvitePeer, a, ai.ID, uid, i.UID)
		}
	}
	return nil
}

// TokenBytes is the decoded token (ParseInvite checked it).
func (i Invite) TokenBytes() []byte {
	b, _ := base64.RawURLEncoding.DecodeString(i.Token)
	return b
}

// pendingInvite is one outstanding invite as stored in InvitesFile.
type pendingInvite struct {
	Hash    string    `json:"sha256"` // of the token: the file never holds a usable token
	Expires time.Time `json:"expires"`
	UsedBy  string    `json:"usedBy,omitempty"` // the joiner's uid, once used
}

// shareableAddrs puts loopback addresses last: on another machine they
// name the joiner itself (its dial of one is a dial to itself, not a
// failure it reports), and the cap on a code's addresses must keep the
// others. They stay: a joiner on the same machine, as with a container
// whose port is published on the host, may have no other way in.
func shareableAddrs(addrs []string) []string {
	var out, loop []string
	for _, a := range addrs {
		if m, err := ma.NewMultiaddr(a); err == nil && manet.IsIPLoopback(m) {
			loop = append(loop, a)
		} else {
			out = append(out, a)
		}
	}
	return append(out, loop...)
}

// Invite makes a pairing code valid for ttl (0: DefaultInviteTTL) and
// records its token's hash in the data dir.
func (n *Node) Invite(ctx context.Context, ttl time.Duration) (api.InviteResponse, error) {
	if ttl == 0 {
		ttl = DefaultInviteTTL
	}
	if ttl < MinInviteTTL || ttl > MaxInviteTTL {
		return api.InviteResponse{}, &api.Error{Status: http.StatusBadRequest, Slug: api.SlugSchemaViolation,
			Message: fmt.Sprintf("invite lifetime %v outside %v..%v", ttl, MinInviteTTL, MaxInviteTTL)}
	}
	if n.cfg.DataDir == "" {
		return api.InviteResponse{}, errors.New("invite: the node has no data directory to keep invites in")
	}
	tok := make([]byte, 24)
	_, _ = rand.Read(tok)
	inv := Invite{
		Swarm:     n.swarmName(),
		Addrs:     shareableAddrs(n.Addrs()),
		Bootstrap: n.cfg.Bootstrap,
		UID:       n.UID(),
		Token:     base64.RawURLEncoding.EncodeToString(tok),
	}
	if len(inv.Addrs) == 0 {
		return api.InviteResponse{}, errors.New("invite: the swarm listens on no address another home could dial; check --listen")
	}
	if len(inv.Addrs) > maxInviteAddrs {
		inv.Addrs = inv.Addrs[:maxInviteAddrs]
	}
	if n.cfg.SwarmKeyPath != "" {
		key, err := os.ReadFile(n.cfg.SwarmKeyPath)
		if err != nil {
			return api.InviteResponse{}, fmt.Errorf("invite: %w", err)
		}
		inv.SwarmKey = string(key)
	}
	expires := n.cfg.Now().Add(ttl).UTC().Truncate(time.Second)
	n.invMu.Lock()
	defer n.invMu.Unlock()
	list, err := n.readInvites()
	if err != nil {
		return api.InviteResponse{}, fmt.Errorf("invite: %w", err)
	}
	list = append(list, pendingInvite{Hash: tokenHash(tok), Expires: expires})
	if len(list) > maxInvites {
		list = list[len(list)-maxInvites:]
	}
	if err := n.writeInvites(list); err != nil {
		return api.InviteResponse{}, fmt.Errorf("invite: %w", err)
	}
	n.log.Info("invite made", "expires", expires)
	return api.InviteResponse{Code: inv.Code(), Expires: expires, UID: inv.UID, Swarm: inv.Swarm,
		Private: inv.SwarmKey != "", Addrs: inv.Addrs}, nil
}

// answerPair is the swarm's OnPair: a valid, unexpired token not used by
// another node pairs; the joiner's node uid is trusted and a re-sync starts
// so its claims come in. A joiner retrying with its own token pairs again,
// but a uid the owner distrusted is refused: a token it still holds must
// not undo the owner's trust rm.
func (n *Node) answerPair(ctx context.Context, uid string, token []byte) swarm.PairAnswer {
	if msg := n.admitJoiner(ctx, uid, token); msg != "" {
		return swarm.PairAnswer{Message: msg}
	}
	// The trust change re-syncs with peers (watchTrust): the
	// joiner's claims, refused until now, come in.
	share, err := n.joinerShare(ctx)
	if err != nil {
		// Only the joiner's progress line depends on it: pair anyway.
		n.log.Warn("pairing: count the claims the joiner accepts", "err", err)
		share = int64(n.store.SyncSet().Len())
	}
	n.log.Info("paired with a new home", "uid", uid, "claims", share)
	return swarm.PairAnswer{OK: true, Claims: share}
}

// admitJoiner checks the token, marks the invite used by uid and trusts
// uid, or answers why not. It holds trustMu, as trust add and rm do: a
// trust rm either comes first and is seen here, or comes after the pairing
// and stands.
func (n *Node) admitJoiner(ctx context.Context, uid string, token []byte) string {
	const refuse = "unknown, used or expired invite: ask the other home for a new code (it runs metanode invite)"
	if n.cfg.DataDir == "" {
		return refuse
	}
	h := tokenHash(token)
	now := n.cfg.Now()
	n.trustMu.Lock()
	defer n.trustMu.Unlock()
	if n.store.Distrusted(uid) {
		n.log.Info("pairing refused: the joiner's uid is distrusted", "uid", uid)
		return "this home's owner distrusts your node uid (metanode trust rm); only they can trust it again (metanode trust add)"
	}
	n.invMu.Lock()
	list, err := n.readInvites()
	if err != nil {
		n.invMu.Unlock()
		n.log.Warn("pairing: read invites", "err", err)
		return "the inviter cannot read its invites"
	}
	found := -1
	for i, p := range list {
		if subtle.ConstantTimeCompare([]byte(p.Hash), []byte(h)) == 1 {
			found = i
		}
	}
	if found < 0 || now.After(list[found].Expires) || (list[found].UsedBy != "" && list[found].UsedBy != uid) {
		n.invMu.Unlock()
		return refuse
	}
	list[found].UsedBy = uid
	err = n.writeInvites(list)
	n.invMu.Unlock()
	if err != nil {
		n.log.Warn("pairing: write invites", "err", err)
		return "the inviter cannot record the invite"
	}
	// A retry by a joiner already on the list changes nothing: its row
	// (and note) stay as they are.
	if listed, err := n.listed(ctx, uid); err != nil || !listed {
		if err := n.store.Trust(ctx, uid, "paired"); err != nil {
			n.log.Warn("pairing: trust joiner", "uid", uid, "err", err)
			return "the inviter cannot update its trust list"
		}
	}
	return ""
}

// Pair presents an invite to its inviter: the joining side of pairing.
// Only once the inviter accepted is its uid trusted, so a refused or failed
// join leaves this node's trust as it was (a distrust of that uid too); the
// inviter's claims refused meanwhile come in by the re-sync the trust
// change starts. It answers how many of the inviter's claims this node will
// accept: those of the inviter's uid and of the signers it vouches for.
func (n *Node) Pair(ctx context.Context, inv Invite) (int64, error) {
	if err := inv.CheckPeer(); err != nil {
		return 0, fmt.Errorf("pair: %w", err)
	}
	ans, err := n.swarm.Pair(ctx, inv.Addrs, inv.TokenBytes())
	if err != nil {
		return 0, err
	}
	// The inviter has accepted (it trusts this node, the code is spent):
	// a stop request now must not leave this side half paired, so the
	// local step, one trust write, runs to its end.
	if err := n.trustInviter(context.WithoutCancel(ctx), inv.UID); err != nil {
		// The inviter accepts this node's retry with the same token.
		return 0, fmt.Errorf("paired, but trusting the inviter: %w", err)
	}
	n.swarm.Resync()
	return ans.Claims, nil
}

// trustInviter trusts the inviter's uid after its OK, under trustMu as
// trust add; an inviter already on the list keeps its row.
func (n *Node) trustInviter(ctx context.Context, uid string) error {
	n.trustMu.Lock()
	defer n.trustMu.Unlock()
	if listed, err := n.listed(ctx, uid); err == nil && listed {
		return nil
	}
	return n.store.Trust(ctx, uid, "inviter")
}

// listed reports whether uid has a trusted row on this node's trust list:
// the node's own decision, not a vouch by another home (nor open mode).
func (n *Node) listed(ctx context.Context, uid string) (bool, error) {
	rows, err := n.trustRows(ctx)
	if err != nil {
		return false, err
	}
	return rows[uid].trusted, nil
}

// ClaimCount is how many claims the node shares (its sync set).
func (n *Node) ClaimCount() int { return n.store.SyncSet().Len() }

func (n *Node) swarmName() string {
	if n.cfg.SwarmName != "" {
		return n.cfg.SwarmName
	}
	return swarm.DefaultName
}

func tokenHash(tok []byte) string {
	sum := sha256.Sum256(tok)
	return hex.EncodeToString(sum[:])
}

func (n *Node) readInvites() ([]pendingInvite, error) {
	b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, InvitesFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var list []pendingInvite
	if err := json.Unmarshal(b, &list); err != nil {
		// Written atomically, so only a disk error or a hand edit gets
		// here. Set it aside rather than refuse every invite and pairing
		// until someone repairs it: the codes it held stop working.
		bad := filepath.Join(n.cfg.DataDir, InvitesFile+".bad")
		if rerr := os.Rename(filepath.Join(n.cfg.DataDir, InvitesFile), bad); rerr != nil {
			return nil, fmt.Errorf("%s: %w (and setting it aside: %v)", InvitesFile, err, rerr)
		}
		n.log.Warn("unreadable invites file set aside; its codes no longer work", "file", bad, "err", err)
		return nil, nil
	}
	return list, nil
}

// writeInvites replaces the file atomically (0600), dropping invites that
// expired more than a day ago.
func (n *Node) writeInvites(list []pendingInvite) error {
	keep := list[:0]
	cutoff := n.cfg.Now().Add(-24 * time.Hour)
	for _, p := range list {
		if p.Expires.After(cutoff) {
			keep = append(keep, p)
		}
	}
	b, err := json.MarshalIndent(keep, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(n.cfg.DataDir, InvitesFile), b, 0o600)
}
