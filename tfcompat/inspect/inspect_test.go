package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/accelkit/accelkit/tfcompat"
)

func ptrVersion(s string) *tfcompat.Version {
	v := tfcompat.MustParseVersion(s)
	return &v
}

// TestFixtureVerdicts runs the inspector on each fixture plugin and checks
// its verdict and the finding that decided it.
func TestFixtureVerdicts(t *testing.T) {
	fw := &tfcompat.APIVersion{Major: 0, Minor: 94}
	tests := []struct {
		fixture string
		opts    Options
		verdict Severity
		kind    Kind
		check   string   // a finding with this check...
		want    []string // ...whose message holds these
	}{
		{"pjrt_ok", Options{Framework: fw, Init: true}, OK, KindPJRT,
			"pjrt.framework", []string{"accepts plugin 0.94", "plugin minor >= 29"}},
		{"pjrt_ok", Options{Framework: &tfcompat.APIVersion{Major: 0, Minor: 54}, Strict: true}, Fail, KindPJRT,
			"pjrt.framework", []string{"plugin 0.94, framework 0.54", "Mismatched PJRT plugin PJRT API version (0.94) and framework PJRT API version 0.54"}},
		{"pjrt_old", Options{Framework: fw}, Fail, KindPJRT,
			"pjrt.framework", []string{"plugin 0.28, framework 0.94", "plugin minor >= 29", "upgrade the plugin"}},
		{"pjrt_null", Options{Framework: fw}, Fail, KindPJRT,
			"pjrt.null", []string{"PJRT_Client_Create is NULL"}},
		{"pjrt_nosym", Options{}, Fail, KindUnknown,
			"symbols", []string{"neither GetPjrtApi", "SE_InitPlugin"}},
		{"pjrt_segv", Options{}, Fail, KindUnknown,
			"child", []string{"SIGSEGV", "calling GetPjrtApi"}},
		{"pjrt_hang", Options{Timeout: time.Second}, Fail, KindUnknown,
			"child", []string{"no answer within 1s", "calling GetPjrtApi"}},
		{"pjrt_exit", Options{}, Fail, KindUnknown,
			"child", []string{"exit code 3", "calling GetPjrtApi"}},
		{"pjrt_attr_unimpl", Options{Framework: fw, Init: true}, Fail, KindPJRT,
			"pjrt.attributes", []string{"PJRT_Plugin_Attributes is unimplemented", "not implemented", "aws-neuron-sdk#1094"}},
		{"se_ok", Options{TensorFlow: ptrVersion("2.6.1")}, OK, KindPluggable,
			"graph", []string{`registered for "GPU"`, "optimize_func"}},
		{"se_ok", Options{TensorFlow: ptrVersion("2.16.1")}, Warn, KindPluggable,
			"se.struct_size", []string{"SP_Platform struct_size 34 < 35", "older stream_executor.h"}},
		{"se_badsize", Options{TensorFlow: ptrVersion("2.6.1")}, Fail, KindPluggable,
			"se.struct_size", []string{"SP_Platform struct_size 24 < 33"}},
		{"se_nocreate", Options{}, Fail, KindPluggable,
			"se.null", []string{"SP_PlatformFns.create_device is NULL", "ValidateSPPlatformFns"}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			t.Parallel()
			path := fixture(t, tt.fixture)
			r, err := Inspect(context.Background(), path, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != tt.verdict || r.Kind != tt.kind {
				t.Errorf("verdict %s kind %s, want %s %s; findings:\n%s", r.Verdict, r.Kind, tt.verdict, tt.kind, findings(r))
			}
			if !hasFinding(r, tt.check, tt.want...) {
				t.Errorf("no %s finding with %q; findings:\n%s", tt.check, tt.want, findings(r))
			}
		})
	}
}

func findings(r Report) string {
	var b strings.Builder
	for _, f := range r.Findings {
		b.WriteString("  " + string(f.Severity) + " " + f.Check + ": " + f.Message + "\n")
	}
	if r.Child.Stderr != "" {
		b.WriteString("  stderr: " + r.Child.Stderr + "\n")
	}
	return b.String()
}

