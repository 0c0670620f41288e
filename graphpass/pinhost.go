package graphpass

// PinHostCompute: keep shape arithmetic on the host.
//
// Shape computations (Shape -> StridedSlice -> Pack -> Reshape's shape
// input) produce tiny integer tensors that device kernels read from host
// memory anyway. Placed on the accelerator they cost a launch and a copy
// each way; placed on the CPU they cost nothing. The pass moves such
// subgraphs to the host device when that is safe:
//
//  1. Candidates: Shape, ShapeN, Size and Rank; and, when every type attr is
//     an integer (or bool) type, Const (at most MaxConstElements elements),
//     Cast, Identity, StridedSlice, Slice, Pack, ConcatV2, Range, Fill,
//     Reshape, ExpandDims, Squeeze, arithmetic, reductions, comparisons and
//     logical ops. Never floating point. Nodes already placed on a CPU are
//     not candidates: they are host nodes already, and count as host
//     producers and consumers.
//  2. Forward check: every consumer outside the set reads the value through
//     a host-memory input of its device kernel (the HostMemoryTable), or is
//     placed on a CPU.
//     Backward check: every producer outside the set is a Const of at most
//     MaxConstElements elements, is placed on a CPU, or is an op whose
//     device kernel writes that output to host memory.
//  3. Fixpoint: the checks run from a worklist; a node that fails leaves the
//     set and its neighbours in the set are queued again. The set only
//     shrinks, so this ends after at most O(edges) checks, with no sweep
//     bound (the MUSA plugin's pass stopped after 32 sweeps and could leave
//     a chain half-checked).
//  4. All or nothing: the candidates form connected subgraphs (by data
//     edges among candidates). A subgraph moves only if none of its members
//     left the set; otherwise all of it stays, so no value ping-pongs
//     between host and device. Shape, ShapeN, Size and Rank whose own input
//     fails the backward check are dropped before the subgraphs are formed:
//     their device kernels already write the result to host memory, so
//     leaving them on the device costs nothing, and moving them would copy
//     their (possibly large) input to the host.
//  5. Rewrite: each moved node gets the host device: the node's device with
//     its "/device:..." part replaced by "/device:CPU:0" (job, replica and
//     task kept), or HostDevice when the node has no device.
//
// The pass does nothing when PinOptions.Disabled is set or the environment
// variable ACCELKIT_DISABLE_HOST_COMPUTE_PIN is "1".

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// EnvDisableHostComputePin names the environment variable that disables
// PinHostCompute when set to "1".
const EnvDisableHostComputePin = "ACCELKIT_DISABLE_HOST_COMPUTE_PIN"

// DefaultMaxConstElements is the largest Const (in elements) treated as a
// shape value; Grappler's pin-to-host optimizer uses the same bound
// (kTensorMaxSize = 64).
const DefaultMaxConstElements = 64

// DefaultHostDevice is where nodes without a device are moved.
const DefaultHostDevice = "/device:CPU:0"

// PinOptions configure PinHostCompute. The zero value is ready to use:
// every zero field means its default.
type PinOptions struct {
	// Table says which ports of which kernels live in host memory; nil
	// means DefaultHostMemoryTable().
	Table *HostMemoryTable
	// HostDevice is where a moved node without a device goes; "" means
	// DefaultHostDevice. A moved node with a device keeps its job, replica
	// and task and gets "/device:CPU:0".
	HostDevice string
	// MaxConstElements is the largest Const, in elements, treated as a
	// shape value; 0 means DefaultMaxConstElements. Negative is an error.
	MaxConstElements int
	// Disabled turns the pass off: Run changes nothing and notes why. The
	// default (false) runs it unless the environment variable
	// EnvDisableHostComputePin is "1".
	Disabled bool
	// Getenv reads the environment; nil means os.Getenv (tests override it).
	Getenv func(string) string
}

// PinHostCompute is the pin-host-compute pass. It holds only its options
// and is safe for concurrent use on different graphs.
//
// Locking: none is needed; the options are written once, by
// NewPinHostCompute, and every run keeps its working state to itself.
type PinHostCompute struct {
	opts PinOptions
}

