package graphpass

import (
	"slices"
	"testing"

	gdtest "github.com/accelkit/accelkit/graphpass/graphpasstest"
)

// decodedAllTypesHostFriendly is allTypesHostFriendly over the decoded
// attrs: the reference the byte reader is checked against.
func decodedAllTypesHostFriendly(n *Node) bool {
	seen := false
	for _, a := range n.Attrs() {
		switch a.Value.Kind {
		case AttrType:
			seen = true
			if !a.Value.Type.hostFriendly() {
				return false
			}
		case AttrList:
			for _, t := range a.Value.List.Types {
				seen = true
				if !t.hostFriendly() {
					return false
				}
			}
		case AttrTensor:
			if !a.Value.Type.hostFriendly() {
				return false
			}
		}
	}
	return seen
}

// decodedSmallConst is smallConst over the decoded attrs.
func decodedSmallConst(n *Node) bool {
	v, ok := n.Attr("value")
	ne := v.Shape.NumElements()
	return ok && v.Kind == AttrTensor && ne >= 0 && ne <= DefaultMaxConstElements
}

// checkScanners checks that what passes read from a node's bytes
// (attrscan.go) agrees with the node's decoded inputs and attrs
// (detail.go), for every node of g: TypeAttr and the const element count
// for every attr name, the candidate type check, the inputs and the
// decoded device, and PinHostCompute's candidate check (movable).
func checkScanners(t *testing.T, g *Graph) {
	t.Helper()
	pin := newPin(t, PinOptions{})
	for _, n := range g.Nodes() {
		var ins []string
		for b := n.bytes(); ; {
			s, rest, ok := g.nextInput(b)
			if !ok {
				break
			}
			ins, b = append(ins, s), rest
		}
		if !slices.Equal(ins, n.Inputs()) {
			t.Fatalf("node %q: inputs from bytes %q, decoded %q", n.Name(), ins, n.Inputs())
		}
		if got, want := allTypesHostFriendly(n), decodedAllTypesHostFriendly(n); got != want {
			t.Fatalf("node %q: allTypesHostFriendly from bytes %v, decoded %v", n.Name(), got, want)
		}
		wantOK := shapeOp(n.Op()) || intOp(n.Op()) && decodedAllTypesHostFriendly(n) && (n.Op() != "Const" || decodedSmallConst(n))
		if ok, inputs := pin.movable(n); ok != wantOK || ok && inputs != len(n.Inputs()) {
			t.Fatalf("node %q: movable from bytes %v with %d inputs, decoded %v with %d", n.Name(), ok, inputs, wantOK, len(n.Inputs()))
		}
		if !n.Changed() && n.decodedDevice() != n.Device() {
			t.Fatalf("node %q: decoded device %q, Device %q", n.Name(), n.decodedDevice(), n.Device())
		}
		for _, a := range n.Attrs() {
			v, _ := n.Attr(a.Name)
			want := DTInvalid
			if v.Kind == AttrType {
				want = v.Type
			}
			if got := n.TypeAttr(a.Name); got != want {
				t.Fatalf("node %q attr %q: TypeAttr %v, decoded %+v", n.Name(), a.Name, got, v)
			}
			raw, ok := n.attrValueBytes(a.Name)
			if !ok {
				t.Fatalf("node %q attr %q: not found in the bytes", n.Name(), a.Name)
			}
			if num, tb := lastValueField(raw); (num == fAttrTensor) != (v.Kind == AttrTensor) {
				t.Fatalf("node %q attr %q: member %d in the bytes, decoded kind %d", n.Name(), a.Name, num, v.Kind)
			} else if num == fAttrTensor {
				if got, want := tensorElements(tb), v.Shape.NumElements(); got != want {
					t.Fatalf("node %q attr %q: %d elements from bytes, decoded %d", n.Name(), a.Name, got, want)
				}
				if got := tensorDtype(tb); got != v.Type {
					t.Fatalf("node %q attr %q: dtype %v from bytes, decoded %v", n.Name(), a.Name, got, v.Type)
				}
			}
		}
	}
}

// TestScannersAgreeWithDecoded runs checkScanners over the test graphs;
// FuzzDecode runs it over whatever decodes.
func TestScannersAgreeWithDecoded(t *testing.T) {
	inputs := map[string][]byte{
		"sample":      sampleGraph(),
		"model":       gdtest.Model(500),
		"small":       smallGraph(),
		"list shapes": attrNode("n", bytesField(fAttrList, slices.Concat(bytesField(fListShape, gdtest.ShapeProto(2, -1)), bytesField(fListShape, nil), gdtest.TypeList(gdtest.Int32, gdtest.Float)[2:]))),
		"tensor twice": attrNode("n", slices.Concat(gdtest.Tensor(gdtest.Float, 4, 4), gdtest.Tensor(gdtest.Int32, 2),
			gdtest.Type(gdtest.Int64))),
		"unknown rank": attrNode("n", bytesField(fAttrTensor, bytesField(fTensorShape, []byte{0x18, 0x01}))),
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			g, err := Decode(in)
			if err != nil {
				t.Fatal(err)
			}
			checkScanners(t, g)
		})
	}
}
