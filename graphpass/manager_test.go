package graphpass

import (
	"errors"
	"strings"
	"testing"

	gd "github.com/accelkit/accelkit/graphpass/graphpasstest"
)

// countPass counts nodes and optionally fails, to test the manager.
type countPass struct {
	name string
	err  error
	runs *[]string
}

func (c countPass) Name() string { return c.name }

func (c countPass) Run(g *Graph, st *Stats) error {
	*c.runs = append(*c.runs, c.name)
	st.Visited = len(g.Nodes())
	return c.err
}

func TestManager(t *testing.T) {
	g, err := Decode(gd.GraphDef(gd.Graph{Nodes: smallOps()}))
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	m := NewManager(countPass{name: "one", runs: &runs}, newPin(t, PinOptions{Getenv: func(string) string { return "" }}), countPass{name: "three", runs: &runs})
	if got := strings.Join(m.Names(), ","); got != "one,pin-host-compute,three" {
		t.Fatalf("names %s", got)
	}
	if err := m.Enable("three", false); err != nil {
		t.Fatal(err)
	}
	if err := m.Enable("nope", true); !errors.Is(err, ErrUnknownPass) || !strings.Contains(err.Error(), "pin-host-compute") {
		t.Fatalf("Enable(nope) = %v", err)
	}
	r, err := m.Run(g)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(runs, ",") != "one" {
		t.Errorf("runs %v", runs)
	}
	if len(r.Passes) != 3 || r.Passes[2].Enabled || r.Passes[1].Changed != 2 || r.Passes[0].Visited != 4 {
		t.Errorf("report %+v", r)
	}
	s := r.String()
	for _, want := range []string{"one: visited=4 changed=0", "pin-host-compute: visited=4 changed=2", "three: disabled", `e (Prod): "" -> "/device:CPU:0"`} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	// A failing pass stops the run and is named.
	boom := errors.New("boom")
	runs = nil
	m = NewManager(countPass{name: "bad", err: boom, runs: &runs}, countPass{name: "after", runs: &runs})
	r, err = m.Run(g)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "bad") || len(r.Passes) != 1 || len(runs) != 1 {
		t.Errorf("failing pass: %v %+v %v", err, r, runs)
	}
}
