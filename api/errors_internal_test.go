package api

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"testing"

	"github.com/metanode/metanode/store"
)

func TestErrorFor(t *testing.T) {
	for _, tc := range []struct {
		err       error
		status    int
		slug      string
		retryable bool
	}{
		{fmt.Errorf("x: %w", store.ErrNotFound), 404, "unknown_cid", false},
		{notFoundAs(store.ErrNotFound, SlugUnknownRoot), 404, "unknown_root", false},
		{fs.ErrNotExist, 404, "unknown_root", false},
		{store.ErrBadSignature, 400, "bad_signature", false},
		{store.ErrBadUID, 400, "bad_uid", false},
		{store.ErrBadCID, 400, "bad_cid", false},
		{store.ErrBadKey, 400, "bad_key", false},
		{store.ErrDeprecatedField, 400, "deprecated_field", false},
		{store.ErrReservedKey, 400, "reserved_key", false},
		{store.ErrFutureTimestamp, 400, "future_timestamp", false},
		{store.ErrUntrusted, 400, "untrusted_signer", false},
		{store.ErrMalformed, 400, "schema_violation", false},
		{store.ErrReservedKV, 400, "schema_violation", false},
		{store.ErrBadPath, 400, "schema_violation", false},
		{store.ErrTooLarge, 413, "too_large", false},
		{&http.MaxBytesError{Limit: 10}, 413, "too_large", false},
		{store.ErrClosed, 503, "storage_unavailable", true},
		{store.ErrUnavailable, 503, "storage_unavailable", true},
		{errors.New("disk on fire"), 500, "internal", true},
		{errorf(http.StatusGone, "gone"), 410, "gone", false},
	} {
		e := errorFor(tc.err)
		if e.Status != tc.status || e.Slug != tc.slug || e.Retryable != tc.retryable {
			t.Errorf("errorFor(%v) = %d %s retryable=%v, want %d %s %v", tc.err, e.Status, e.Slug, e.Retryable, tc.status, tc.slug, tc.retryable)
		}
	}
}

func TestError_Is(t *testing.T) {
	e := &Error{Status: 404, Slug: "unknown_root"}
	if !errors.Is(e, store.ErrNotFound) {
		t.Error("a 404 is not store.ErrNotFound")
	}
	if !errors.Is(&Error{Status: 400, Slug: "bad_uid"}, store.ErrBadUID) {
		t.Error("bad_uid is not store.ErrBadUID")
	}
	if errors.Is(&Error{Status: 400, Slug: "bad_uid"}, store.ErrNotFound) {
		t.Error("a 400 matched store.ErrNotFound")
	}
}

func TestPluginRelPath(t *testing.T) {
	for p, want := range map[string]string{
		"plugin/a": "plugin/a", "plugin/tmdb/poster.jpg": "plugin/tmdb/poster.jpg", "plugin/a b/c..d": "plugin/a b/c..d",
		// Upstream's normalisation: one leading "/", space, path.Clean.
		"/plugin/a": "plugin/a", "plugin//a": "plugin/a", "plugin/./a": "plugin/a", "plugin/a/": "plugin/a", " plugin/a\t": "plugin/a", "./plugin/a": "plugin/a",
	} {
		if got, err := pluginRelPath(p); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", p, got, err, want)
		}
	}
	for _, p := range []string{
		"", " ", "/", "plugin", "plugin/", "plugin/.", "plugin/../x", "plugin/a/../b", "plugin/a/../../etc/passwd", "../plugin/a",
		"/etc/passwd", "//plugin/a", "watch/a", "plugin\\a", "plugin/a\x00b", "plugins/a", "plugin/..", "/plugin",
	} {
		if got, err := pluginRelPath(p); err == nil {
			t.Errorf("%q accepted as %q", p, got)
		}
	}
}
