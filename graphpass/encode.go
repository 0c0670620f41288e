package graphpass

// Encoding: Encode copies every byte range the decoder recorded unchanged,
// except that a node whose device was changed is re-encoded: its tag is
// copied, its length prefix rewritten, and inside it only the device field
// is replaced (or inserted before the first field numbered above 4, or
// dropped when set to ""); all its other fields are copied in their
// original order. So an unchanged graph encodes to the identical bytes, and
// a changed graph differs only inside changed NodeDefs.

import "google.golang.org/protobuf/encoding/protowire"

// Encode serializes the graph. Unchanged bytes are copied from the input.
func (g *Graph) Encode() []byte {
	out := make([]byte, 0, len(g.raw)+64)
	for _, f := range g.fields {
		if f.node == nil || !f.node.changed {
			out = append(out, g.raw[f.start:f.end]...)
			continue
		}
		out = append(out, g.raw[f.start:f.start+int32(f.node.tagLen)]...)
		out = f.node.appendPayload(out)
	}
	return out
}

// appendPayload appends the length-prefixed NodeDef with the device field
// replaced: the last device field is rewritten in place (earlier duplicates,
// which protobuf ignores, are kept), or one is inserted in field order.
func (n *Node) appendPayload(out []byte) []byte {
	last := -1
	for i, f := range n.fields {
		if f.num == fNodeDevice {
			last = i
		}
	}
	devField := func(b []byte) []byte {
		if n.device == "" {
			return b
		}
		b = protowire.AppendTag(b, fNodeDevice, protowire.BytesType)
		return protowire.AppendString(b, n.device)
	}
	devLen := 0
	if n.device != "" {
		devLen = protowire.SizeTag(fNodeDevice) + protowire.SizeBytes(len(n.device))
	}
	size := len(n.raw) + devLen
	insertAt := -1
	if last >= 0 {
		size -= int(n.fields[last].end - n.fields[last].start)
	} else {
		insertAt = len(n.fields)
		for i, f := range n.fields {
			if f.num > fNodeDevice {
				insertAt = i
				break
			}
		}
	}
	out = protowire.AppendVarint(out, uint64(size))
	for i, f := range n.fields {
		if i == insertAt {
			out = devField(out)
		}
		if i == last {
			out = devField(out)
			continue
		}
		out = append(out, n.raw[f.start:f.end]...)
	}
	if insertAt == len(n.fields) {
		out = devField(out)
	}
	return out
}
