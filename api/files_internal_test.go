package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzZeroSuffix: for a file of at least one byte, every Range header
// that makes http.ServeContent answer 206 with an empty range (its
// Content-Range "bytes <size>-<size-1>/<size>", golang/go#81262) is one
// hasZeroSuffix catches, and a header it catches never selects bytes of a
// one-range answer. (An empty file answers any suffix range "bytes
// 0--1/0"; only "-0" of those is refused, see docs/http.md.)
func FuzzZeroSuffix(f *testing.F) {
	for _, s := range []string{"bytes=-0", "bytes=-1", "bytes= -000", "bytes=- 0", "bytes=-+0", "bytes=0-1,-0", "bytes=-0,-0",
		"bytes=-00000000000000000000", "bytes=--0", "bytes=-0x0", "bytes=5-", "bytes=,-0,", "Bytes=-0", "bytes=\t-0\t", "bytes=-0\n"} {
		f.Add(s, uint8(20))
		f.Add(s, uint8(1))
	}
	f.Fuzz(func(t *testing.T, rg string, size uint8) {
		size = max(size, 1)
		r := httptest.NewRequest(http.MethodGet, "/f", nil)
		r.Header.Set("Range", rg)
		w := httptest.NewRecorder()
		http.ServeContent(w, r, "f", time.Unix(0, 0), strings.NewReader(strings.Repeat("x", int(size))))
		cr := w.Header().Get("Content-Range")
		if w.Code != http.StatusPartialContent || cr == "" { // several ranges: multipart, not checked here
			return
		}
		var first, last, n int64
		if _, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &first, &last, &n); err != nil {
			t.Fatalf("%q: Content-Range %q: %v", rg, cr, err)
		}
		if empty := last < first; empty != hasZeroSuffix(rg) {
			t.Fatalf("%q (size %d): Content-Range %q, hasZeroSuffix %v", rg, size, cr, hasZeroSuffix(rg))
		}
	})
}
