// Package wire is the stream framing shared by metanode's sync, fetch and
// pair protocols: every frame is an unsigned varint length followed by
// that many bytes, the first of them the frame type. It reads frames with
// a size cap and a buffer that grows only as bytes arrive, decodes their
// fields strictly (canonical varints, counts checked against the bytes
// left, no trailing bytes) and codes the frames every protocol uses:
// CLAIMS, END and ERROR. docs/protocols.md describes each frame.
//
// It imports no libp2p: it works on any io.Reader and io.Writer. It has no
// goroutines and no shared state; a Reader or Writer belongs to one stream.
package wire
