package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	gocid "github.com/ipfs/go-cid"

	"github.com/metanode/metanode/store"
)

// FuzzRecordRef: any path segment is a rid (upper-cased), a canonical cid,
// or a 404 with the route's slug; one that parses as a cid but is written
// otherwise names its canonical form. Never a panic, never a 400.
func FuzzRecordRef(f *testing.F) {
	for _, s := range []string{"", "notacid", "01m8nmqw7wfacbmyjh8bwc5p7v", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ",
		"bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "BAFKREIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"zDshAvZb9YrVfHQJ74jzZCCgc23sjRDnXHYWZmoYfUsvFS1DSo6c", "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", "f01", "u",
		"bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		for _, kind := range []refKind{cidOnly, ridOrCID} {
			ref, err := recordRef(h, kind)
			if err == nil {
				if !(kind == ridOrCID && store.IsRID(ref)) && store.CheckCID(ref) != nil {
					t.Fatalf("%q → %q: neither a rid nor a canonical cid", h, ref)
				}
				continue
			}
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("%q: unexpected %v", h, err)
			}
			for _, slug := range []string{SlugUnknownCID, SlugUnknownRoot} {
				if e := errorFor(refError(err, slug)); e.Status != http.StatusNotFound || e.Slug != slug {
					t.Fatalf("%q: %d %s, want 404 %s", h, e.Status, e.Slug, slug)
				}
			}
			c, perr := gocid.Decode(h)
			if perr != nil || c.String() == h {
				continue
			}
			_, canon, ok := strings.Cut(err.Error(), "the canonical form is ")
			if !ok {
				t.Fatalf("%q: %v does not name the canonical form", h, err)
			}
			if canon = strings.Trim(canon, `"`); canon != c.String() {
				t.Fatalf("%q: the hint %q is not %q", h, canon, c.String())
			}
		}
	})
}

// FuzzDescribeJSON: whatever the body, a refused one is a 400 whose
// message never names Go's types.
func FuzzDescribeJSON(f *testing.F) {
	for _, s := range []string{`{"limit":"x"}`, `{"limit":1e999}`, `{"filters":[{"values":[1]}]}`, `{"filters":{}}`,
		`{"hashId":[]}`, `{"query":`, `{"exact":true}`, `{"offset":-99999999999999999999}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req SearchRequest
		err := decodeJSON(body, &req)
		if err == nil {
			return
		}
		e := errorFor(err)
		if e.Status != http.StatusBadRequest {
			t.Fatalf("%q: %d", body, e.Status)
		}
		for _, g := range []string{"Go ", "api.", "of type", "SearchRequest", "SearchFilter"} {
			if strings.Contains(e.Message, g) {
				t.Fatalf("%q: message %q names %q", body, e.Message, g)
			}
		}
	})
}
