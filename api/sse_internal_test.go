package api

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/metanode/metanode/store"
)

func TestAppendFrame(t *testing.T) {
	for _, tc := range []struct {
		name, id, typ, data, want string
	}{
		{"Event", "1732900000000-0000000042", "set", `{"type":"set","key":"file:R/title","ts":"1"}`,
			"id: 1732900000000-0000000042\nevent: set\ndata: {\"type\":\"set\",\"key\":\"file:R/title\",\"ts\":\"1\"}\n\n"},
		{"NoID", "", "gap", `{"requested":"1-1"}`, "event: gap\ndata: {\"requested\":\"1-1\"}\n\n"},
		{"NoType", "1-1", "", `{}`, "id: 1-1\nevent: message\ndata: {}\n\n"},
		{"MultiLine", "", "x", "{\n\"a\":1\r\n}", "event: x\ndata: {\ndata: \"a\":1\ndata: }\n\n"},
		{"ForgedID", "1\n\nevent: evil", "set\r\ndata: x", "{}", "id: 1event: evil\nevent: setdata: x\ndata: {}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(appendFrame(nil, tc.id, tc.typ, []byte(tc.data))); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzSSE checks that any event survives a frame round trip (the reader
// gives back what the writer was given, line breaks normalised) and that
// the reader never fails on garbage.
func FuzzSSE(f *testing.F) {
	f.Add("1732900000000-0000000042", "set", []byte(`{"type":"set","key":"file:R/title","ts":"1"}`))
	f.Add("", "gap", []byte(`{"requested":"1-1","resumeFrom":"2-2","reason":"retention"}`))
	f.Add("x", "", []byte("a\r\nb\rc\n"))
	f.Add(":", ":keep-alive", []byte(":keep-alive\n\n"))
	f.Add("id: 1", "event", []byte{})
	f.Fuzz(func(t *testing.T, id, typ string, data []byte) {
		frame := appendFrame(nil, id, typ, data)
		var got []store.Event
		err := ReadEvents(bytes.NewReader(frame), func(ev store.Event) error {
			got = append(got, ev)
			return nil
		})
		if !errors.Is(err, io.EOF) {
			t.Fatalf("ReadEvents: %v", err)
		}
		if len(got) != 1 {
			t.Fatalf("got %d events from %q, want 1", len(got), frame)
		}
		strip := strings.NewReplacer("\r", "", "\n", "")
		wantID, wantType := strip.Replace(id), strip.Replace(typ)
		if wantType == "" {
			wantType = "message"
		}
		wantData := strings.ReplaceAll(strings.ReplaceAll(string(data), "\r\n", "\n"), "\r", "\n")
		if got[0].ID != wantID || got[0].Type != wantType || string(got[0].Data) != wantData {
			t.Errorf("round trip of (%q, %q, %q) gave (%q, %q, %q)", id, typ, data, got[0].ID, got[0].Type, got[0].Data)
		}
		// Garbage: the reader must not panic or loop.
		_ = ReadEvents(bytes.NewReader(data), func(store.Event) error { return nil })
	})
}