// NewPinHostCompute returns the pass with opts filled in with defaults. A
// value out of range is an error wrapping ErrInvalidOption.
func NewPinHostCompute(opts PinOptions) (*PinHostCompute, error) {
	if opts.MaxConstElements < 0 {
		return nil, fmt.Errorf("%w: PinOptions.MaxConstElements %d: want 0 (the default, %d) or more", ErrInvalidOption, opts.MaxConstElements, DefaultMaxConstElements)
	}
	if opts.Table == nil {
		opts.Table = DefaultHostMemoryTable()
	}
	if opts.HostDevice == "" {
		opts.HostDevice = DefaultHostDevice
	}
	if opts.MaxConstElements == 0 {
		opts.MaxConstElements = DefaultMaxConstElements
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	return &PinHostCompute{opts: opts}, nil
}

// Name returns "pin-host-compute".
func (p *PinHostCompute) Name() string { return "pin-host-compute" }

// Ops the pass may move when their types allow.
var (
	shapeOps = map[string]bool{"Shape": true, "ShapeN": true, "Size": true, "Rank": true}
	intOps   = map[string]bool{
		"Const": true, "Cast": true, "Identity": true,
		"StridedSlice": true, "Slice": true, "Pack": true, "ConcatV2": true,
		"Range": true, "Fill": true, "Reshape": true, "ExpandDims": true, "Squeeze": true,
		"Add": true, "AddV2": true, "Sub": true, "Mul": true, "Neg": true, "Abs": true,
		"FloorDiv": true, "FloorMod": true, "TruncateDiv": true, "Div": true,
		"Maximum": true, "Minimum": true,
		"Sum": true, "Prod": true, "Max": true, "Min": true,
		"Equal": true, "NotEqual": true, "Less": true, "LessEqual": true,
		"Greater": true, "GreaterEqual": true,
		"LogicalAnd": true, "LogicalOr": true, "LogicalNot": true,
	}
)

func onCPU(dev string) bool { return strings.Contains(dev, "CPU") }

// allTypesHostFriendly reports whether n has at least one type attr and
// every type attr (single or list) is an integer or bool type.
func allTypesHostFriendly(n *Node) bool {
	seen := false
	for _, a := range n.attrs {
		switch a.Value.Kind {
		case AttrType:
			seen = true
			if !a.Value.Type.hostFriendly() {
				return false
			}
		case AttrList:
			if a.Value.List == nil {
				continue
			}
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

func (p *PinHostCompute) smallConst(n *Node) bool {
	if n.op != "Const" {
		return false
	}
	v, ok := n.Attr("value")
	if !ok || v.Kind != AttrTensor {
		return false
	}
	ne := v.Shape.NumElements()
	return ne >= 0 && ne <= int64(p.opts.MaxConstElements)
}

func (p *PinHostCompute) isCandidate(n *Node) bool {
	if onCPU(n.device) {
		return false
	}
	if shapeOps[n.op] {
		return true
	}
	if !intOps[n.op] || !allTypesHostFriendly(n) {
		return false
	}
	if n.op == "Const" {
		return p.smallConst(n)
	}
	return true
}

// pinState is the working state of one run.
type pinState struct {
	p     *PinHostCompute
	nodes []*Node
	ix    index
	in    []bool // current set
	steps int
}

func (s *pinState) producerOK(e edge) bool {
	if e.from < 0 {
		return false // produced outside this graph: unknown placement
	}
	if s.in[e.from] {
		return true
	}
	pn := s.nodes[e.from]
	return onCPU(pn.device) || s.p.smallConst(pn) || s.p.opts.Table.OutputOnHost(pn, e.fromPort)
}

func (s *pinState) consumerOK(e edge) bool {
	if s.in[e.to] {
		return true
	}
	cn := s.nodes[e.to]
	return onCPU(cn.device) || s.p.opts.Table.InputOnHost(cn, e.toPort, int(s.ix.numInputs[e.to]))
}

func (s *pinState) check(i int) bool {
	s.steps++
	for _, e := range s.ix.ins(i) {
		if !s.producerOK(e) {
			return false
		}
	}
	for _, e := range s.ix.outs(i) {
		if !s.consumerOK(e) {
			return false
		}
	}
	return true
}

// fixpoint removes from s.in every node that fails a check, rechecking the
// neighbours of each removed node, until nothing changes.
func (s *pinState) fixpoint() {
	var work []int
	queued := make([]bool, len(s.nodes))
	for i, in := range s.in {
		if in {
			work = append(work, i)
			queued[i] = true
		}
	}
	for len(work) > 0 {
		i := work[len(work)-1]
		work = work[:len(work)-1]
		queued[i] = false
		if !s.in[i] || s.check(i) {
			continue
		}
		s.in[i] = false
		push := func(j int) {
			if j >= 0 && s.in[j] && !queued[j] {
				queued[j] = true
				work = append(work, j)
			}
		}
		for _, e := range s.ix.ins(i) {
			push(e.from)
		}
		for _, e := range s.ix.outs(i) {
			push(e.to)
		}
	}
}

// components labels the connected subgraphs of set by data edges among its
// members; comp[i] is -1 for nodes outside set.
func (s *pinState) components(set []bool) (comp []int, n int) {
	comp = make([]int, len(set))
	for i := range comp {
		comp[i] = -1
	}
	var stack []int
	for i, in := range set {
		if !in || comp[i] >= 0 {
			continue
		}
		comp[i] = n
		stack = append(stack[:0], i)
		for len(stack) > 0 {
			j := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			visit := func(k int) {
				if k >= 0 && set[k] && comp[k] < 0 {
					comp[k] = n
					stack = append(stack, k)
				}
			}
			for _, e := range s.ix.ins(j) {
				visit(e.from)
			}
			for _, e := range s.ix.outs(j) {
				visit(e.to)
			}
		}
		n++
	}
	return comp, n
}

// hostDevice maps a node's device to the host device on the same task.
func (p *PinHostCompute) hostDevice(dev string) string {
	if i := strings.LastIndex(dev, "/device:"); i >= 0 {
		return dev[:i] + "/device:CPU:0"
	}
	return p.opts.HostDevice
}

// plan computes which nodes to move without changing g.
func (p *PinHostCompute) plan(g *Graph, st *Stats) []bool {
	s := &pinState{p: p, nodes: g.Nodes(), ix: buildIndex(g)}
	s.in = make([]bool, len(s.nodes))
	for i, n := range s.nodes {
		s.in[i] = p.isCandidate(n)
	}
	st.Visited = len(s.nodes)
	// Shape-family nodes whose input must stay on the device leave first
	// (see step 4 above); this is decided against the full candidate set.
	var drop []int
	for i, n := range s.nodes {
		if s.in[i] && shapeOps[n.op] {
			for _, e := range s.ix.ins(i) {
				if !s.producerOK(e) {
					drop = append(drop, i)
					break
				}
			}
		}
	}
	for _, i := range drop {
		s.in[i] = false
	}
	initial := append([]bool(nil), s.in...)
	s.fixpoint()
	st.FixpointSteps = s.steps
	comp, nc := s.components(initial)
	failed := make([]bool, nc)
	for i, c := range comp {
		if c >= 0 && !s.in[i] {
			failed[c] = true
		}
	}
	kept := 0
	for i, c := range comp {
		if c >= 0 && failed[c] && s.in[i] {
			s.in[i] = false
			kept++
		}
	}
	if kept > 0 {
		st.Notes = append(st.Notes, strconv.Itoa(kept)+" node(s) passed the checks but stay with a subgraph that did not")
	}
	return s.in
}

// Run applies the pass to g.
func (p *PinHostCompute) Run(g *Graph, st *Stats) error {
	if p.opts.Disabled {
		st.Notes = append(st.Notes, "disabled by option")
		return nil
	}
	if p.opts.Getenv(EnvDisableHostComputePin) == "1" {
		st.Notes = append(st.Notes, "disabled by "+EnvDisableHostComputePin+"=1")
		return nil
	}
	move := p.plan(g, st)
	for i, n := range g.Nodes() {
		if !move[i] {
			continue
		}
		to := p.hostDevice(n.device)
		if to == n.device {
			continue
		}
		st.Changes = append(st.Changes, Change{Node: n.name, Op: n.op, From: n.device, To: to})
		n.SetDevice(to)
		st.Changed++
	}
	return nil
}
