package api

import (
	"net/http"

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
