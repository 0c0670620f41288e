package graphpass

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

//go:embed hostmemory.json
var defaultHostMemoryJSON []byte

// HostMemoryEntry says which ports of an op's device kernel live in host
// memory.
type HostMemoryEntry struct {
	// Inputs are data input indices in host memory; a negative index counts
	// from the end (-1 is the last data input).
	Inputs     []int `json:"inputs,omitempty"`
	AllInputs  bool  `json:"all_inputs,omitempty"`
	Outputs    []int `json:"outputs,omitempty"`
	AllOutputs bool  `json:"all_outputs,omitempty"`
	// Int32Attr names a type attr; when it is int32, every input and output
	// is in host memory (TensorFlow's special int32 GPU kernels).
	Int32Attr string `json:"int32_attr,omitempty"`
}

// HostMemoryTable maps op types to the host-memory ports of their device
// kernels.
//
// A table is read-only once built: it is safe for concurrent use, and a
// caller that edits Ops must do so before sharing it.
type HostMemoryTable struct {
	// Locking: a table has no mutex. It is read-only once built: every method
	// only reads it, so it is safe for concurrent use, and a caller that edits
	// Ops must do so before sharing it.

	Source string                     `json:"source"`
	Ops    map[string]HostMemoryEntry `json:"ops"`
}

// DefaultHostMemoryTable returns a fresh copy of the built-in table, taken
// from TensorFlow's GPU kernel registrations (see hostmemory.json for what
// was checked).
func DefaultHostMemoryTable() *HostMemoryTable {
	t, err := LoadHostMemoryTable(bytes.NewReader(defaultHostMemoryJSON))
	if err != nil {
		panic("graphpass: embedded hostmemory.json: " + err.Error()) // ruled out by tests
	}
	return t
}

// LoadHostMemoryTable reads a table in the hostmemory.json format
// ({"ops": {"Reshape": {"inputs": [1]}, ...}}); unknown keys are errors.
func LoadHostMemoryTable(r io.Reader) (*HostMemoryTable, error) {
	var t struct {
		Schema int `json:"schema"`
		HostMemoryTable
	}
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("graphpass: host memory table: %w (valid keys per op: inputs, all_inputs, outputs, all_outputs, int32_attr)", err)
	}
	if t.Ops == nil {
		t.Ops = map[string]HostMemoryEntry{}
	}
	return &t.HostMemoryTable, nil
}

func (t *HostMemoryTable) int32Kernel(n *Node, e HostMemoryEntry) bool {
	return e.Int32Attr != "" && n.TypeAttr(e.Int32Attr).Base() == DTInt32
}

// InputOnHost reports whether n's device kernel reads data input port
// (of numInputs data inputs) from host memory.
func (t *HostMemoryTable) InputOnHost(n *Node, port, numInputs int) bool {
	return t.inputOnHost(n, port, func() int { return numInputs })
}

// inputOnHost is InputOnHost with the input count asked for only when the
// op's entry counts ports from the end.
func (t *HostMemoryTable) inputOnHost(n *Node, port int, numInputs func() int) bool {
	e, ok := t.Ops[n.Op()]
	if !ok {
		return false
	}
	if e.AllInputs || t.int32Kernel(n, e) {
		return true
	}
	for _, i := range e.Inputs {
		if i < 0 {
			i += numInputs()
		}
		if i == port {
			return true
		}
	}
	return false
}

// OutputOnHost reports whether n's device kernel writes output port to
// host memory.
func (t *HostMemoryTable) OutputOnHost(n *Node, port int) bool {
	e, ok := t.Ops[n.Op()]
	if !ok {
		return false
	}
	return e.AllOutputs || t.int32Kernel(n, e) || slices.Contains(e.Outputs, port)
}
