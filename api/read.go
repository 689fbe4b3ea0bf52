package api

import (
	"cmp"
	"errors"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/metanode/metanode/store"
)

// MetaResponse is the answer of GET /api/meta/{cid}.
type MetaResponse struct {
	CID          string            `json:"cid"`
	RID          string            `json:"rid"`
	Metadata     map[string]string `json:"metadata"`
	CIDs         []string          `json:"cids"`
	CanonicalCID string            `json:"canonical_cid"`
	Duplicates   []string          `json:"duplicates"` // local paths of the content besides filePath
}

// RecordResponse is the answer of GET /meta/{h} and GET /api/metadata/{rid}.
type RecordResponse struct {
	HashID   string            `json:"hashId"`
	Metadata map[string]string `json:"metadata"`
}

// HashIDsResponse is the answer of GET /meta and GET /api/metadata/hash-ids.
type HashIDsResponse struct {
	HashIDs []string `json:"hashIds"`
	Count   int      `json:"count"`
}

// ListItem is one row of GET /api/metadata/list.
type ListItem struct {
	HashID   string `json:"hashId"`
	Title    string `json:"title,omitempty"`
	FileName string `json:"fileName,omitempty"`
	FilePath string `json:"filePath,omitempty"`
	Type     string `json:"type,omitempty"`
	Year     string `json:"year,omitempty"`
}

// ListResponse is the answer of GET /api/metadata/list.
type ListResponse struct {
	Items []ListItem `json:"items"`
	Count int        `json:"count"`
	Total int        `json:"total"`
}

// SearchRequest is the body of POST /api/metadata/search. HashID, Property
// and PropertyValue are upstream's older forms, still honoured.
type SearchRequest struct {
	Query         string         `json:"query,omitempty"`
	Filters       []SearchFilter `json:"filters,omitempty"`
	Limit         int            `json:"limit,omitempty"`
	Offset        int            `json:"offset,omitempty"`
	HashID        string         `json:"hashId,omitempty"`
	Property      string         `json:"property,omitempty"`
	PropertyValue string         `json:"propertyValue,omitempty"`
}

// SearchFilter constrains one property: values OR together, filters AND.
type SearchFilter struct {
	Property string   `json:"property"`
	Values   []string `json:"values"`
	Exact    bool     `json:"exact,omitempty"`
}

// SearchHit is one result of POST /api/metadata/search.
type SearchHit struct {
	HashID   string            `json:"hashId"`
	Metadata map[string]string `json:"metadata"`
}

// SearchResponse is the answer of POST /api/metadata/search.
type SearchResponse struct {
	Results []SearchHit `json:"results"`
	Count   int         `json:"count"`
	Total   int         `json:"total"` // number of hits
}

// SchemaResponse is the answer of GET /api/schema.
type SchemaResponse struct {
	Fields map[string]store.SchemaField `json:"fields"`
}

// WebDAVPrefix is where the files root is served over WebDAV.
const WebDAVPrefix = "/webdav"

// URLs is the answer of GET /urls. RedisURL is always empty: consumers
// refuse a node that advertises one.
type URLs struct {
	Hostname          string `json:"hostname"`
	BaseURL           string `json:"baseUrl"`
	APIURL            string `json:"apiUrl"`
	RedisURL          string `json:"redisUrl"`
	WebDAVURL         string `json:"webdavUrl"`
	WebDAVURLInternal string `json:"webdavUrlInternal"`
}

// HealthResponse is the answer of GET /health: always 200 (the envelope is
// for errors), the status says whether the node is degraded.
type HealthResponse struct {
	Health
	Timestamp time.Time `json:"timestamp"`
}

func (s *Server) handleMeta(w http.ResponseWriter, r *http.Request) error {
	cid := lookupRef(r.PathValue("cid"), ridOrCID)
	var q url.Values
	if r.URL.RawQuery != "" { // the hot path has none: skip the parse
		q = r.URL.Query()
	}
	as, err := asParam(q.Get("as"))
	if err != nil {
		return err
	}
	var rec store.Record
	// A rid is minted locally and never leaves the node: no peer can know one.
	if truthy(q.Get("remote")) && !store.IsRID(cid) {
		// Checked before the swarm is asked: no peer can know what is not
		// a canonical cid.
		if _, err := recordRef(cid, ridOrCID); err != nil {
			return refError(err, SlugUnknownCID)
		}
		rec, err = s.cfg.Node.RemoteRecord(r.Context(), cid, as)
	} else {
		rec, err = s.cfg.Store.Record(r.Context(), cid, as)
	}
	if err != nil {
		return missError(cid, ridOrCID, err, SlugUnknownCID)
	}
	if store.IsRID(cid) {
		// Asked by rid (the CLI does): cid names the record's canonical
		// cid, never the rid, so the field always holds a cid.
		cid = rec.CanonicalCID
	}
	m := metaResponse(cid, rec)
	return writeAppender(w, m.appendJSON)
}

