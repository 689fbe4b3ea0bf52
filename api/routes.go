package api

import (
	"net/http"
)

// routes is the one route table (http-api.md).
func (s *Server) routes() {
	// Writing.
	s.handle("POST /api/claims", s.handlePostClaims)
	s.handle("POST /api/files/register", s.handleRegisterFile)
	s.handle("PUT /api/kv/value", s.handleKVPut)
	s.handle("GET /api/kv/value", s.handleKVGet)
	s.handle("DELETE /api/kv/value", s.handleKVDelete)
	s.handle("POST /api/metadata/clear", s.handleClear)

	// The single-box core's unsigned writes, as claims (legacy.go).
	s.legacyRoutes()

	// Reading.
	s.handle("GET /api/meta/{cid}", s.handleMeta)
	s.handle("GET /api/meta/{cid}/claims", s.handleCIDClaims)
	s.handle("GET /api/metadata/{rid}/claims", s.handleRIDClaims)
	s.handleOpen("POST /api/merge", s.handleMerge) // reads: stores nothing
	s.handle("GET /api/metadata/{rid}", s.handleMetadata)
	s.handle("GET /api/metadata/hash-ids", s.handleHashIDs)
	s.handle("GET /api/metadata/list", s.handleList)
	s.handleOpen("POST /api/metadata/search", s.handleSearch) // reads
	s.handle("GET /meta", s.handleHashIDs)
	s.handle("GET /meta/{h}", s.handleMetaRoot)
	s.handle("GET /meta/{h}/{key...}", s.handleMetaField)
	s.handle("GET /api/files/tuples", s.handleFileTuples)
	s.handle("GET /api/file/{cid}/info", s.handleFileInfo)
	s.handle("GET /file/{cid}", s.handleFile)
	s.handle("GET /api/schema", s.handleSchema)
	s.handle("GET /api/stats", s.handleStats)
	s.handle("GET /health", s.handleHealth)
	s.handle("GET /urls", s.handleURLs)
	s.handle("GET /api/token", s.handleToken)
	if s.webdav != nil {
		// Every method: any but GET and HEAD is a write to admit (a
		// browser's needs the token); the handler refuses writes while
		// read-only (webdav.go).
		s.handle(WebDAVPrefix, s.handleWebDAV)
		s.handle(WebDAVPrefix+"/", s.handleWebDAV)
	}
	s.handle("GET /neighbors", s.handleNeighbors)
	s.handle("GET /api/neighbors", s.handleNeighbors)

	// Events.
	s.handle("GET /api/events/meta", s.handleEventsMeta)
	s.handle("GET /api/events/files", s.handleEventsFiles)

	// Swarm and trust.
	s.handle("GET /api/swarm/status", s.handleSwarmStatus)
	s.handle("GET /api/swarm/peers", s.handleSwarmPeers)
	s.handle("POST /api/swarm/invite", s.handleInvite)
	s.handle("GET /api/trust", s.handleTrustList)
	s.handle("PUT /api/trust/{uid}", s.handleTrust)
	s.handle("DELETE /api/trust/{uid}", s.handleDistrust)

	// The owner's page (ui.go, uiapi.go).
	s.handle("GET /{$}", s.handlePage)
	s.handle("GET /ui/{file...}", s.handleUIAsset)
	s.handle("GET /api/node", s.handleNodeInfo)
	s.handle("GET /api/meta/{cid}/explain", s.handleExplain)
	s.handleOpen("POST /api/qr", s.handleQR) // draws: stores nothing
	s.handle("POST /api/swarm/join", s.handleJoin)
	s.handle("GET /api/swarm/join", s.handleJoinStatus)
	s.handle("GET /api/events/files/recent", s.handleRecentFiles)

	metricsH := metricsHandler(s.gather)
	s.handle("GET /metrics", func(w http.ResponseWriter, r *http.Request) error {
		metricsH.ServeHTTP(w, r)
		return nil
	})

	// Everything else gets the envelope rather than net/http's text.
	s.handle("/", s.handleUnmatched)
	s.unclean = s.wrap(s.metrics.forRoute("/"), handleUncleanPath)
	s.refused = s.wrap(s.metrics.forRoute("/"), handleRefused)
}

// handleUncleanPath answers a path with an empty, "." or ".." segment:
// no route has one and no key can (claims.md), so it names nothing.
func handleUncleanPath(w http.ResponseWriter, r *http.Request) error {
	return errorf(http.StatusNotFound, "no route for %s %s: the path has an empty, \".\" or \"..\" segment (the clean form is %s)",
		r.Method, r.URL.Path, cleanPath(r.URL.Path))
}

// probeMethods are tried to tell a wrong method (405) from an unknown path (404).
var probeMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

func (s *Server) handleUnmatched(w http.ResponseWriter, r *http.Request) error {
	var allow []string
	for _, m := range probeMethods {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := s.mux.Handler(probe); p != "" && p != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		for _, m := range allow {
			w.Header().Add("Allow", m)
		}
		return errorf(http.StatusMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path)
	}
	return errorf(http.StatusNotFound, "no route for %s %s", r.Method, r.URL.Path)
}
