// Package beacon speaks beacon v2, the discovery the meta services use to
// find their metadata core and each other: JSON datagrams under 1,400
// bytes on the UDP multicast group 239.255.99.1:9099, TTL 1.
//
// A Beacon advertises this node's resources (the node's is one resource
// with the capability metamesh.core, whose data.urls is the API's /urls
// block) on every interface that is up, multicast-capable and has an IPv4
// address: once at Open, every Interval, and to any probe that wants one
// of its capabilities (a unicast reply to the prober). Close multicasts a
// bye. It keeps the nodes it hears (advertise and bye) for Interval × 3,
// at most MaxNeighbors of them; a datagram over MaxDatagram bytes, not
// beacon v2 JSON, or from this node itself changes nothing and is counted.
//
// Lifecycle as every component: New does no I/O, Open binds the socket,
// joins the group and starts two goroutines (the reader and the
// advertiser), Close stops them and is idempotent. The shapes follow
// upstream's protocol (docs/protocols.md "Beacon v2").
package beacon