// writeAppender writes the answer an appendJSON method builds, in a pooled
// buffer.
func writeAppender(w http.ResponseWriter, appendJSON func([]byte) []byte) error {
	bp := slicePool.Get().(*[]byte)
	b := appendJSON((*bp)[:0])
	err := writeRaw(w, b)
	if cap(b) <= 1<<20 { // do not keep the odd huge answer alive
		*bp = b
		slicePool.Put(bp)
	}
	return err
}

var slicePool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func metaResponse(cid string, rec store.Record) MetaResponse {
	dups := make([]string, 0, len(rec.Paths))
	primary := rec.Fields["filePath"]
	for _, p := range rec.Paths {
		if p != primary {
			dups = append(dups, p)
		}
	}
	return MetaResponse{
		CID: cid, RID: rec.RID,
		Metadata:     nonNilMap(rec.Fields),
		CIDs:         nonNil(rec.CIDs),
		CanonicalCID: rec.CanonicalCID,
		Duplicates:   dups,
	}
}

func (s *Server) handleMetadata(w http.ResponseWriter, r *http.Request) error {
	return s.writeRecord(w, r, r.PathValue("rid"))
}

func (s *Server) handleMetaRoot(w http.ResponseWriter, r *http.Request) error {
	return s.writeRecord(w, r, r.PathValue("h"))
}

func (s *Server) writeRecord(w http.ResponseWriter, r *http.Request, h string) error {
	h = lookupRef(h, ridOrCID)
	rec, err := s.cfg.Store.Record(r.Context(), h, "")
	if err != nil {
		return missError(h, ridOrCID, err, SlugUnknownRoot)
	}
	out := RecordResponse{HashID: rec.RID, Metadata: nonNilMap(rec.Fields)}
	return writeAppender(w, out.appendJSON)
}

// handleMetaField answers the merged value as text/plain, as consumers
// (meta-fuse, meta-stremio) read single properties.
func (s *Server) handleMetaField(w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("key")
	if key == "" {
		return s.handleMetaRoot(w, r)
	}
	h := lookupRef(r.PathValue("h"), ridOrCID)
	v, err := s.cfg.Store.Field(r.Context(), h, key)
	if err != nil {
		return missError(h, ridOrCID, err, SlugUnknownRoot)
	}
	if v == "" { // upstream: an empty property is absent
		return errorf(http.StatusNotFound, "%s has no %q", r.PathValue("h"), key)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(v)))
	w.WriteHeader(http.StatusOK)
	_, err = w.Write([]byte(v))
	return errWritten(err)
}

