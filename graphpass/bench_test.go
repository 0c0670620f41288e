package graphpass

import (
	"testing"

	gd "github.com/accelkit/accelkit/graphpass/graphpasstest"
)

// BenchmarkDecodePassEncode100k measures decode + pin-host-compute +
// encode of a generated 100k-node graph (the README's figure).
func BenchmarkDecodePassEncode100k(b *testing.B) {
	pb := gd.Model(100_000)
	pass := newPin(b, PinOptions{Getenv: func(string) string { return "" }})
	b.SetBytes(int64(len(pb)))
	var moved int
	cpu0 := processCPU()
	for b.Loop() {
		g, err := Decode(pb)
		if err != nil {
			b.Fatal(err)
		}
		var st Stats
		if err := pass.Run(g, &st); err != nil {
			b.Fatal(err)
		}
		moved = st.Changed
		_ = g.Encode()
	}
	b.ReportMetric(float64(processCPU()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(moved), "moved")
	b.ReportMetric(float64(len(pb))/1e6, "MB")
}

// BenchmarkStages splits the 100k-node figure into its parts.
func BenchmarkStages(b *testing.B) {
	pb := gd.Model(100_000)
	pass := newPin(b, PinOptions{Getenv: func(string) string { return "" }})
	cpu := func(b *testing.B, f func()) {
		cpu0 := processCPU()
		for b.Loop() {
			f()
		}
		b.ReportMetric(float64(processCPU()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
	}
	b.Run("decode", func(b *testing.B) {
		cpu(b, func() {
			if _, err := Decode(pb); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("pass", func(b *testing.B) {
		g, _ := Decode(pb)
		cpu(b, func() {
			var st Stats
			_ = pass.plan(g, &st)
		})
	})
	b.Run("encode-changed", func(b *testing.B) {
		g, _ := Decode(pb)
		var st Stats
		_ = pass.Run(g, &st)
		cpu(b, func() { _ = g.Encode() })
	})
}

func TestModelGraphPass(t *testing.T) {
	pb := gd.Model(2000)
	g, err := Decode(pb)
	if err != nil {
		t.Fatal(err)
	}
	var st Stats
	if err := newPin(t, PinOptions{Getenv: func(string) string { return "" }}).Run(g, &st); err != nil {
		t.Fatal(err)
	}
	blocks, pinned := 0, 0
	for _, n := range g.Nodes() {
		switch n.Op() {
		case "Shape":
			blocks++
		case "Cast":
			pinned++ // the block's Pack has a float consumer
		}
	}
	// Each movable block moves 7 nodes: shape, 3 slice consts, ss, dim, pack.
	if want := 7 * (blocks - pinned); st.Changed != want {
		t.Errorf("moved %d, want %d", st.Changed, want)
	}
}
