package tfcompat

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestCheckPJRT(t *testing.T) {
	fw := APIVersion{0, 54}
	tests := []struct {
		plugin APIVersion
		compat bool
		ok     bool
		rule   string
	}{
		{APIVersion{0, 54}, false, true, ""},
		{APIVersion{0, 53}, false, false, "must be equal"},
		{APIVersion{0, 55}, false, false, "must be equal"},
		{APIVersion{1, 54}, false, false, "must be equal"},
		{APIVersion{0, 53}, true, true, ""},
		{APIVersion{0, 60}, true, true, ""},
		{APIVersion{0, 29}, true, true, ""},
		{APIVersion{0, 28}, true, false, "plugin minor >= 29"},
		{APIVersion{1, 54}, true, false, "equal major"},
	}
	for _, tt := range tests {
		err := CheckPJRT(fw, tt.plugin, tt.compat)
		if tt.ok {
			if err != nil {
				t.Errorf("CheckPJRT(%s, %s, %v) = %v", fw, tt.plugin, tt.compat, err)
			}
			continue
		}
		if !errors.Is(err, ErrPJRTVersion) {
			t.Errorf("CheckPJRT(%s, %s, %v) = %v, want ErrPJRTVersion", fw, tt.plugin, tt.compat, err)
			continue
		}
		for _, want := range []string{tt.plugin.String(), fw.String(), tt.rule} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
	}
	if err := CheckPJRTMin(fw, APIVersion{0, 40}, true, 41); !errors.Is(err, ErrPJRTVersion) {
		t.Errorf("CheckPJRTMin below custom minimum = %v", err)
	}
}

func TestParsePluginPaths(t *testing.T) {
	got, err := ParsePluginPathsFor("cuda:/opt/a.so,mydev:/etc/mydev.json", "linux")
	if err != nil {
		t.Fatal(err)
	}
	want := []Plugin{{"cuda", "/opt/a.so", false}, {"mydev", "/etc/mydev.json", true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	got, err = ParsePluginPathsFor(`cuda;C:\pjrt\a.dll`, "windows")
	if err != nil || len(got) != 1 || got[0].Path != `C:\pjrt\a.dll` {
		t.Fatalf("windows: %+v, %v", got, err)
	}
	if got, err := ParsePluginPathsFor("", "linux"); got != nil || err != nil {
		t.Fatalf("empty: %v, %v", got, err)
	}
	if _, err := ParsePluginPaths("a" + map[bool]string{true: ";", false: ":"}[isWindows()] + "/x.so"); err != nil {
		t.Fatalf("ParsePluginPaths with the native separator: %v", err)
	}
}

func TestParsePluginPathsErrors(t *testing.T) {
	tests := []struct {
		in, goos string
		pos      int
		reason   string
	}{
		{"cuda/opt/a.so", "linux", 1, "missing separator"},
		{"a:/x.so,b/y.so", "linux", 2, "missing separator"},
		{":/x.so", "linux", 1, "empty name"},
		{"a:", "linux", 1, "empty path"},
		{"a:/x.so,", "linux", 2, "empty entry"},
		{"a:/x.so,a:/y.so", "linux", 2, "duplicate name"},
		{"a:/x:y.so", "linux", 1, "more than one separator"},
		{`cuda:C:\a.dll`, "windows", 1, "missing separator ;"},
	}
	for _, tt := range tests {
		_, err := ParsePluginPathsFor(tt.in, tt.goos)
		var pe *PluginPathError
		if !errors.As(err, &pe) || !errors.Is(err, ErrPluginPaths) {
			t.Errorf("%q: err = %v, want *PluginPathError", tt.in, err)
			continue
		}
		if pe.Pos != tt.pos || !strings.Contains(pe.Reason, strings.TrimSuffix(tt.reason, " ;")) {
			t.Errorf("%q: pos %d reason %q, want pos %d reason %q", tt.in, pe.Pos, pe.Reason, tt.pos, tt.reason)
		}
		if !strings.Contains(err.Error(), "expected name") {
			t.Errorf("%q: error %q lacks the expected form", tt.in, err)
		}
	}
}

func FuzzParsePluginPaths(f *testing.F) {
	for _, s := range []string{"cuda:/opt/a.so", "a:/x.so,b:/y.json", ":", ",", "a:b:c", "a;b", "x:y,x:z"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, windows bool) {
		goos := "linux"
		sep := ":"
		if windows {
			goos, sep = "windows", ";"
		}
		ps, err := ParsePluginPathsFor(s, goos)
		if err != nil {
			if !errors.Is(err, ErrPluginPaths) {
				t.Fatalf("error does not wrap ErrPluginPaths: %v", err)
			}
			return
		}
		// A successful parse re-joins to the input.
		var parts []string
		names := map[string]bool{}
		for _, p := range ps {
			if p.Name == "" || p.Path == "" || names[p.Name] {
				t.Fatalf("bad plugin %+v", p)
			}
			names[p.Name] = true
			parts = append(parts, p.Name+sep+p.Path)
		}
		if strings.Join(parts, ",") != s {
			t.Fatalf("rejoin %q != %q", strings.Join(parts, ","), s)
		}
	})
}
