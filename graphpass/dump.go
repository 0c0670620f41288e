package graphpass

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Dump writes one line per node: name = Op(inputs) @device {attrs}, with
// attrs sorted by name and values shown in a short form.
func (g *Graph) Dump(w io.Writer) error {
	var b strings.Builder
	for i := range g.nodes {
		n := &g.nodes[i]
		b.Reset()
		fmt.Fprintf(&b, "%s = %s(%s)", n.Name(), n.Op(), strings.Join(n.Inputs(), ", "))
		if dev := n.Device(); dev != "" {
			b.WriteString(" @" + dev)
		}
		if na := n.Attrs(); len(na) > 0 {
			attrs := make([]Attr, len(na))
			copy(attrs, na)
			sort.SliceStable(attrs, func(i, j int) bool { return attrs[i].Name < attrs[j].Name })
			b.WriteString(" {")
			for i, a := range attrs {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(a.Name + "=" + a.Value.String())
			}
			b.WriteString("}")
		}
		b.WriteByte('\n')
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// String renders the value briefly, e.g. "int32", "[2,-1]",
// "tensor<float[1024,1024]>".
func (v AttrValue) String() string {
	switch v.Kind {
	case AttrList:
		if v.List == nil {
			return "[]"
		}
		var parts []string
		for _, t := range v.List.Types {
			parts = append(parts, t.String())
		}
		for _, i := range v.List.Ints {
			parts = append(parts, strconv.FormatInt(i, 10))
		}
		for _, s := range v.List.Shapes {
			parts = append(parts, s.String())
		}
		if v.List.Other > 0 {
			parts = append(parts, "+"+strconv.Itoa(v.List.Other)+" more")
		}
		return "[" + strings.Join(parts, ",") + "]"
	case AttrString:
		return strconv.Quote(v.S)
	case AttrInt:
		return strconv.FormatInt(v.I, 10)
	case AttrFloat:
		return strconv.FormatFloat(float64(v.F), 'g', -1, 32)
	case AttrBool:
		return strconv.FormatBool(v.B)
	case AttrType:
		return v.Type.String()
	case AttrShape:
		return v.Shape.String()
	case AttrTensor:
		return "tensor<" + v.Type.String() + v.Shape.String() + ">"
	case AttrPlaceholder:
		return "$" + v.S
	case AttrFunc:
		return "func " + v.S
	}
	return "?"
}

// String renders the shape as "[d0,d1]" or "[?]" for unknown rank.
func (s Shape) String() string {
	if s.UnknownRank {
		return "[?]"
	}
	parts := make([]string, len(s.Dims))
	for i, d := range s.Dims {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return "[" + strings.Join(parts, ",") + "]"
}
