package tfcompat

import (
	"bytes"
	"os"
	"testing"
)

func TestMatrixConsistentWithRange(t *testing.T) {
	m, err := Matrix()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) == 0 {
		t.Fatal("empty matrix")
	}
	for i, e := range m.Entries {
		v := MustParseVersion(e.Version)
		inside := Supported.Contains(v)
		if inside == (e.Status == StatusUnsupported) {
			t.Errorf("entry %s: status %s but Supported.Contains = %v", e.Version, e.Status, inside)
		}
		if i > 0 && Compare(MustParseVersion(m.Entries[i-1].Version), v) >= 0 {
			t.Errorf("entries out of order at %s", e.Version)
		}
	}
	// Every minor of the supported range has an entry.
	for minor := 6; minor <= 16; minor++ {
		found := false
		for _, e := range m.Entries {
			r := MustParseVersion(e.Version).Release
			if len(r) >= 2 && r[0] == 2 && r[1] == minor {
				found = true
			}
		}
		if !found {
			t.Errorf("no matrix entry for 2.%d", minor)
		}
	}
}

// TestCompatMatrixDocUpToDate fails when docs/compat-matrix.md differs from
// what go generate would write.
func TestCompatMatrixDocUpToDate(t *testing.T) {
	m, err := Matrix()
	if err != nil {
		t.Fatal(err)
	}
	want := RenderMatrixMarkdown(m)
	got, err := os.ReadFile("docs/compat-matrix.md")
	if err != nil {
		t.Fatalf("%v (run go generate in tfcompat)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/compat-matrix.md is out of date; run go generate in tfcompat")
	}
}

func TestMatrixReturnsCopy(t *testing.T) {
	a, _ := Matrix()
	a.Entries[0].Status = "changed"
	b, _ := Matrix()
	if b.Entries[0].Status == "changed" {
		t.Fatal("Matrix shares state between calls")
	}
}