func hasFinding(r Report, check string, want ...string) bool {
	for _, f := range r.Findings {
		if f.Check != check {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(f.Message, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestPJRTFacts checks what the well-formed fixture reports beyond its
// verdict: the version, the fields, the attributes (the escape sequence in
// one made printable) and that nothing is NULL.
func TestPJRTFacts(t *testing.T) {
	t.Parallel()
	r, err := Inspect(context.Background(), fixture(t, "pjrt_ok"), Options{Init: true})
	if err != nil {
		t.Fatal(err)
	}
	p := r.PJRT
	if p == nil {
		t.Fatalf("no PJRT facts; findings:\n%s", findings(r))
	}
	if p.Major != 0 || p.Minor != 94 || p.Fields != len(pjrtFields) || p.StructSize != pjrtAPIStructSize || len(p.Null) != 0 {
		t.Errorf("facts %+v", p)
	}
	want := []Attribute{
		{"xla_version", "int64", "2"},
		{"stablehlo_current_version", "int64_list", "[1 9 3]"},
		{"platform", "string", `fake\u001b[2J`},
	}
	if len(p.Attributes) != len(want) {
		t.Fatalf("attributes %+v, want %+v", p.Attributes, want)
	}
	for i := range want {
		if p.Attributes[i] != want[i] {
			t.Errorf("attribute %d = %+v, want %+v", i, p.Attributes[i], want[i])
		}
	}
	if p.Initialize == nil || !p.Initialize.Called || p.Initialize.Error != "" {
		t.Errorf("initialize %+v", p.Initialize)
	}
	// Without Init nothing is called.
	r, err = Inspect(context.Background(), fixture(t, "pjrt_ok"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.PJRT.Initialize != nil || r.PJRT.Attributes != nil || !hasFinding(r, "pjrt.init", "not called") {
		t.Errorf("without Init: %+v\n%s", r.PJRT, findings(r))
	}
}

func TestDeviceFacts(t *testing.T) {
	t.Parallel()
	r, err := Inspect(context.Background(), fixture(t, "se_ok"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := r.Device
	if d == nil || d.Name != "MY_DEVICE" || d.Type != "GPU" || d.PlatformStructSize != spPlatformSizeBFC ||
		d.PlatformFnsStructSize != spPlatformFnsSize || d.ParamsStructSize != seParamsSize || len(d.Null) != 0 || !d.InitKernel {
		t.Errorf("device facts %+v\n%s", d, findings(r))
	}
	if g := r.Graph; g == nil || g.DeviceType != "GPU" || strings.Join(g.Callbacks, ",") != "optimize_func" {
		t.Errorf("graph facts %+v", g)
	}
}

func TestInspectNotAPlugin(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.so")
	os.WriteFile(text, []byte("not an ELF file"), 0o644)
	for _, tt := range []struct {
		path, check, want string
	}{
		{filepath.Join(dir, "missing.so"), "file", "no such file"},
		{dir, "file", "not a regular file"},
		{text, "dlopen", "LD_LIBRARY_PATH"},
	} {
		if tt.check == "dlopen" && !supported {
			continue
		}
		r, err := Inspect(context.Background(), tt.path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict != Fail || !hasFinding(r, tt.check, tt.want) {
			t.Errorf("%s: %s\n%s", tt.path, r.Verdict, findings(r))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Inspect(ctx, text, Options{}); err == nil {
		t.Error("Inspect with a canceled context: no error")
	}
}

// TestInspectPlugins follows PJRT_NAMES_AND_LIBRARY_PATHS through a JSON
// config, and reports a config naming a missing library and a library
// named twice.
func TestInspectPlugins(t *testing.T) {
	ok, old := fixture(t, "pjrt_ok"), fixture(t, "pjrt_old")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "old.json")
	os.WriteFile(cfg, []byte(`{"library_path": "`+old+`", "create_options": {"visible_devices": [0, 1]}}`), 0o644)
	missing := filepath.Join(dir, "missing.json")
	os.WriteFile(missing, []byte(`{"library_path": "`+filepath.Join(dir, "gone.so")+`"}`), 0o644)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"path": "x.so"}`), 0o644)
	env := "cuda:" + ok + ",old:" + cfg + ",gone:" + missing + ",bad:" + bad + ",again:" + ok
	fw := &tfcompat.APIVersion{Major: 0, Minor: 94}
	reports, err := InspectPlugins(context.Background(), env, Options{Framework: fw})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 5 {
		t.Fatalf("%d reports, want 5", len(reports))
	}
	checks := []struct {
		name    string
		verdict Severity
		check   string
		want    string
	}{
		{"cuda", OK, "pjrt.framework", "accepts"},
		{"old", Fail, "pjrt.framework", "plugin minor >= 29"},
		{"gone", Fail, "file", "gone.so"},
		{"bad", Fail, "config", `no "library_path"`},
		{"again", Warn, "config", `also plugin "cuda"'s`},
	}
	for i, c := range checks {
		r := reports[i]
		if r.Name != c.name || r.Verdict != c.verdict || !hasFinding(r, c.check, c.want) {
			t.Errorf("report %d: %s %s, want %s %s with %s %q\n%s", i, r.Name, r.Verdict, c.name, c.verdict, c.check, c.want, findings(r))
		}
	}
	if reports[1].Config != cfg || reports[1].Path != old {
		t.Errorf("config report: config %q path %q", reports[1].Config, reports[1].Path)
	}
	if Worst(reports) != Fail {
		t.Errorf("Worst = %s", Worst(reports))
	}
	if _, err := InspectPlugins(context.Background(), "cuda"+ok, Options{}); err == nil {
		t.Error("malformed PJRT_NAMES_AND_LIBRARY_PATHS: no error")
	}

	var js bytes.Buffer
	if err := WriteJSON(&js, reports); err != nil {
		t.Fatal(err)
	}
	var back []Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back) != 5 || back[1].Verdict != Fail || back[0].PJRT.Minor != 94 {
		t.Errorf("JSON round trip: %v %+v", err, back)
	}
	var txt bytes.Buffer
	if err := WriteText(&txt, reports); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"OK: cuda (" + ok + ") [pjrt]", "FAIL: old (" + old + ")", "config: " + cfg, "PJRT C API 0.28"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, txt.String())
		}
	}
}

// TestInspectCanceled: a caller's cancellation while the child runs is the
// caller's error, not a verdict on the plugin.
func TestInspectCanceled(t *testing.T) {
	t.Parallel()
	path := fixture(t, "pjrt_hang")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Inspect(ctx, path, Options{Timeout: time.Minute}); err == nil {
		t.Error("no error after the context ended")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
}
