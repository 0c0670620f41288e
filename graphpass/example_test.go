package graphpass_test

import (
	"fmt"

	"github.com/accelkit/accelkit/graphpass"
	gd "github.com/accelkit/accelkit/graphpass/graphpasstest"
)

// A Shape -> StridedSlice -> Pack chain feeding Reshape's shape input moves
// to the host as one unit; Reshape itself stays on the GPU.
func Example() {
	const gpu = "/device:GPU:0"
	f32 := gd.A("T", gd.Type(gd.Float))
	i32 := gd.A("T", gd.Type(gd.Int32))
	pb := gd.GraphDef(gd.Graph{Nodes: []gd.Node{
		{Name: "x", Op: "Placeholder", Device: "/device:CPU:0", Attrs: []gd.Attr{gd.A("dtype", gd.Type(gd.Float))}},
		{Name: "shape", Op: "Shape", Device: gpu, Inputs: []string{"x"}, Attrs: []gd.Attr{f32, gd.A("out_type", gd.Type(gd.Int32))}},
		gd.Const("b", gpu, gd.Int32, 1), gd.Const("e", gpu, gd.Int32, 1), gd.Const("s", gpu, gd.Int32, 1),
		{Name: "ss", Op: "StridedSlice", Device: gpu, Inputs: []string{"shape", "b", "e", "s"}, Attrs: []gd.Attr{i32, gd.A("Index", gd.Type(gd.Int32))}},
		{Name: "pack", Op: "Pack", Device: gpu, Inputs: []string{"ss", "ss"}, Attrs: []gd.Attr{i32, gd.A("N", gd.Int(2))}},
		{Name: "reshape", Op: "Reshape", Device: gpu, Inputs: []string{"x", "pack"}, Attrs: []gd.Attr{f32, gd.A("Tshape", gd.Type(gd.Int32))}},
	}})

	g, err := graphpass.Decode(pb)
	if err != nil {
		fmt.Println(err)
		return
	}
	pin, err := graphpass.NewPinHostCompute(graphpass.PinOptions{Getenv: func(string) string { return "" }})
	if err != nil {
		fmt.Println(err)
		return
	}
	m := graphpass.NewManager(pin)
	r, err := m.Run(g)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range r.Passes[0].Changes {
		fmt.Println(c.Node, "->", c.To)
	}
	out := g.Encode() // only the moved NodeDefs' device fields differ from pb
	fmt.Println(len(out) > 0, g.Node("reshape").Device())
	// Output:
	// shape -> /device:CPU:0
	// b -> /device:CPU:0
	// e -> /device:CPU:0
	// s -> /device:CPU:0
	// ss -> /device:CPU:0
	// pack -> /device:CPU:0
	// true /device:GPU:0
}

func ExampleDecode() {
	pb := gd.GraphDef(gd.Graph{Nodes: []gd.Node{gd.Op("add", "AddV2", "", gd.Int32, "a", "b:1", "^c")}})
	g, _ := graphpass.Decode(pb)
	n := g.Nodes()[0]
	fmt.Println(n.Name(), n.Op(), n.Inputs(), n.TypeAttr("T"))
	fmt.Printf("%+v\n", graphpass.ParseInput("b:1"))
	// Output:
	// add AddV2 [a b:1 ^c] int32
	// {Node:b Port:1 Control:false}
}
