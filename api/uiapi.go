package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	qrcode "github.com/skip2/go-qrcode"

	"github.com/metanode/metanode/store"
)

// Read routes the owner's page needs besides the API it shares with
// every client (docs/http.md "The owner's page"): the node's own facts, a
// record's claims with why each won or lost, a QR code of a pairing code,
// and joining another home from a running node.

// NodeInfo is the answer of GET /api/node.
type NodeInfo struct {
	Name      string `json:"name"` // the machine's name, as the meta services know it (beacon v2)
	UID       string `json:"uid"`
	PeerID    string `json:"peerId"`
	Version   string `json:"version"`   // the binary's version ("" unknown)
	FilesRoot string `json:"filesRoot"` // "" without a files root
	Swarm     string `json:"swarm"`
	Private   bool   `json:"private"`
	Trust     string `json:"trust"` // list or open
	// GUILogin: the page is open beyond loopback with a password.
	GUILogin bool `json:"guiLogin"`
}

// JoinRequest is the body of POST /api/swarm/join.
type JoinRequest struct {
	Code string `json:"code"`
}

// JoinStatus is a running node's join of another home (POST and
// GET /api/swarm/join): one at a time, the latest kept.
type JoinStatus struct {
	// State: idle (none yet), connecting, paired (the inviter accepted;
	// claims on their way), done, failed.
	State   string    `json:"state"`
	Inviter string    `json:"inviter,omitempty"` // the inviter's uid
	Attempt int       `json:"attempt,omitempty"` // dials so far while connecting
	Message string    `json:"message,omitempty"` // what happens, or why it failed
	Have    int64     `json:"have"`              // claims this node shares now
	Total   int64     `json:"total"`             // claims the inviter said this node will accept
	Started time.Time `json:"started,omitzero"`
}

// Join states.
const (
	JoinIdle       = "idle"
	JoinConnecting = "connecting"
	JoinPaired     = "paired"
	JoinDone       = "done"
	JoinFailed     = "failed"
)

// ExplainResponse is the answer of GET /api/meta/{cid}/explain.
type ExplainResponse struct {
	RID          string   `json:"rid"`
	CIDs         []string `json:"cids"`
	CanonicalCID string   `json:"canonical_cid"`
	// FileCID is a cid GET /file/{cid} serves (the content is on this
	// machine); "" when none is.
	FileCID string               `json:"fileCid,omitempty"`
	Fields  []store.FieldExplain `json:"fields"`
}

func (s *Server) handleNodeInfo(w http.ResponseWriter, r *http.Request) error {
	info := s.cfg.Node.Info(r.Context())
	info.GUILogin = s.gui != nil
	return writeJSON(w, http.StatusOK, info)
}

func (s *Server) handleExplain(w http.ResponseWriter, r *http.Request) error {
	h := lookupRef(r.PathValue("cid"), ridOrCID)
	ex, err := s.cfg.Store.Explain(r.Context(), h)
	if err != nil {
		return missError(h, ridOrCID, err, SlugUnknownCID)
	}
	out := ExplainResponse{RID: ex.RID, CIDs: nonNil(ex.CIDs), Fields: nonNil(ex.Fields)}
	if rec, err := s.cfg.Store.Record(r.Context(), ex.RID, ""); err == nil {
		out.CanonicalCID = rec.CanonicalCID
	}
	for _, c := range ex.CIDs {
		if _, err := s.cfg.Store.LocalFileForCID(r.Context(), c); err == nil {
			out.FileCID = c
			break
		}
	}
	for i := range out.Fields {
		out.Fields[i].Votes = nonNil(out.Fields[i].Votes)
	}
	return writeJSON(w, http.StatusOK, out)
}

// QRRequest is the body of POST /api/qr.
type QRRequest struct {
	Text string `json:"text"`
}

// maxQRText is what a QR code holds at its largest (version 40, low
// error correction, bytes).
const maxQRText = 2953

// handleQR draws text as a QR code in SVG: the page shows a pairing code
// as one without any script of its own or a third party. A POST, so the
// code (a secret) stays out of URLs, history and logs; it stores nothing.
func (s *Server) handleQR(w http.ResponseWriter, r *http.Request) error {
	var req QRRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		return err
	}
	if req.Text == "" || len(req.Text) > maxQRText {
		return badRequest("text: want 1 to %d bytes, got %d", maxQRText, len(req.Text))
	}
	q, err := qrcode.New(req.Text, qrcode.Low)
	if err != nil {
		return badRequest("text does not fit a QR code: %v", err)
	}
	h := w.Header()
	h.Set("Content-Type", "image/svg+xml")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(qrSVG(q.Bitmap()))
	return errWritten(err)
}

// qrSVG draws a QR bitmap (quiet zone included) as one path, a run of
// dark modules per subpath, black on white.
func qrSVG(bits [][]bool) []byte {
	n := strconv.Itoa(len(bits))
	var b bytes.Buffer
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ` + n + ` ` + n + `" shape-rendering="crispEdges">`)
	b.WriteString(`<rect width="` + n + `" height="` + n + `" fill="#fff"/><path fill="#000" d="`)
	for y, row := range bits {
		for x := 0; x < len(row); x++ {
			if !row[x] {
				continue
			}
			run := 1
			for x+run < len(row) && row[x+run] {
				run++
			}
			fmt.Fprintf(&b, "M%d %dh%dv1h-%dz", x, y, run, run)
			x += run - 1
		}
	}
	b.WriteString(`"/></svg>`)
	return b.Bytes()
}

func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request) error {
	var req JoinRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		return err
	}
	st, err := s.cfg.Node.Join(r.Context(), req.Code)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, st)
}

func (s *Server) handleJoinStatus(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, s.cfg.Node.JoinStatus())
}

// RecentEvent is one event of GET /api/events/files/recent.
type RecentEvent struct {
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// handleRecentFiles answers the newest file events (?limit=, default 50,
// at most store.MaxRecentEvents), oldest first: the owner's page shows
// them, then follows /api/events/files after the last id.
func (s *Server) handleRecentFiles(w http.ResponseWriter, r *http.Request) error {
	n := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > store.MaxRecentEvents {
			return badRequest("limit %q: want 1 to %d", v, store.MaxRecentEvents)
		}
	}
	evs, err := s.cfg.Store.RecentEvents(r.Context(), store.StreamFiles, n)
	if err != nil {
		return err
	}
	out := make([]RecentEvent, len(evs))
	for i, e := range evs {
		out[i] = RecentEvent{ID: e.ID, Type: e.Type, Data: e.Data}
	}
	return writeJSON(w, http.StatusOK, map[string]any{"events": out})
}
