package inspect

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestMain(m *testing.M) {
	RunChild() // the inspector's children are this test binary
	code := m.Run()
	if fixtures.dir != "" {
		os.RemoveAll(fixtures.dir)
	}
	os.Exit(code)
}

// fixtureSpecs are the C fixtures under testdata, each built once per test
// binary: source and -D flags.
var fixtureSpecs = map[string][]string{
	"pjrt_ok":          {"pjrt_fixture.c"},
	"pjrt_old":         {"pjrt_fixture.c", "-DFIX_MINOR=28", "-DFIX_FIELDS=90"},
	"pjrt_null":        {"pjrt_fixture.c", "-DFIX_NULL=10"}, // PJRT_Client_Create
	"pjrt_nosym":       {"pjrt_fixture.c", "-DFIX_NO_API"},
	"pjrt_segv":        {"pjrt_fixture.c", "-DFIX_SEGV"},
	"pjrt_hang":        {"pjrt_fixture.c", "-DFIX_HANG"},
	"pjrt_exit":        {"pjrt_fixture.c", "-DFIX_EXIT=3"},
	"pjrt_attr_unimpl": {"pjrt_fixture.c", "-DFIX_ATTR_UNIMPL"},
	"se_ok":            {"se_fixture.c"},
	"se_badsize":       {"se_fixture.c", "-DFIX_PLATFORM_SIZE=24"},
	"se_nocreate":      {"se_fixture.c", "-DFIX_NO_CREATE_DEVICE", "-DFIX_NO_GRAPH"},
}

var fixtures struct {
	once  sync.Once
	dir   string
	paths map[string]string
	skip  string
	err   error
}

func compiler() string {
	if cc := os.Getenv("CC"); cc != "" {
		return cc
	}
	return "cc"
}

