// Package graphpass rewrites TensorFlow GraphDefs without disturbing them:
// a codec on the protobuf wire format that decodes what passes read and
// keeps every other byte, a pass manager with per-pass counts, and
// PinHostCompute, which moves integer shape-arithmetic subgraphs
// (Shape -> StridedSlice -> Pack -> Reshape's shape input, and the like) to
// the host when every consumer reads them from host memory.
//
// Decode a serialized GraphDef, run passes, Encode:
//
//	g, err := graphpass.Decode(pb)
//	pin, err := graphpass.NewPinHostCompute(graphpass.PinOptions{})
//	m := graphpass.NewManager(pin)
//	report, err := m.Run(g)
//	out := g.Encode() // identical to pb except inside the NodeDefs that moved
//
// Encode of an unchanged graph returns the input bytes; a changed NodeDef
// gets a new length prefix and a new device field, and nothing else in the
// output differs. The HostMemoryTable that tells which kernel ports live in
// host memory is data (hostmemory.json), replaceable through PinOptions.
//
// Concurrency: a Graph and its Nodes may be read from several goroutines,
// but a pass that changes a Graph needs it to itself. Manager,
// PinHostCompute and HostMemoryTable are safe for concurrent use once
// configured. Stats, Report, Change, Attr, AttrValue, List, Shape and
// Endpoint are plain values.
//
// The command graphpass/cmd/graphpass applies the passes to .pb files.
package graphpass
