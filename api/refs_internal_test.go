package api

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/metanode/metanode/store"
)

// FuzzRecordRef: any path segment is a rid (upper-cased), a canonical cid,
// a 400 bad_cid that names a canonical form, or a 404; never a panic.
func FuzzRecordRef(f *testing.F) {
	for _, s := range []string{"", "notacid", "01m8nmqw7wfacbmyjh8bwc5p7v", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ",
		"bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "BAFKREIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"zDshAvZb9YrVfHQJ74jzZCCgc23sjRDnXHYWZmoYfUsvFS1DSo6c", "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", "f01", "u"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		for _, kind := range []refKind{cidOnly, ridOrCID} {
			ref, err := recordRef(h, kind)
			switch {
			case err == nil:
				if !(kind == ridOrCID && store.IsRID(ref)) && store.CheckCID(ref) != nil {
					t.Fatalf("%q → %q: neither a rid nor a canonical cid", h, ref)
				}
			case errors.Is(err, store.ErrNotFound):
				if e := errorFor(refError(err, SlugUnknownCID)); e.Status != http.StatusNotFound {
					t.Fatalf("%q: %d", h, e.Status)
				}
			case errors.Is(err, store.ErrBadCID):
				if e := errorFor(refError(err, SlugUnknownCID)); e.Status != http.StatusBadRequest || e.Slug != "bad_cid" {
					t.Fatalf("%q: %d %s", h, e.Status, e.Slug)
				}
				if _, canon, ok := strings.Cut(err.Error(), `write "`); ok {
					if canon = strings.TrimSuffix(canon, `"`); store.CheckCID(canon) != nil {
						t.Fatalf("%q: the hint %q is not canonical", h, canon)
					}
				}
			default:
				t.Fatalf("%q: unexpected %v", h, err)
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
