package graphpass

import (
	"hash/maphash"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Endpoint is a parsed NodeDef input: "node", "node:k" or "^node".
type Endpoint struct {
	Node    string
	Port    int
	Control bool
}

// ParseInput parses one NodeDef input string.
func ParseInput(s string) Endpoint {
	if strings.HasPrefix(s, "^") {
		return Endpoint{Node: s[1:], Control: true}
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if p, err := strconv.Atoi(s[i+1:]); err == nil && p >= 0 {
			return Endpoint{Node: s[:i], Port: p}
		}
	}
	return Endpoint{Node: s}
}

// port is one end of a data edge seen from the other: the producer and
// its output port in a node's in-edges, the consumer and its data input
// port in its out-edges. Ports beyond math.MaxInt32 are stored as
// math.MaxInt32: no kernel has that many, so neither matches a host-memory
// port. node is -1 for a producer not in the graph.
type port struct{ node, port int32 }

// index holds the data edges the pass reads, by node index, in compressed
// form: one flat array per direction and per-node offsets into it. Only
// edges at a candidate are kept (the pass checks and walks only nodes that
// are, or were, in its set): a candidate's in-edges, and the out-edges of
// candidates, each list in input order. Its slices are reused from one
// build to the next (see pinState).
type index struct {
	inStart, outStart []int32 // len(nodes)+1 offsets
	inEdges, outEdges []port
	names             nameTable
	// later holds the out-edges of candidates into non-candidates while
	// the index is built: consumer, port, producer.
	later []laterEdge
}

type laterEdge struct{ to, toPort, from int32 }

// ins returns the data inputs of candidate i; nil for a non-candidate.
func (ix *index) ins(i int) []port { return ix.inEdges[ix.inStart[i]:ix.inStart[i+1]] }

// outs returns the consumers of candidate i's outputs; nil for a
// non-candidate.
func (ix *index) outs(i int) []port { return ix.outEdges[ix.outStart[i]:ix.outStart[i+1]] }

// numInputs returns the number of data inputs of candidate i.
func (ix *index) numInputs(i int) int { return int(ix.inStart[i+1] - ix.inStart[i]) }

// build indexes the data edges at g's candidates (flagCandidate in flags),
// reading each node's inputs from its bytes. The candidates have
// candidateInputs inputs in all, control inputs included.
func (ix *index) build(g *Graph, flags []nodeFlags, candidateInputs int) {
	nodes := g.nodes
	ix.names.build(nodes)
	ix.inStart = resize(ix.inStart, len(nodes)+1)
	ix.outStart = resize(ix.outStart, len(nodes)+1)
	clear(ix.outStart)
	if cap(ix.inEdges) < candidateInputs {
		ix.inEdges = make([]port, 0, candidateInputs)
	}
	ix.inEdges = ix.inEdges[:0]
	ix.later = ix.later[:0]
	outDeg := ix.outStart[1:] // counted in place, then turned into offsets
	for i := range nodes {
		cand := flags[i]&flagCandidate != 0
		k := int32(0)
		for b := nodes[i].bytes(); ; {
			s, rest, ok := g.nextInput(b)
			if !ok {
				break
			}
			b = rest
			ep := ParseInput(s)
			if ep.Control {
				continue
			}
			from := ix.names.lookup(nodes, ep.Node)
			if from >= 0 && flags[from]&flagCandidate != 0 {
				outDeg[from]++
				if !cand {
					ix.later = append(ix.later, laterEdge{to: int32(i), toPort: k, from: from})
				}
			}
			if cand {
				ix.inEdges = append(ix.inEdges, port{node: from, port: int32(min(ep.Port, math.MaxInt32))})
			}
			k++
		}
		ix.inStart[i+1] = int32(len(ix.inEdges))
	}
	// outStart[i+1] holds node i's out-degree; a prefix sum makes it the
	// end of node i's out-edges, and filling backwards, by consumer and
	// port, from there leaves outStart[i] at the start of node i's, each
	// list in input order.
	for i := 1; i <= len(nodes); i++ {
		ix.outStart[i] += ix.outStart[i-1]
	}
	ix.outEdges = resize(ix.outEdges, int(ix.outStart[len(nodes)]))
	fill := ix.outStart[1:]
	add := func(from, to, toPort int32) {
		fill[from]--
		ix.outEdges[fill[from]] = port{node: to, port: toPort}
	}
	l := len(ix.later) - 1
	for i := len(nodes) - 1; i >= 0; i-- {
		if flags[i]&flagCandidate == 0 {
			for ; l >= 0 && ix.later[l].to == int32(i); l-- {
				add(ix.later[l].from, ix.later[l].to, ix.later[l].toPort)
			}
			continue
		}
		ins := ix.ins(i)
		for k := len(ins) - 1; k >= 0; k-- {
			if from := ins[k].node; from >= 0 && flags[from]&flagCandidate != 0 {
				add(from, int32(i), int32(k))
			}
		}
	}
	// fill[i] is now node i's start, which belongs at outStart[i]: shift.
	copy(ix.outStart[:len(nodes)], ix.outStart[1:])
	ix.outStart[len(nodes)] = int32(len(ix.outEdges))
}

// resize returns s with length n, reusing its array when it is large
// enough. The contents are unspecified.
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// nameTable maps node names to the index of the first node of that name:
// open addressing over node indices, four fifths full, so it costs five
// bytes a node whatever the node count (a power-of-two size would cost
// between four and eight). A slot holds the node index + 1 in its low bits
// and, above them, a fingerprint of the name's hash, so a probe compares
// the name in the graph's bytes only when the fingerprint matches.
type nameTable struct {
	seed    maphash.Seed
	slots   []uint32 // fingerprint<<idxBits | node index + 1; 0 is empty
	idxBits uint
}

func (t *nameTable) build(nodes []Node) {
	if t.slots == nil {
		t.seed = maphash.MakeSeed()
	}
	t.slots = resize(t.slots, len(nodes)+len(nodes)/4+16)
	clear(t.slots)
	t.idxBits = uint(bits.Len32(uint32(len(nodes)))) // nodes < 2^31: at least one fingerprint bit
	for i := range nodes {
		name := nodes[i].Name()
		h := maphash.String(t.seed, name)
		fp := t.fingerprint(h)
		for at := t.home(h); ; at = t.next(at) {
			v := t.slots[at]
			if v == 0 {
				t.slots[at] = fp | uint32(i+1)
				break
			}
			if v&^t.idxMask() == fp && nodes[v&t.idxMask()-1].Name() == name {
				break // the first node of a name keeps it
			}
		}
	}
}

func (t *nameTable) idxMask() uint32 { return 1<<t.idxBits - 1 }

// home returns the slot h probes first: h scaled to the table's size
// (the high word of h * size), which needs no power-of-two size.
func (t *nameTable) home(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(len(t.slots)))
	return int(hi)
}

// next returns the slot after at, wrapping around.
func (t *nameTable) next(at int) int {
	if at++; at == len(t.slots) {
		return 0
	}
	return at
}

// fingerprint returns the low bits of h above the index bits: home takes
// its slot from h's high bits.
func (t *nameTable) fingerprint(h uint64) uint32 {
	return uint32(h) &^ t.idxMask()
}

// lookup returns the index of the first node named name, or -1.
func (t *nameTable) lookup(nodes []Node, name string) int32 {
	h := maphash.String(t.seed, name)
	fp, im := t.fingerprint(h), t.idxMask()
	for at := t.home(h); ; at = t.next(at) {
		v := t.slots[at]
		if v == 0 {
			return -1
		}
		if v&^im == fp && nodes[v&im-1].Name() == name {
			return int32(v&im) - 1
		}
	}
}
