package graphpass

// Encoding: Encode copies the input unchanged, except that a node whose
// device was changed is re-encoded: its tag is copied, its length prefix
// rewritten, and inside it only the device field is replaced (or inserted
// before the first field numbered above 4, or dropped when set to ""); all
// its other fields are copied in their original order. So an unchanged
// graph encodes to the identical bytes, and a changed graph differs only
// inside changed NodeDefs. The output is sized exactly before it is
// written: one allocation.

import "google.golang.org/protobuf/encoding/protowire"

// Encode serializes the graph. Unchanged bytes are copied from the input.
func (g *Graph) Encode() []byte {
	size := len(g.raw)
	for i := range g.nodes {
		if n := &g.nodes[i]; n.devSet != 0 {
			_, old := n.deviceField()
			p := n.newPayloadSize(old)
			size += p + protowire.SizeVarint(uint64(p)) - int(n.size) - int(n.lenLen)
		}
	}
	out := make([]byte, 0, size)
	from := 0 // start of the input not yet copied
	for i := range g.nodes {
		n := &g.nodes[i]
		if n.devSet == 0 {
			continue
		}
		start := int(n.payload) - int(n.lenLen) // after the tag
		out = append(out, g.raw[from:start]...)
		out = n.appendPayload(out)
		from = int(n.payload + n.size)
	}
	return append(out, g.raw[from:]...)
}

// newPayloadSize returns the size of n's payload with its device field,
// old bytes long on the wire, replaced.
func (n *Node) newPayloadSize(old int) int {
	size := int(n.size) - old
	if dev := n.Device(); dev != "" {
		size += protowire.SizeTag(fNodeDevice) + protowire.SizeBytes(len(dev))
	}
	return size
}

// appendPayload appends the length-prefixed NodeDef with the device field
// replaced: the last device field is rewritten in place, or one is inserted
// in field order (Node.devField says where).
func (n *Node) appendPayload(out []byte) []byte {
	at, old := n.deviceField()
	out = protowire.AppendVarint(out, uint64(n.newPayloadSize(old)))
	out = append(out, n.g.raw[n.payload:at]...)
	if dev := n.Device(); dev != "" {
		out = protowire.AppendTag(out, fNodeDevice, protowire.BytesType)
		out = protowire.AppendString(out, dev)
	}
	return append(out, n.g.raw[at+old:n.payload+n.size]...)
}
