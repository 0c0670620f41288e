//go:build linux && cgo

package cudatest

import (
	"debug/elf"
	"slices"
	"testing"

	"github.com/accelkit/accelkit/driver/internal/cshared"
)

// symbols returns the dynamic symbols path imports and those it exports.
func symbols(t *testing.T, path string) (imported, exported []string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF {
			imported = append(imported, s.Name)
		} else {
			exported = append(exported, s.Name)
		}
	}
	return imported, exported
}

// TestBuildWith: Omit leaves entry points out, ASan instruments the fake
// exactly under go test -asan, a plain Build never, and Runtime refuses a
// fake built without an entry point it calls.
func TestBuildWith(t *testing.T) {
	plain := Build(t)
	in, out := symbols(t, plain.Path)
	if slices.Contains(in, "__asan_init") {
		t.Error("Build instrumented the fake with ASan; a child process without the ASan runtime could not load it")
	}
	if !slices.Contains(out, "cuStreamDestroy_v2") {
		t.Fatal("the plain fake does not export cuStreamDestroy_v2")
	}

	l := BuildWith(t, Options{Omit: []string{"cuStreamDestroy_v2"}, ASan: true})
	in, out = symbols(t, l.Path)
	if slices.Contains(out, "cuStreamDestroy_v2") {
		t.Error("Options.Omit did not leave cuStreamDestroy_v2 out")
	}
	if got, want := slices.Contains(in, "__asan_init"), cshared.ASanFlags != nil; got != want {
		t.Errorf("Options.ASan: instrumented %v, want %v (go test -asan: %v)", got, want, want)
	}
	if _, err := l.Runtime(); err == nil {
		t.Error("Runtime on a fake without cuStreamDestroy_v2 succeeded")
	}
	if n := l.Counter("cuInit"); n != 0 {
		t.Errorf("Counter(cuInit) = %d before any call, want 0", n)
	}
}
