package api

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// KVValue is the answer of GET and PUT /api/kv/value.
type KVValue struct {
	Key    string `json:"key"`
	Type   string `json:"type"` // always "string"
	Value  string `json:"value"`
	Exists bool   `json:"exists"`
}

// KVDeleted is the answer of DELETE /api/kv/value.
type KVDeleted struct {
	Key     string `json:"key"`
	Deleted bool   `json:"deleted"`
}

// ClearResponse is the answer of POST /api/metadata/clear.
type ClearResponse struct {
	Status       string `json:"status"`
	Message      string `json:"message"`
	DeletedCount int    `json:"deletedCount"`
}

type kvPutBody struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

func (s *Server) handleKVPut(w http.ResponseWriter, r *http.Request) error {
	var b kvPutBody
	if err := decodeBody(w, r, maxSmallBody, &b); err != nil {
		return err
	}
	if b.Key == "" {
		return badRequest("key is required")
	}
	var v string
	// null would decode as "" and store it: refused like a missing value.
	if len(b.Value) == 0 || bytes.Equal(b.Value, []byte("null")) || json.Unmarshal(b.Value, &v) != nil {
		return badRequest("value must be a string")
	}
	if err := s.cfg.Store.KVPut(r.Context(), b.Key, v); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, KVValue{Key: b.Key, Type: "string", Value: v, Exists: true})
}

func (s *Server) handleKVGet(w http.ResponseWriter, r *http.Request) error {
	key := r.URL.Query().Get("key")
	if key == "" {
		return badRequest("key is required")
	}
	v, ok, err := s.cfg.Store.KVGet(r.Context(), key)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, KVValue{Key: key, Type: "string", Value: v, Exists: ok})
}

func (s *Server) handleKVDelete(w http.ResponseWriter, r *http.Request) error {
	key := r.URL.Query().Get("key")
	if key == "" {
		return badRequest("key is required")
	}
	ok, err := s.cfg.Store.KVDelete(r.Context(), key)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, KVDeleted{Key: key, Deleted: ok})
}

func (s *Server) handleClear(w http.ResponseWriter, r *http.Request) error {
	n, err := s.cfg.Store.Clear(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ClearResponse{Status: "ok", Message: "both databases wiped", DeletedCount: n})
}
