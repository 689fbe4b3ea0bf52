package beacon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The protocol's fixed values.
const (
	Proto   = "beacon" // every v2 datagram's "proto"
	Version = 2        // and its "v"

	DefaultGroup = "239.255.99.1:9099"

	// MaxDatagram is the largest datagram sent or taken: under a LAN's
	// 1,500-byte MTU, so nothing fragments.
	MaxDatagram = 1400

	TypeProbe     = "probe"
	TypeAdvertise = "advertise"
	TypeBye       = "bye"

	// CapCore is the metadata core's capability; its resource's data.urls
	// is the core's /urls block.
	CapCore = "metamesh.core"
	// CapAnyService matches every service's capability
	// (metamesh.service/<name>).
	CapAnyService = "metamesh.service/*"
)

// NodeInfo says who sends a datagram.
type NodeInfo struct {
	Name     string `json:"name"`
	Instance string `json:"instance"`
	Version  string `json:"version,omitempty"`
	Status   string `json:"status,omitempty"` // "starting" or "running"; absent reads as running
}

// Resource is one advertised thing with its capabilities. An endpoint
// starting with "/" is relative to endpoints.http.
type Resource struct {
	ID        string            `json:"id"`
	Caps      []string          `json:"caps"`
	Endpoints map[string]string `json:"endpoints,omitempty"`
	Rev       string            `json:"rev,omitempty"`
	Binds     string            `json:"binds,omitempty"`
	Data      json.RawMessage   `json:"data,omitempty"`
}

// Message is every beacon v2 datagram. From and Want are a probe's.
type Message struct {
	Proto     string     `json:"proto"`
	V         int        `json:"v"`
	Type      string     `json:"type"`
	Node      *NodeInfo  `json:"node,omitempty"`
	Resources []Resource `json:"resources,omitempty"`
	From      string     `json:"from,omitempty"`
	Want      []string   `json:"want,omitempty"`
}

// Neighbor is a node heard on the wire, as GET /neighbors lists it.
type Neighbor struct {
	NodeInfo
	Resources []Resource `json:"resources"`
	Caps      []string   `json:"caps"`              // every resource's, once each
	BaseURL   string     `json:"baseUrl,omitempty"` // a service resource's endpoints.ui
	Addr      string     `json:"addr"`              // the datagram's source address, never a payload claim
	LastSeen  float64    `json:"lastSeen"`          // unix seconds
}

// Errors of Parse: the reason a datagram changed nothing.
var (
	ErrOversized = errors.New("beacon: datagram over 1400 bytes")
	ErrNotBeacon = errors.New("beacon: not a beacon v2 datagram")
)

// Parse decodes one datagram. Anything but a well-formed beacon v2 probe,
// advertise or bye (a v1 announce, another version, an advertise without a
// node, junk) is ErrNotBeacon, and a datagram over MaxDatagram bytes
// ErrOversized, unread.
func Parse(b []byte) (Message, error) {
	var m Message
	if len(b) > MaxDatagram {
		return m, fmt.Errorf("%w (%d bytes)", ErrOversized, len(b))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("%w: %v", ErrNotBeacon, err)
	}
	if dec.More() {
		return m, fmt.Errorf("%w: data after the JSON object", ErrNotBeacon)
	}
	if m.Proto != Proto || m.V != Version {
		return m, fmt.Errorf("%w: proto %q v %d", ErrNotBeacon, m.Proto, m.V)
	}
	switch m.Type {
	case TypeProbe:
		return m, nil
	case TypeAdvertise, TypeBye:
		if m.Node == nil || m.Node.Name == "" || m.Node.Instance == "" {
			return m, fmt.Errorf("%w: %s without a node name and instance", ErrNotBeacon, m.Type)
		}
		return m, nil
	}
	return m, fmt.Errorf("%w: type %q", ErrNotBeacon, m.Type)
}

// CapMatches reports whether capability c satisfies pattern: "*" matches
// everything; an "@N" contract on the pattern must equal c's (none on the
// pattern ignores it); "x/*" matches any variant x/y; otherwise the bases
// are equal.
func CapMatches(pattern, c string) bool {
	if pattern == "*" {
		return true
	}
	pbase, pcontract, phas := cutContract(pattern)
	cbase, ccontract, chas := cutContract(c)
	if phas && (!chas || pcontract != ccontract) {
		return false
	}
	if prefix, ok := strings.CutSuffix(pbase, "/*"); ok {
		rest, ok := strings.CutPrefix(cbase, prefix)
		return ok && len(rest) > 1 && rest[0] == '/'
	}
	return pbase == cbase
}

func cutContract(s string) (base, contract string, ok bool) {
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// Matches reports whether any of r's capabilities satisfies pattern.
func (r Resource) Matches(pattern string) bool {
	for _, c := range r.Caps {
		if CapMatches(pattern, c) {
			return true
		}
	}
	return false
}

// wanted reports whether a probe wanting patterns (none: everything) asks
// for one of resources.
func wanted(patterns []string, resources []Resource) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, r := range resources {
		for _, p := range patterns {
			if r.Matches(p) {
				return true
			}
		}
	}
	return false
}

// endpoint is r's named endpoint as an absolute URL.
func (r Resource) endpoint(name string) string {
	v := r.Endpoints[name]
	if strings.HasPrefix(v, "/") {
		base := r.Endpoints["http"]
		if base == "" {
			return ""
		}
		return strings.TrimRight(base, "/") + v
	}
	return v
}

func newNeighbor(n NodeInfo, resources []Resource, addr string, lastSeen float64) Neighbor {
	nb := Neighbor{NodeInfo: n, Resources: resources, Caps: []string{}, Addr: addr, LastSeen: lastSeen}
	if nb.Resources == nil {
		nb.Resources = []Resource{}
	}
	seen := map[string]bool{}
	for _, r := range resources {
		for _, c := range r.Caps {
			if !seen[c] {
				seen[c] = true
				nb.Caps = append(nb.Caps, c)
			}
		}
		if nb.BaseURL == "" && r.Matches(CapAnyService) {
			nb.BaseURL = r.endpoint("ui")
		}
	}
	return nb
}
