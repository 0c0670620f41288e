package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedFileIsCurrent fails when driver/backendkit/compose_wrappers.go is not
// what the generator makes of the Capabilities struct in compose.go, for
// example after a capability was added without `go generate`.
func TestGeneratedFileIsCurrent(t *testing.T) {
	want, err := generate("../..")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("../..", output))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("driver/backendkit/%s is stale: run `go generate` in driver/backendkit/ (it runs `go run ./internal/gencompose`)", output)
	}
}

// TestGenerate checks the generated code for a struct of two capabilities
// and the errors for structs the wrappers cannot be made from.
func TestGenerate(t *testing.T) {
	tests := []struct {
		name, fields string
		want         []string // in the output, or in the error when err
		err          bool
	}{
		{"two", "A driver.Alpha\n\tB driver.Beta", []string{
			"package backendkit", `import "github.com/accelkit/accelkit/driver"`,
			"func offersExactly(base driver.Device, caps Capabilities) bool",
			"c0, has0 := base.(driver.Alpha)", "has1 == (caps.B != nil) && (!has1 || caps.B == c1)",
			"case 3:\n\t\treturn &withAB{c, caps.A, caps.B}", "withB struct {\n\t\tcomposed\n\t\tdriver.Beta\n\t}",
		}, false},
		{"names sharing a type", "A, B driver.Alpha", []string{"two fields have one type"}, true},
		{"embedded", "driver.Alpha", []string{"every field must be named", "embedded driver.Alpha"}, true},
		{"unqualified type", "A Alpha", []string{"package driver", "A Alpha"}, true},
		{"type of another package", "A io.Reader", []string{"A io.Reader"}, true},
		{"empty", "", []string{"no fields"}, true},
		{"too many", "A driver.A\n\tB driver.B\n\tC driver.C\n\tD driver.D\n\tE driver.E\n\tF driver.F\n\tG driver.G\n\tH driver.H\n\tI driver.I", []string{"9 fields; at most 8"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			src := "package backendkit\n\ntype Capabilities struct {\n\t" + tt.fields + "\n}\n"
			if err := os.WriteFile(filepath.Join(dir, source), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := generate(dir)
			text := string(out)
			if tt.err {
				if err == nil {
					t.Fatalf("generate accepted Capabilities{%s}", tt.fields)
				}
				text = err.Error()
			} else if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("%s lacks %q:\n%s", map[bool]string{true: "error", false: "output"}[tt.err], w, text)
				}
			}
		})
	}
	if _, err := generate(t.TempDir()); err == nil || !strings.Contains(err.Error(), source) {
		t.Errorf("generate without %s = %v; want an error naming it", source, err)
	}
}
