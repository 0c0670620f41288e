package graphpass

import (
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

// edge is a data edge between node indices.
type edge struct {
	from, fromPort int // from == -1: producer not in the graph
	to, toPort     int
}

// index holds the data edges of a graph by node index, in compressed
// form: one flat edge array per direction and per-node offsets into it.
type index struct {
	inStart, outStart []int32 // len(nodes)+1 offsets
	inEdges, outEdges []edge
	numInputs         []int32
}

func (ix *index) ins(i int) []edge  { return ix.inEdges[ix.inStart[i]:ix.inStart[i+1]] }
func (ix *index) outs(i int) []edge { return ix.outEdges[ix.outStart[i]:ix.outStart[i+1]] }

func buildIndex(g *Graph) index {
	nodes := g.Nodes()
	byName := make(map[string]int32, len(nodes))
	for i, n := range nodes {
		if _, dup := byName[n.name]; !dup {
			byName[n.name] = int32(i)
		}
	}
	ix := index{
		inStart:   make([]int32, len(nodes)+1),
		outStart:  make([]int32, len(nodes)+1),
		numInputs: make([]int32, len(nodes)),
	}
	outDeg := make([]int32, len(nodes)+1)
	for i, n := range nodes {
		port := 0
		for _, s := range n.inputs {
			ep := ParseInput(s)
			if ep.Control {
				continue
			}
			from := -1
			if f, ok := byName[ep.Node]; ok {
				from = int(f)
				outDeg[from]++
			}
			ix.inEdges = append(ix.inEdges, edge{from: from, fromPort: ep.Port, to: i, toPort: port})
			port++
		}
		ix.numInputs[i] = int32(port)
		ix.inStart[i+1] = int32(len(ix.inEdges))
	}
	for i := range nodes {
		ix.outStart[i+1] = ix.outStart[i] + outDeg[i]
	}
	ix.outEdges = make([]edge, ix.outStart[len(nodes)])
	fill := outDeg[:len(nodes)]
	copy(fill, ix.outStart[:len(nodes)])
	for _, e := range ix.inEdges {
		if e.from >= 0 {
			ix.outEdges[fill[e.from]] = e
			fill[e.from]++
		}
	}
	return ix
}
