package api

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzEncodeMeta checks the hand-written encoders against encoding/json.
func FuzzEncodeMeta(f *testing.F) {
	f.Add("bafk", "01J2", "title", "Inception", "a\"b\\c\n\t\x00\x1f<>&\u2028\u2029\xff\xfe", "/files/a.mkv")
	f.Add("", "", "", "", "", "")
	f.Add("\xc3", "é", "k\x7f", "\b\f\r", "日本", "\xed\xa0\x80")
	f.Fuzz(func(t *testing.T, cid, rid, k, v, v2, path string) {
		m := MetaResponse{CID: cid, RID: rid, Metadata: map[string]string{k: v, k + "/2": v2, v2: k},
			CIDs: []string{cid, v}, CanonicalCID: v2, Duplicates: []string{path}}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
		if got := m.appendJSON(nil); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("meta:\n got %s\nwant %s", got, want.Bytes())
		}
		m.CIDs, m.Duplicates, m.Metadata = nil, []string{}, nil
		want.Reset()
		_ = enc.Encode(m)
		if got := m.appendJSON(nil); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("meta with nils:\n got %s\nwant %s", got, want.Bytes())
		}
		r := RecordResponse{HashID: rid, Metadata: map[string]string{k: v, v: v2}}
		want.Reset()
		_ = enc.Encode(r)
		if got := r.appendJSON(nil); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("record:\n got %s\nwant %s", got, want.Bytes())
		}
	})
}
