package tfcompat

import "testing"

// BenchmarkParseVersion measures parsing of the version forms TensorFlow
// publishes and reports how many parse per microsecond.
func BenchmarkParseVersion(b *testing.B) {
	forms := []string{"2.6.1", "2.16.0rc1", "2.17.0-rc0", "2.15.0.dev20240101", "2.13.0+nv23.08"}
	n := 0
	for b.Loop() {
		for _, s := range forms {
			if _, err := ParseVersion(s); err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	b.ReportMetric(float64(n)/float64(b.Elapsed().Microseconds()+1), "parses/us")
}

// BenchmarkContains measures the range check Check performs.
func BenchmarkContains(b *testing.B) {
	v := MustParseVersion("2.16.1+nv24.01")
	for b.Loop() {
		if !Supported.Contains(v) {
			b.Fatal("outside")
		}
	}
}