func (s *Server) handleHashIDs(w http.ResponseWriter, r *http.Request) error {
	rids, err := s.cfg.Store.RIDs(r.Context())
	if err != nil {
		return err
	}
	rids = nonNil(rids)
	return writeJSON(w, http.StatusOK, HashIDsResponse{HashIDs: rids, Count: len(rids)})
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	offset, err := intParam(q.Get("offset"), 0, "offset")
	if err != nil {
		return err
	}
	limit, err := intParam(q.Get("limit"), defaultPage, "limit")
	if err != nil {
		return err
	}
	if limit == 0 { // upstream: a limit that is not positive is the default
		limit = defaultPage
	}
	limit = min(limit, maxSearchLimit)
	items, total, err := s.cfg.Store.List(r.Context(), offset, limit)
	if err != nil {
		return err
	}
	out := ListResponse{Items: make([]ListItem, len(items)), Count: len(items), Total: total}
	for i, it := range items {
		out.Items[i] = ListItem{HashID: it.RID, Title: it.Title, FileName: it.FileName,
			FilePath: it.FilePath, Type: it.Type, Year: it.Year}
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) error {
	var req SearchRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		return err
	}
	if req.Offset < 0 || req.Limit < 0 {
		return badRequest("offset and limit must not be negative")
	}
	if req.HashID != "" { // an exact read, as upstream
		if up := strings.ToUpper(req.HashID); store.IsRID(up) {
			req.HashID = up
		}
		out := SearchResponse{Results: []SearchHit{}}
		rec, err := s.cfg.Store.Record(r.Context(), req.HashID, "")
		switch {
		case err == nil:
			out.Results = append(out.Results, SearchHit{HashID: rec.RID, Metadata: nonNilMap(rec.Fields)})
			out.Count, out.Total = 1, 1
		case !isNotFound(err):
			return err
		}
		return writeJSON(w, http.StatusOK, out)
	}
	q := store.SearchQuery{Query: req.Query, Offset: req.Offset, Limit: min(req.Limit, maxSearchLimit)}
	for _, f := range req.Filters {
		q.Filters = append(q.Filters, store.SearchFilter{Property: f.Property, Values: f.Values, Exact: f.Exact})
	}
	if req.Property != "" && req.PropertyValue != "" {
		q.Filters = append(q.Filters, store.SearchFilter{Property: req.Property, Values: []string{req.PropertyValue}})
	}
	// The answer is encoded while the search holds its slot (its work
	// counts in the search's budget) and written after.
	b := append(make([]byte, 0, 4096), `{"results":[`...)
	count := 0
	total, err := s.cfg.Store.SearchEach(r.Context(), q, func(rid string, fields []store.Field) error {
		if count > 0 {
			b = append(b, ',')
		}
		count++
		b = appendSearchHit(b, rid, fields)
		return nil
	})
	if err != nil {
		return err
	}
	b = append(b, `],"count":`...)
	b = strconv.AppendInt(b, int64(count), 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	return writeRaw(w, append(b, '}', '\n'))
}

func (s *Server) handleSchema(w http.ResponseWriter, r *http.Request) error {
	fields, err := s.cfg.Store.Schema(r.Context())
	if err != nil {
		return err
	}
	if fields == nil {
		fields = map[string]store.SchemaField{}
	}
	return writeJSON(w, http.StatusOK, SchemaResponse{Fields: fields})
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) error {
	st, err := s.cfg.Store.Stats(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) error {
	h := s.cfg.Node.Health(r.Context())
	if h.Status == "" {
		h.Status = "ok"
	}
	return writeJSON(w, http.StatusOK, HealthResponse{Health: h, Timestamp: time.Now().UTC()})
}

func (s *Server) handleURLs(w http.ResponseWriter, r *http.Request) error {
	host, _ := os.Hostname()
	_, port, _ := net.SplitHostPort(s.URL()[len("http://"):])
	return writeJSON(w, http.StatusOK, NewURLs(host, "http://"+r.Host, s.cfg.BaseURL, port, s.webdav != nil))
}

func (s *Server) handleNeighbors(w http.ResponseWriter, r *http.Request) error {
	out := s.cfg.Node.Neighbors(truthy(r.URL.Query().Get("all")))
	out.Neighbors = nonNil(out.Neighbors)
	out.Count = len(out.Neighbors)
	return writeJSON(w, http.StatusOK, out)
}

// NewURLs is the /urls block of a node (the beacon's data.urls and the
// leader file say the same): apiURL is where the consumer reaches the
// API, baseURL the external URL when one is set (else apiURL). With a
// files root, webdavUrl is the base URL's /webdav and webdavUrlInternal
// the host name's on the API's own port, which a container on the same
// network (a compose service named as the host) reaches directly.
// redisUrl stays empty: consumers refuse a node that advertises one.
func NewURLs(hostname, apiURL, baseURL, port string, webdav bool) URLs {
	base := strings.TrimSuffix(cmp.Or(baseURL, apiURL), "/")
	u := URLs{Hostname: hostname, BaseURL: base, APIURL: apiURL}
	if webdav {
		u.WebDAVURL = base + WebDAVPrefix
		if hostname != "" && port != "" {
			u.WebDAVURLInternal = "http://" + net.JoinHostPort(hostname, port) + WebDAVPrefix
		}
	}
	return u
}

// ---- small helpers ----

func truthy(v string) bool {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// asParam validates ?as=<uid>.
func asParam(as string) (string, error) {
	if as == "" {
		return "", nil
	}
	if err := store.CheckUID(as); err != nil {
		return "", err
	}
	return as, nil
}

func intParam(v string, def int, name string) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(v, "-") {
		return 0, badRequest("%s %s is out of range (at most %d)", name, v, math.MaxInt)
	}
	if err != nil || n < 0 {
		return 0, badRequest("%s must be a non-negative integer, not %q", name, v)
	}
	return n, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
