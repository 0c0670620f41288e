package graphpass

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	gdtest "github.com/accelkit/accelkit/graphpass/graphpasstest"
)

// goldenRun decodes in, runs PinHostCompute and encodes: the encoded bytes
// and a rendering of the Stats (every counter, note and change) that the
// golden test hashes.
func goldenRun(t *testing.T, in []byte) (out []byte, stats string) {
	t.Helper()
	g, err := Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	var st Stats
	if err := newPin(t, PinOptions{Getenv: func(string) string { return "" }}).Run(g, &st); err != nil {
		t.Fatal(err)
	}
	return g.Encode(), fmt.Sprintf("%d %d %d %q %q", st.Visited, st.Changed, st.FixpointSteps, st.Notes, st.Changes)
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestGoldenOutput pins the bytes Encode writes and the Stats
// PinHostCompute reports to those of the code before issue 41's rewrite of
// the pass and the codec (graphpass at 9b57330, whose output the hashes
// below are): the model graph of the benchmark, and the same graph with
// device fields dropped and replaced on some nodes and then pinned, which
// takes Encode's insert, replace and drop paths.
func TestGoldenOutput(t *testing.T) {
	type golden struct{ out, stats string }
	cases := []struct {
		name  string
		nodes int
		mixed bool
		want  golden
	}{
		{"model 100k", 100_000, false, golden{
			"0731696115a8866394469c2859dc38f1e740f5e75ddfd27ceeb00912c643537f",
			"3b86969d18c90834ba5d7561d57a4d4834612f1f82eb9c38e135977910eda46b"}},
		{"model 20k", 20_000, false, golden{
			"7448152e3a51cbcbf1aa39450e5f84c8d5262114747e94b98a7d2748b1d9d369",
			"da1ec5b1ba144544dfca22881d6d06cee2898e707b7e0b64b9599eb7cf7e376b"}},
		{"mixed 3k", 3_000, true, golden{
			"d16106ae3b187f6d4e8cc87d44f48ea605768dbd14a6e9f93f40920516be3b0e",
			"21110f173cb55ee96c2f9066a938193f53e5fa8428426b3d5eed959c740a4b8f"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if raceEnabled && c.nodes > 20_000 {
				t.Skip("the 100k graph takes several seconds under -race; the benchmark and the non-race run check it")
			}
			in := gdtest.Model(c.nodes)
			if c.mixed {
				g, err := Decode(in)
				if err != nil {
					t.Fatal(err)
				}
				for i, n := range g.Nodes() {
					switch i % 3 {
					case 0:
						n.SetDevice("")
					case 1:
						n.SetDevice("/job:w/replica:0/task:1/device:GPU:1")
					}
				}
				in = g.Encode()
			}
			out, stats := goldenRun(t, in)
			got := golden{sum(out), sum([]byte(stats))}
			t.Logf("%s: out %s stats %s", c.name, got.out, got.stats)
			if got != c.want {
				t.Errorf("output or stats differ from the code before the rewrite:\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}
