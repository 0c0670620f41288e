package graphpass

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestRoundTripUnchanged(t *testing.T) {
	in := sampleGraph()
	g, err := Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	g.Node("a").SetDevice("/device:GPU:0") // same value: not a change
	if out := g.Encode(); !bytes.Equal(out, in) {
		t.Fatal("unchanged graph does not round-trip byte for byte")
	}
}

// topFields splits a message into its top-level fields' bytes.
func topFields(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatal("bad tag")
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			t.Fatal("bad value")
		}
		out = append(out, b[:n+m])
		b = b[n+m:]
	}
	return out
}

func nodePayload(t *testing.T, field []byte) []byte {
	_, _, n := protowire.ConsumeTag(field)
	p, m := protowire.ConsumeBytes(field[n:])
	if m < 0 {
		t.Fatal("bad node")
	}
	return p
}

func TestChangeOnlyInsideNode(t *testing.T) {
	tests := []struct {
		node, device string
		wantDiffIdx  int // index of the NodeDef field expected to differ (-1: inserted)
	}{
		{"s", "/device:CPU:0", 3},    // replace in place (name, op, input, device, ...)
		{"add", "/device:CPU:0", -1}, // insert before attr
		{"s", "", -2},                // remove
		{"n", "/job:w/device:CPU:0", -1},
	}
	for _, tt := range tests {
		in := sampleGraph()
		g, err := Decode(in)
		if err != nil {
			t.Fatal(err)
		}
		g.Node(tt.node).SetDevice(tt.device)
		out := g.Encode()
		if bytes.Equal(in, out) {
			t.Fatalf("%s: no change", tt.node)
		}
		inF, outF := topFields(t, in), topFields(t, out)
		if len(inF) != len(outF) {
			t.Fatalf("%s: %d top fields, want %d", tt.node, len(outF), len(inF))
		}
		changedIdx := 1 + map[string]int{"a": 0, "s": 1, "n": 2, "add": 3}[tt.node] // library first
		for i := range inF {
			if i == changedIdx {
				continue
			}
			if !bytes.Equal(inF[i], outF[i]) {
				t.Errorf("%s: top field %d changed", tt.node, i)
			}
		}
		// Inside the changed node, only the device field differs.
		a, b := topFields(t, nodePayload(t, inF[changedIdx])), topFields(t, nodePayload(t, outF[changedIdx]))
		var ka, kb [][]byte
		for _, f := range a {
			if num, _, _ := protowire.ConsumeTag(f); num != fNodeDevice {
				ka = append(ka, f)
			}
		}
		for _, f := range b {
			if num, _, _ := protowire.ConsumeTag(f); num != fNodeDevice {
				kb = append(kb, f)
			}
		}
		if len(ka) != len(kb) {
			t.Fatalf("%s: non-device field count changed", tt.node)
		}
		for i := range ka {
			if !bytes.Equal(ka[i], kb[i]) {
				t.Errorf("%s: non-device field %d changed", tt.node, i)
			}
		}
		if tt.wantDiffIdx >= 0 {
			for i := range tt.wantDiffIdx {
				if !bytes.Equal(a[i], b[i]) {
					t.Errorf("%s: field %d before device changed", tt.node, i)
				}
			}
			if len(a) != len(b) {
				t.Errorf("%s: in-place replace changed the field count", tt.node)
			}
		}
		// Field order stays canonical: device (4) before attr (5).
		prev := protowire.Number(0)
		for _, f := range b {
			num, _, _ := protowire.ConsumeTag(f)
			if num < prev && num <= fNodeAttr {
				t.Errorf("%s: field %d after %d", tt.node, num, prev)
			}
			prev = num
		}
		g2, err := Decode(out)
		if err != nil {
			t.Fatal(err)
		}
		if got := g2.Node(tt.node).Device(); got != tt.device {
			t.Errorf("%s: device after round trip %q, want %q", tt.node, got, tt.device)
		}
		// Re-encoding the decoded output is byte-identical.
		if !bytes.Equal(g2.Encode(), out) {
			t.Errorf("%s: second round trip differs", tt.node)
		}
	}
}
