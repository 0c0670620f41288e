package graphpass

import (
	"math"
	"slices"
	"testing"

	gd "github.com/accelkit/accelkit/graphpass/graphpasstest"
)

// referencePlan is PinHostCompute's plan as it was written before issue
// 41 (graphpass at 9b57330), over the decoded inputs: every data edge in
// both directions, one bool slice per set, a subgraph label per node. It
// returns which nodes move, the fixpoint's steps and how many nodes stay
// with a failed subgraph: the oracle checkPlan holds the compact pass to.
func referencePlan(p *PinHostCompute, g *Graph) (move []bool, steps, kept int) {
	type edge struct{ from, fromPort, to, toPort int }
	nodes := g.Nodes()
	first := map[string]int{}
	for i, n := range nodes {
		if _, dup := first[n.Name()]; !dup {
			first[n.Name()] = i
		}
	}
	ins, outs := make([][]edge, len(nodes)), make([][]edge, len(nodes))
	for i, n := range nodes {
		port := 0
		for _, s := range n.Inputs() {
			ep := ParseInput(s)
			if ep.Control {
				continue
			}
			from, ok := first[ep.Node]
			if !ok {
				from = -1
			}
			e := edge{from, min(ep.Port, math.MaxInt32), i, port}
			ins[i] = append(ins[i], e)
			if from >= 0 {
				outs[from] = append(outs[from], e)
			}
			port++
		}
	}
	in := make([]bool, len(nodes))
	for i, n := range nodes {
		in[i] = p.isCandidate(n)
	}
	producerOK := func(e edge) bool {
		if e.from < 0 {
			return false
		}
		pn := nodes[e.from]
		return in[e.from] || onCPU(pn.Device()) || p.smallConst(pn) || p.opts.Table.OutputOnHost(pn, e.fromPort)
	}
	consumerOK := func(e edge) bool {
		cn := nodes[e.to]
		return in[e.to] || onCPU(cn.Device()) || p.opts.Table.InputOnHost(cn, e.toPort, len(ins[e.to]))
	}
	var drop []int
	for i, n := range nodes {
		if in[i] && shapeOp(n.Op()) && slices.ContainsFunc(ins[i], func(e edge) bool { return !producerOK(e) }) {
			drop = append(drop, i)
		}
	}
	for _, i := range drop {
		in[i] = false
	}
	initial := slices.Clone(in)
	queued := make([]bool, len(nodes))
	var work []int
	for i := range in {
		if in[i] {
			work, queued[i] = append(work, i), true
		}
	}
	push := func(j int) {
		if j >= 0 && in[j] && !queued[j] {
			work, queued[j] = append(work, j), true
		}
	}
	for len(work) > 0 {
		i := work[len(work)-1]
		work, queued[i] = work[:len(work)-1], false
		if !in[i] {
			continue
		}
		steps++
		ok := !slices.ContainsFunc(ins[i], func(e edge) bool { return !producerOK(e) }) &&
			!slices.ContainsFunc(outs[i], func(e edge) bool { return !consumerOK(e) })
		if ok {
			continue
		}
		in[i] = false
		for _, e := range ins[i] {
			push(e.from)
		}
		for _, e := range outs[i] {
			push(e.to)
		}
	}
	comp := make([]int, len(nodes))
	for i := range comp {
		comp[i] = -1
	}
	var failed []bool
	for i := range nodes {
		if !initial[i] || comp[i] >= 0 {
			continue
		}
		c := len(failed)
		failed = append(failed, false)
		comp[i] = c
		for stack := []int{i}; len(stack) > 0; {
			j := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			failed[c] = failed[c] || !in[j]
			for _, e := range slices.Concat(ins[j], outs[j]) {
				for _, k := range []int{e.from, e.to} {
					if k >= 0 && initial[k] && comp[k] < 0 {
						comp[k] = c
						stack = append(stack, k)
					}
				}
			}
		}
	}
	for i, c := range comp {
		if c >= 0 && failed[c] && in[i] {
			in[i] = false
			kept++
		}
	}
	return in, steps, kept
}

// checkPlan holds p's plan for g to referencePlan: the same nodes move,
// after the same number of fixpoint steps, with the same note.
func checkPlan(t *testing.T, p *PinHostCompute, g *Graph) {
	t.Helper()
	move, steps, kept := referencePlan(p, g)
	var st Stats
	s := new(pinState)
	p.plan(g, &st, s)
	for i := range move {
		if s.in(int32(i)) != move[i] {
			t.Fatalf("node %q: moves %v, the reference plan says %v", g.nodes[i].Name(), s.in(int32(i)), move[i])
		}
	}
	if st.FixpointSteps != steps || (kept > 0) != (len(st.Notes) == 1) {
		t.Fatalf("fixpoint steps %d, notes %q; the reference plan: %d steps, %d kept", st.FixpointSteps, st.Notes, steps, kept)
	}
}

// TestPlanMatchesReference runs checkPlan over graphs with every shape
// the pass meets: the model, the long chain, ops with host-memory ports
// counted from the end, duplicate names, missing producers and CPU
// placements.
func TestPlanMatchesReference(t *testing.T) {
	const gpu = "/device:GPU:0"
	i32 := gd.A("T", gd.Type(gd.Int32))
	reversed := chain(100, true)
	slices.Reverse(reversed) // consumers first: removals travel to producers
	graphs := map[string][]gd.Node{
		"chain":          chain(100, true),
		"chain reversed": reversed,
		"mixed": {
			gd.Const("a", gpu, gd.Int32, 2), gd.Const("a", gpu, gd.Float, 2), // duplicate name: the first wins
			gd.Const("axis", "/device:CPU:0", gd.Int32),
			{Name: "cat", Op: "ConcatV2", Device: gpu, Inputs: []string{"a", "a:0", "axis"}, Attrs: []gd.Attr{i32, gd.A("Tidx", gd.Type(gd.Int32)), gd.A("N", gd.Int(2))}},
			{Name: "ghost", Op: "Identity", Device: gpu, Inputs: []string{"missing"}, Attrs: []gd.Attr{i32}},
			{Name: "r", Op: "Reshape", Device: gpu, Inputs: []string{"x", "cat", "^ghost"}, Attrs: []gd.Attr{gd.A("T", gd.Type(gd.Float)), gd.A("Tshape", gd.Type(gd.Int32))}},
			{Name: "x", Op: "Placeholder", Device: gpu, Attrs: []gd.Attr{gd.A("dtype", gd.Type(gd.Float))}},
		},
	}
	p := newPin(t, PinOptions{Getenv: func(string) string { return "" }})
	for name, nodes := range graphs {
		t.Run(name, func(t *testing.T) {
			g, err := Decode(gd.GraphDef(gd.Graph{Nodes: nodes}))
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, p, g)
		})
	}
	for _, in := range [][]byte{gd.Model(3000), sampleGraph(), smallGraph()} {
		g, err := Decode(in)
		if err != nil {
			t.Fatal(err)
		}
		checkPlan(t, p, g)
	}
}