func buildFixtures() {
	if !supported {
		fixtures.skip = fmt.Sprintf("loading plugins is not supported on %s/%s", runtime.GOOS, runtime.GOARCH)
		return
	}
	cc, err := exec.LookPath(compiler())
	if err != nil {
		fixtures.skip = fmt.Sprintf("no C compiler (%s) to build the fixture plugins: %v", compiler(), err)
		return
	}
	if fixtures.dir, fixtures.err = os.MkdirTemp("", "inspect-fixtures-"); fixtures.err != nil {
		return
	}
	fixtures.paths = map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2) // two cores
	for name, spec := range fixtureSpecs {
		out := filepath.Join(fixtures.dir, name+".so")
		fixtures.paths[name] = out
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			args := append([]string{"-O1", "-Wall", "-Werror", "-shared", "-fPIC", "-fvisibility=hidden", "-o", out, filepath.Join("testdata", spec[0])}, spec[1:]...)
			if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
				mu.Lock()
				fixtures.err = fmt.Errorf("building fixture %s: %v\n%s", name, err, b)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// fixture returns the path of a built fixture plugin, skipping t when there
// is no C compiler.
func fixture(t testing.TB, name string) string {
	t.Helper()
	fixtures.once.Do(buildFixtures)
	if fixtures.skip != "" {
		t.Skip(fixtures.skip)
	}
	if fixtures.err != nil {
		t.Fatal(fixtures.err)
	}
	p, ok := fixtures.paths[name]
	if !ok {
		t.Fatalf("no fixture %q", name)
	}
	return p
}

// TestLayoutMatchesC holds every offset and size in layout.go against the
// C compiler's for the structs transcribed from the headers
// (testdata/pjrt_layout.h, testdata/se_layout.h).
func TestLayoutMatchesC(t *testing.T) {
	fixture(t, "pjrt_ok") // skips without a compiler
	probe := filepath.Join(t.TempDir(), "probe")
	if b, err := exec.Command(compiler(), "-Wall", "-Werror", "-o", probe, "testdata/layout_probe.c").CombinedOutput(); err != nil {
		t.Fatalf("building the layout probe: %v\n%s", err, b)
	}
	out, err := exec.Command(probe).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"pjrtAPIVersionOff": pjrtAPIVersionOff, "pjrtVersionMajorOff": pjrtVersionMajorOff,
		"pjrtVersionMinorOff": pjrtVersionMinorOff, "pjrtVersionStructSize": pjrtVersionStructSize,
		"pjrtFirstFnOff": pjrtFirstFnOff, "pjrtErrorDestroyArgsSize": pjrtErrorDestroyArgsSize,
		"pjrtErrorMessageArgsSize": pjrtErrorMessageArgsSize, "pjrtErrorMessageMsgOff": pjrtErrorMessageMsgOff,
		"pjrtErrorMessageLenOff": pjrtErrorMessageLenOff, "pjrtErrorGetCodeArgsSize": pjrtErrorGetCodeArgsSize,
		"pjrtErrorGetCodeCodeOff": pjrtErrorGetCodeCodeOff, "pjrtPluginInitializeArgsSize": pjrtPluginInitializeArgsSize,
		"pjrtPluginAttributesArgsSize": pjrtPluginAttributesArgsSize, "pjrtPluginAttributesPtrOff": pjrtPluginAttributesPtrOff,
		"pjrtPluginAttributesNumOff": pjrtPluginAttributesNumOff, "pjrtNamedValueSize": pjrtNamedValueSize,
		"pjrtNamedValueSizeof": pjrtNamedValueSize, "pjrtNamedValueNameOff": pjrtNamedValueNameOff,
		"pjrtNamedValueNameLen": pjrtNamedValueNameLen, "pjrtNamedValueTypeOff": pjrtNamedValueTypeOff,
		"pjrtNamedValueUnionOff": pjrtNamedValueUnionOff, "pjrtNamedValueValLenOff": pjrtNamedValueValLenOff,
		"pjrtAPIStructSize": pjrtAPIStructSize,
		"seParamsSize":      seParamsSize, "seParamsMajorOff": seParamsMajorOff, "seParamsMinorOff": seParamsMinorOff,
		"seParamsPatchOff": seParamsPatchOff, "seParamsPlatformOff": seParamsPlatformOff, "seParamsFnsOff": seParamsFnsOff,
		"seParamsDestroyPOff": seParamsDestroyPOff, "seParamsDestroyFnOff": seParamsDestroyFnOff,
		"spPlatformNameOff": spPlatformNameOff, "spPlatformTypeOff": spPlatformTypeOff, "spPlatformUMOff": spPlatformUMOff,
		"spPlatformSizeV0": spPlatformSizeV0, "spPlatformSizeBFC": spPlatformSizeBFC, "spPlatformSizeFMG": spPlatformSizeFMG,
		"spPlatformFnsFirstOff": spPlatformFnsFirstOff, "spPlatformFnsSize": spPlatformFnsSize,
		"tpParamsSize": tpParamsSize, "tpParamsMajorOff": tpParamsMajorOff, "tpParamsDeviceOff": tpParamsDeviceOff,
		"tpParamsConfigsOff": tpParamsConfigsOff, "tpParamsOptOff": tpParamsOptOff, "tpConfigsSize": tpConfigsSize,
		"tpOptimizerSize": tpOptimizerSize, "tpOptimizerCreateOff": tpOptimizerCreateOff,
		"tpOptimizerOptOff": tpOptimizerOptOff, "tpOptimizerDestroyOff": tpOptimizerDestroyOff,
	}
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		name, val, _ := strings.Cut(sc.Text(), " ")
		got, err := strconv.Atoi(val)
		if err != nil {
			t.Fatalf("probe line %q", sc.Text())
		}
		w, ok := want[name]
		if !ok {
			t.Errorf("probe prints %s, which the test does not check", name)
			continue
		}
		seen++
		if got != w {
			t.Errorf("%s: C says %d, layout.go %d", name, got, w)
		}
	}
	if seen != len(want) {
		t.Errorf("probe printed %d of the %d checked values", seen, len(want))
	}
}
