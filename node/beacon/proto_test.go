package beacon

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in string
		want     error
	}{
		{"probe", `{"proto":"beacon","v":2,"type":"probe","from":"x","want":["metamesh.core"]}`, nil},
		{"advertise", `{"proto":"beacon","v":2,"type":"advertise","node":{"name":"meta-sort","instance":"a"},"resources":[]}`, nil},
		{"bye", `{"proto":"beacon","v":2,"type":"bye","node":{"name":"meta-sort","instance":"a"}}`, nil},
		{"v1", `{"proto":"beacon","v":1,"type":"announce"}`, ErrNotBeacon},
		{"discovery v1", `{"type":"discovery","name":"meta-sort"}`, ErrNotBeacon},
		{"no node", `{"proto":"beacon","v":2,"type":"advertise"}`, ErrNotBeacon},
		{"no instance", `{"proto":"beacon","v":2,"type":"bye","node":{"name":"x"}}`, ErrNotBeacon},
		{"unknown type", `{"proto":"beacon","v":2,"type":"shout"}`, ErrNotBeacon},
		{"garbage", "hello \x00\xff", ErrNotBeacon},
		{"array", `[1,2]`, ErrNotBeacon},
		{"two objects", `{"proto":"beacon","v":2,"type":"probe"}{}`, ErrNotBeacon},
		{"wrong types", `{"proto":"beacon","v":"2","type":"probe"}`, ErrNotBeacon},
		{"oversized", `{"proto":"beacon","v":2,"type":"probe","from":"` + strings.Repeat("x", MaxDatagram) + `"}`, ErrOversized},
	} {
		_, err := Parse([]byte(c.in))
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestCapMatches(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pattern, cap string
		want         bool
	}{
		{"*", "anything", true},
		{"metamesh.core", "metamesh.core", true},
		{"metamesh.core", "metamesh.corex", false},
		{"metamesh.service/*", "metamesh.service/meta-sort", true},
		{"metamesh.service/*", "metamesh.service/", false},
		{"metamesh.service/*", "metamesh.services/x", false},
		{"metamesh.transport/nzb@1", "metamesh.transport/nzb@1", true},
		{"metamesh.transport/nzb@1", "metamesh.transport/nzb@2", false},
		{"metamesh.transport/nzb@1", "metamesh.transport/nzb", false},
		{"metamesh.transport/nzb", "metamesh.transport/nzb@2", true},
		{"metamesh.transport/*@1", "metamesh.transport/nzb@1", true},
	} {
		if got := CapMatches(c.pattern, c.cap); got != c.want {
			t.Errorf("CapMatches(%q, %q) = %v", c.pattern, c.cap, got)
		}
	}
}

// FuzzParse: no datagram crashes the decoder, and what it accepts is a
// well-formed beacon v2 message.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"proto":"beacon","v":2,"type":"probe","want":["*"]}`))
	f.Add([]byte(`{"proto":"beacon","v":2,"type":"advertise","node":{"name":"n","instance":"i"},"resources":[{"id":"r","caps":["metamesh.core"],"data":{"urls":{}}}]}`))
	f.Add([]byte(`{"proto":"beacon","v":2,"type":"bye","node":{"name":"n","instance":"i"}}`))
	f.Add([]byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		if m.Proto != Proto || m.V != Version {
			t.Fatalf("accepted %q", b)
		}
		if m.Type != TypeProbe && (m.Node == nil || m.Node.Instance == "") {
			t.Fatalf("accepted a %s without a node: %q", m.Type, b)
		}
		if _, err := json.Marshal(m); err != nil {
			t.Fatal(err)
		}
	})
}
