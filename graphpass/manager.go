package graphpass

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Pass is one graph rewrite. Run changes g in place (only through
// Node.SetDevice today) and records what it did in st.
type Pass interface {
	Name() string
	Run(g *Graph, st *Stats) error
}

// Change is one node a pass changed.
type Change struct {
	Node     string
	Op       string
	From, To string // device before and after
}

// Stats are a pass's counters for one run.
type Stats struct {
	Visited       int      // nodes the pass examined
	Changed       int      // nodes the pass changed
	FixpointSteps int      // node checks done while iterating to a fixpoint
	Changes       []Change // the changed nodes, in graph order
	Notes         []string // anything the pass wants in the report
}

// PassReport is one pass's line of a Report.
type PassReport struct {
	Name    string
	Enabled bool
	Stats
	Duration time.Duration
}

// Report is what Manager.Run returns.
type Report struct {
	Passes []PassReport
}

// String renders the report: one line of counts per pass, then each change.
func (r Report) String() string {
	var b strings.Builder
	for _, p := range r.Passes {
		if !p.Enabled {
			fmt.Fprintf(&b, "%s: disabled\n", p.Name)
			continue
		}
		fmt.Fprintf(&b, "%s: visited=%d changed=%d fixpoint_steps=%d time=%s\n",
			p.Name, p.Visited, p.Changed, p.FixpointSteps, p.Duration.Round(time.Microsecond))
		for _, n := range p.Notes {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
		for _, c := range p.Changes {
			fmt.Fprintf(&b, "  %s (%s): %q -> %q\n", c.Node, c.Op, c.From, c.To)
		}
	}
	return b.String()
}

// Manager runs passes in order.
//
// Configure a Manager (Enable) before use; Run may then be called from
// several goroutines on different graphs, but Enable must not run
// concurrently with Run.
type Manager struct {
	// Locking: a Manager has no mutex. Configure it (Enable) before use; Run
	// only reads its passes and switches, so it may then be called from several
	// goroutines on different graphs, but Enable must not race with Run.

	passes  []Pass
	enabled []bool
}

// NewManager returns a manager that runs passes in the given order, all
// enabled.
func NewManager(passes ...Pass) *Manager {
	m := &Manager{passes: slices.Clone(passes), enabled: make([]bool, len(passes))}
	for i := range m.enabled {
		m.enabled[i] = true
	}
	return m
}

// Names returns the passes' names in order.
func (m *Manager) Names() []string {
	names := make([]string, len(m.passes))
	for i, p := range m.passes {
		names[i] = p.Name()
	}
	return names
}

// Enable switches the named pass on or off.
func (m *Manager) Enable(name string, on bool) error {
	for i, p := range m.passes {
		if p.Name() == name {
			m.enabled[i] = on
			return nil
		}
	}
	return fmt.Errorf("%w %q; valid: %s", ErrUnknownPass, name, strings.Join(m.Names(), ", "))
}

// Run runs the enabled passes on g in order and reports each. It stops at
// the first pass that fails, returning the report so far.
func (m *Manager) Run(g *Graph) (Report, error) {
	var r Report
	for i, p := range m.passes {
		pr := PassReport{Name: p.Name(), Enabled: m.enabled[i]}
		if pr.Enabled {
			start := time.Now()
			err := p.Run(g, &pr.Stats)
			pr.Duration = time.Since(start)
			if err != nil {
				r.Passes = append(r.Passes, pr)
				return r, fmt.Errorf("graphpass: pass %s: %w", p.Name(), err)
			}
		}
		r.Passes = append(r.Passes, pr)
	}
	return r, nil
}
