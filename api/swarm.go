package api

import (
	"bytes"
	"net/http"
	"time"

	"github.com/metanode/metanode/store"
)

// TrustChange is the answer of PUT and DELETE /api/trust/{uid}.
type TrustChange struct {
	UID     string `json:"uid"`
	Trusted bool   `json:"trusted"`
}

func (s *Server) handleSwarmStatus(w http.ResponseWriter, r *http.Request) error {
	st, err := s.cfg.Node.SwarmStatus(r.Context())
	if err != nil {
		return err
	}
	st.Addrs, st.Errors = nonNil(st.Addrs), nonNil(st.Errors)
	if st.Sync.Peers == nil {
		st.Sync.Peers = map[string]PeerSyncInfo{}
	}
	return writeJSON(w, http.StatusOK, st)
}

func (s *Server) handleSwarmPeers(w http.ResponseWriter, r *http.Request) error {
	peers, err := s.cfg.Node.SwarmPeers(r.Context())
	if err != nil {
		return err
	}
	for i := range peers {
		peers[i].Addrs = nonNil(peers[i].Addrs)
	}
	return writeJSON(w, http.StatusOK, nonNil(peers))
}

func (s *Server) handleTrustList(w http.ResponseWriter, r *http.Request) error {
	tl, err := s.cfg.Node.TrustList(r.Context())
	if err != nil {
		return err
	}
	tl.Trusted = nonNil(tl.Trusted)
	return writeJSON(w, http.StatusOK, tl)
}

// trustUID reads and checks the {uid} of a trust route (400 bad_uid).
func trustUID(w http.ResponseWriter, r *http.Request) (string, error) {
	// The body is unused; bound it anyway so garbage cannot stream in.
	if _, err := readBody(w, r, maxSmallBody); err != nil {
		return "", err
	}
	uid := r.PathValue("uid")
	if err := store.CheckUID(uid); err != nil {
		return "", err
	}
	return uid, nil
}

func (s *Server) handleTrust(w http.ResponseWriter, r *http.Request) error {
	uid, err := trustUID(w, r)
	if err != nil {
		return err
	}
	if err := s.cfg.Node.Trust(r.Context(), uid); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, TrustChange{UID: uid, Trusted: true})
}

func (s *Server) handleDistrust(w http.ResponseWriter, r *http.Request) error {
	uid, err := trustUID(w, r)
	if err != nil {
		return err
	}
	if err := s.cfg.Node.Distrust(r.Context(), uid); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, TrustChange{UID: uid, Trusted: false})
}

func (s *Server) handleInvite(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r, maxSmallBody)
	if err != nil {
		return err
	}
	var req InviteRequest
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeJSON(body, &req); err != nil {
			return err
		}
	}
	var ttl time.Duration
	if req.TTL != "" {
		if ttl, err = time.ParseDuration(req.TTL); err != nil || ttl <= 0 {
			return badRequest("ttl %q: want a positive duration such as \"24h\"", req.TTL)
		}
	}
	inv, err := s.cfg.Node.Invite(r.Context(), ttl)
	if err != nil {
		return err
	}
	inv.Addrs = nonNil(inv.Addrs)
	return writeJSON(w, http.StatusOK, inv)
}
