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
// Content-Range "bytes <size>-<size-1>/<size>", golang/go#81262) has a
// spec dropZeroSuffixes drops; a header that is nothing but such specs
// never selects bytes of a one-range answer; and what is left of a header
// beside them never gives that empty answer. (An empty file answers any
// suffix range "bytes 0--1/0"; only "-0" of those is refused, see
// docs/http.md.)
func FuzzZeroSuffix(f *testing.F) {
	for _, s := range []string{"bytes=-0", "bytes=-1", "bytes= -000", "bytes=- 0", "bytes=-+0", "bytes=0-1,-0", "bytes=-0,-0",
		"bytes=-00000000000000000000", "bytes=--0", "bytes=-0x0", "bytes=5-", "bytes=,-0,", "Bytes=-0", "bytes=\t-0\t", "bytes=-0\n",
		"bytes=-0,0-1,-0", "bytes=0-0,-0,5-"} {
		f.Add(s, uint8(20))
		f.Add(s, uint8(1))
	}
	f.Fuzz(func(t *testing.T, rg string, size uint8) {
		size = max(size, 1)
		rest, dropped := dropZeroSuffixes(rg)
		empty, one := serveRange(t, rg, size)
		if one && empty && !dropped {
			t.Fatalf("%q (size %d): an empty range, and no spec dropped", rg, size)
		}
		if one && !empty && dropped && rest == "" {
			t.Fatalf("%q (size %d): every spec dropped, yet it selects bytes", rg, size)
		}
		if dropped && rest != "" {
			if empty, one := serveRange(t, rest, size); one && empty {
				t.Fatalf("%q (size %d): what is left, %q, still answers an empty range", rg, size, rest)
			}
		}
	})
}

// serveRange asks http.ServeContent for rg of a file of size bytes; one
// says it answered 206 with one range, empty that the range is empty.
func serveRange(t *testing.T, rg string, size uint8) (empty, one bool) {
	r := httptest.NewRequest(http.MethodGet, "/f", nil)
	r.Header.Set("Range", rg)
	w := httptest.NewRecorder()
	http.ServeContent(w, r, "f", time.Unix(0, 0), strings.NewReader(strings.Repeat("x", int(size))))
	cr := w.Header().Get("Content-Range")
	if w.Code != http.StatusPartialContent || cr == "" { // several ranges: multipart, not checked here
		return false, false
	}
	var first, last, n int64
	if _, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &first, &last, &n); err != nil {
		t.Fatalf("%q: Content-Range %q: %v", rg, cr, err)
	}
	return last < first, true
}
