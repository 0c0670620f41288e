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
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
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

// PinHostCompute is the pin-host-compute pass. It holds its options and
// the working memory of its last run, which the next run reuses (about 32
// bytes per node of the largest graph it has run on, until the pass is
// dropped). It is safe for concurrent use on different graphs.
type PinHostCompute struct {
	// Locking: no mutex. The options are written once, by NewPinHostCompute;
	// spare is swapped atomically, so a run takes the spare working state or,
	// when another run holds it, makes its own, and keeps it to itself until it
	// ends.

	opts  PinOptions
	spare atomic.Pointer[pinState]
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

// Ops the pass may move when their types allow. Switches, not maps: the
// pass asks for every node, and a switch on the string is several times
// cheaper than hashing it.
func shapeOp(op string) bool {
	switch op {
	case "Shape", "ShapeN", "Size", "Rank":
		return true
	}
	return false
}

func intOp(op string) bool {
	switch op {
	case "Const", "Cast", "Identity",
		"StridedSlice", "Slice", "Pack", "ConcatV2",
		"Range", "Fill", "Reshape", "ExpandDims", "Squeeze",
		"Add", "AddV2", "Sub", "Mul", "Neg", "Abs",
		"FloorDiv", "FloorMod", "TruncateDiv", "Div",
		"Maximum", "Minimum",
		"Sum", "Prod", "Max", "Min",
		"Equal", "NotEqual", "Less", "LessEqual",
		"Greater", "GreaterEqual",
		"LogicalAnd", "LogicalOr", "LogicalNot":
		return true
	}
	return false
}

func onCPU(dev string) bool { return strings.Contains(dev, "CPU") }

// allTypesHostFriendly reports whether n has at least one type attr and
// every type attr (single or list) is an integer or bool type. It reads the
// attrs from n's bytes.
func allTypesHostFriendly(n *Node) bool {
	seen := false
	for b := n.bytes(); ; {
		_, value, rest, ok := nextAttr(b)
		if !ok {
			return seen
		}
		b = rest
		switch num, v := lastValueField(value); num {
		case fAttrType:
			seen = true
			if !DataType(varint(v)).hostFriendly() {
				return false
			}
		case fAttrList:
			s, ok := listTypesHostFriendly(v)
			seen = seen || s
			if !ok {
				return false
			}
		case fAttrTensor:
			if !tensorDtype(v).hostFriendly() {
				return false
			}
		}
	}
}

func (p *PinHostCompute) smallConst(n *Node) bool {
	if n.Op() != "Const" {
		return false
	}
	v, ok := n.attrValueBytes("value")
	return ok && p.smallTensor(v)
}

// smallTensor reports whether AttrValue v is a tensor of at most
// MaxConstElements elements.
func (p *PinHostCompute) smallTensor(v []byte) bool {
	num, t := lastValueField(v)
	if num != fAttrTensor {
		return false
	}
	ne := tensorElements(t)
	return ne >= 0 && ne <= int64(p.opts.MaxConstElements)
}

func (p *PinHostCompute) isCandidate(n *Node) bool {
	if onCPU(n.Device()) {
		return false
	}
	ok, _ := p.movable(n)
	return ok
}

// movable is isCandidate for a node not on a CPU. For a candidate it also
// returns the number of its inputs (data and control), counted in the
// same walk over its bytes, which reads every attr once: the checks of
// allTypesHostFriendly and, for a Const, smallConst's.
func (p *PinHostCompute) movable(n *Node) (ok bool, inputs int) {
	op := n.Op()
	b := n.bytes()
	if shapeOp(op) {
		return true, countInputs(b)
	}
	if !intOp(op) {
		return false, 0
	}
	isConst := op == "Const"
	seen := false
	var value []byte // a Const's last "value" attr
	hasValue := false
	for len(b) > 0 {
		num, entry, rest, short := shortField(b)
		if !short {
			num, entry, _, rest = nextField(b)
		}
		b = rest
		if num == fNodeInput {
			inputs++
		}
		if num != fNodeAttr {
			continue
		}
		var key, val []byte
		for len(entry) > 0 {
			k, v, er, short := shortField(entry)
			if !short {
				k, v, _, er = nextField(entry)
			}
			switch k {
			case fMapKey:
				key = v
			case fMapValue:
				val = v
			}
			entry = er
		}
		if isConst && string(key) == "value" {
			value, hasValue = val, true
		}
		switch num, v := lastValueField(val); num {
		case fAttrType:
			seen = true
			if !DataType(varint(v)).hostFriendly() {
				return false, 0
			}
		case fAttrList:
			s, ok := listTypesHostFriendly(v)
			seen = seen || s
			if !ok {
				return false, 0
			}
		case fAttrTensor:
			if !tensorDtype(v).hostFriendly() {
				return false, 0
			}
		}
	}
	if !seen || isConst && !(hasValue && p.smallTensor(value)) {
		return false, 0
	}
	return true, inputs
}

// pinState is the working state of one run. Its slices are reused by
// later runs (PinHostCompute.spare), so a run allocates nothing in
// proportion to the graph but its Stats.Changes. It holds one byte of
// flags per node, the edge index (edges.go) and a worklist: about 32 bytes
// per node of a model-shaped graph.
type pinState struct {
	p     *PinHostCompute
	nodes []Node
	ix    index
	flags []nodeFlags
	steps int
	work  []int32
}

// nodeFlags are a node's bits in a run of the pass.
type nodeFlags uint8

const (
	flagCPU       nodeFlags = 1 << iota // placed on a CPU
	flagCandidate                       // a candidate (step 1)
	flagInitial                         // in the set when the fixpoint starts
	flagIn                              // in the set now
	flagQueued                          // on the fixpoint's worklist
	flagSeen                            // reached while forming subgraphs
)

func (s *pinState) in(i int32) bool { return s.flags[i]&flagIn != 0 }

// reset prepares s for a run of p on g: every candidate in the set (step
// 1) and the edge index built around the candidates.
func (s *pinState) reset(p *PinHostCompute, g *Graph) {
	s.p, s.nodes, s.steps = p, g.nodes, 0
	s.flags = resize(s.flags, len(g.nodes))
	cands, inputs := 0, 0
	for i := range g.nodes {
		n := &g.nodes[i]
		var f nodeFlags
		if onCPU(n.Device()) {
			f = flagCPU
		} else if ok, k := p.movable(n); ok {
			f = flagCandidate | flagIn
			cands++
			inputs += k
		}
		s.flags[i] = f
	}
	// Sized once: the worklists hold at most every candidate, the
	// in-edges at most every input of one.
	if cap(s.work) < cands {
		s.work = make([]int32, 0, cands)
	}
	s.ix.build(g, s.flags, inputs)
}

func (s *pinState) producerOK(e port) bool {
	if e.node < 0 {
		return false // produced outside this graph: unknown placement
	}
	f := s.flags[e.node]
	if f&(flagIn|flagCPU) != 0 {
		return true
	}
	pn := &s.nodes[e.node]
	return s.p.smallConst(pn) || s.p.opts.Table.OutputOnHost(pn, int(e.port))
}

func (s *pinState) consumerOK(e port) bool {
	f := s.flags[e.node]
	if f&(flagIn|flagCPU) != 0 {
		return true
	}
	cn := &s.nodes[e.node]
	return s.p.opts.Table.inputOnHost(cn, int(e.port), func() int {
		if f&flagCandidate != 0 {
			return s.ix.numInputs(int(e.node))
		}
		return cn.dataInputs()
	})
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

// fixpoint removes from the set every node that fails a check, rechecking
// the neighbours of each removed node, until nothing changes.
func (s *pinState) fixpoint() {
	work := s.work[:0]
	for i, f := range s.flags {
		if f&flagIn != 0 {
			work = append(work, int32(i))
			s.flags[i] |= flagQueued
		}
	}
	push := func(j int32) {
		if j >= 0 && s.flags[j]&(flagIn|flagQueued) == flagIn {
			s.flags[j] |= flagQueued
			work = append(work, j)
		}
	}
	for len(work) > 0 {
		i := int(work[len(work)-1])
		work = work[:len(work)-1]
		s.flags[i] &^= flagQueued
		if s.flags[i]&flagIn == 0 || s.check(i) {
			continue
		}
		s.flags[i] &^= flagIn
		for _, e := range s.ix.ins(i) {
			push(e.node)
		}
		for _, e := range s.ix.outs(i) {
			push(e.node)
		}
	}
	s.work = work
}

// allOrNothing forms the connected subgraphs of the initial set (by data
// edges among its members), breadth first, and takes every member of a
// subgraph out of the set when one of them left it. It returns how many
// nodes that kept on the device that had passed the checks.
func (s *pinState) allOrNothing() (kept int) {
	members := s.work[:0]
	visit := func(k int32) {
		if k >= 0 && s.flags[k]&(flagInitial|flagSeen) == flagInitial {
			s.flags[k] |= flagSeen
			members = append(members, k)
		}
	}
	for i, f := range s.flags {
		if f&(flagInitial|flagSeen) != flagInitial {
			continue
		}
		s.flags[i] |= flagSeen
		members = append(members[:0], int32(i))
		failed := false
		for h := 0; h < len(members); h++ {
			j := int(members[h])
			failed = failed || s.flags[j]&flagIn == 0
			for _, e := range s.ix.ins(j) {
				visit(e.node)
			}
			for _, e := range s.ix.outs(j) {
				visit(e.node)
			}
		}
		if !failed {
			continue
		}
		for _, j := range members {
			if s.flags[j]&flagIn != 0 {
				s.flags[j] &^= flagIn
				kept++
			}
		}
	}
	s.work = members
	return kept
}

// hostDevice maps a node's device to the host device on the same task.
func (p *PinHostCompute) hostDevice(dev string) string {
	if i := strings.LastIndex(dev, "/device:"); i >= 0 {
		return dev[:i] + "/device:CPU:0"
	}
	return p.opts.HostDevice
}

// plan computes in s's flagIn which nodes to move, without changing g.
func (p *PinHostCompute) plan(g *Graph, st *Stats, s *pinState) {
	s.reset(p, g)
	st.Visited = len(s.nodes)
	// Shape-family nodes whose input must stay on the device leave first
	// (see step 4 above); this is decided against the full candidate set,
	// so they are collected (in s.work) before any leaves.
	drop := s.work[:0]
	for i, f := range s.flags {
		if f&flagIn != 0 && shapeOp(s.nodes[i].Op()) {
			for _, e := range s.ix.ins(i) {
				if !s.producerOK(e) {
					drop = append(drop, int32(i))
					break
				}
			}
		}
	}
	for _, i := range drop {
		s.flags[i] &^= flagIn
	}
	s.work = drop
	for i, f := range s.flags {
		if f&flagIn != 0 {
			s.flags[i] |= flagInitial
		}
	}
	s.fixpoint()
	st.FixpointSteps = s.steps
	if kept := s.allOrNothing(); kept > 0 {
		st.Notes = append(st.Notes, strconv.Itoa(kept)+" node(s) passed the checks but stay with a subgraph that did not")
	}
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
	s := p.spare.Swap(nil)
	if s == nil {
		s = new(pinState)
	}
	defer p.spare.Store(s)
	p.plan(g, st, s)
	moving := 0
	for _, f := range s.flags {
		if f&flagIn != 0 {
			moving++
		}
	}
	st.Changes = slices.Grow(st.Changes, moving)
	// Host devices by device: graphs name few devices, so moved nodes share
	// a handful of strings instead of one each.
	host := map[string]string{}
	for i, f := range s.flags {
		if f&flagIn == 0 {
			continue
		}
		n := &g.nodes[i]
		from := n.Device()
		to, ok := host[from]
		if !ok {
			to = p.hostDevice(from)
			host[from] = to
		}
		if to == from {
			continue
		}
		st.Changes = append(st.Changes, Change{Node: n.Name(), Op: n.Op(), From: from, To: to})
		n.SetDevice(to)
		st.Changed++
	}
	s.p, s.nodes = nil, nil // keep no graph alive from the spare
	return nil
}
