package tfcompat

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// site builds a fake site-packages directory: dist-info dir name -> METADATA
// content ("" for a dist-info without METADATA).
func site(t *testing.T, dists map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, md := range dists {
		d := filepath.Join(dir, name+".dist-info")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if md == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(d, "METADATA"), []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func md(name, version string) string {
	return "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\nSummary: x\n\nName: body-is-ignored\n"
}

func TestNormalizeName(t *testing.T) {
	for in, want := range map[string]string{
		"TensorFlow":       "tensorflow",
		"tensorflow_cpu":   "tensorflow-cpu",
		"tf.nightly":       "tf-nightly",
		"Intel__-.TF":      "intel-tf",
		"tensorflow-macos": "tensorflow-macos",
	} {
		if got := NormalizeName(in); got != want {
			t.Errorf("NormalizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDetectTF(t *testing.T) {
	tests := []struct {
		name    string
		dists   map[string]string
		want    string // "name version"
		wantErr error
		errHas  string
	}{
		{"plain", map[string]string{
			"tensorflow-2.16.1":           md("tensorflow", "2.16.1"),
			"tensorflow_estimator-2.15.0": md("tensorflow-estimator", "2.15.0"),
			"tensorboard-2.16.2":          md("tensorboard", "2.16.2"),
			"numpy-1.26.4":                md("numpy", "1.26.4"),
		}, "tensorflow 2.16.1", nil, ""},
		{"cpu build, odd spelling", map[string]string{
			"tensorflow_cpu-2.13.0": md("TensorFlow_CPU", "2.13.0"),
		}, "TensorFlow_CPU 2.13.0", nil, ""},
		{"nightly", map[string]string{
			"tf_nightly-2.17.0.dev20240101": md("tf-nightly", "2.17.0.dev20240101"),
		}, "tf-nightly 2.17.0.dev20240101", nil, ""},
		{"intel", map[string]string{
			"intel_tensorflow-2.13.0": md("intel-tensorflow", "2.13.0"),
		}, "intel-tensorflow 2.13.0", nil, ""},
		{"companions only", map[string]string{
			"tensorflow_estimator-2.15.0": md("tensorflow-estimator", "2.15.0"),
			"tensorflow_io-0.36.0":        md("tensorflow-io", "0.36.0"),
			"tensorboard-2.16.2":          md("tensorboard", "2.16.2"),
		}, "", ErrNotFound, "tensorflow-cpu"},
		{"conflict", map[string]string{
			"tensorflow-2.16.1":     md("tensorflow", "2.16.1"),
			"tensorflow_cpu-2.15.0": md("tensorflow-cpu", "2.15.0"),
		}, "", ErrConflict, "tensorflow-cpu 2.15.0"},
		{"missing METADATA in a TF dist-info", map[string]string{
			"tensorflow-2.16.1": "",
		}, "", ErrMetadata, "tensorflow-2.16.1.dist-info"},
		{"no Version", map[string]string{
			"tensorflow-2.16.1": "Metadata-Version: 2.1\nName: tensorflow\n",
		}, "", ErrMetadata, "METADATA"},
		{"no Name", map[string]string{
			"tensorflow_gpu-2.10.0": "Metadata-Version: 2.1\nVersion: 2.10.0\n",
		}, "", ErrMetadata, "no Name"},
		{"bad version", map[string]string{
			"tensorflow-2.16.1": md("tensorflow", "two.sixteen"),
		}, "", ErrInvalidVersion, "METADATA"},
		{"broken companion ignored", map[string]string{
			"tensorflow-2.16.1":  md("tensorflow", "2.16.1"),
			"tensorboard-2.16.2": "",
			"weird-1.0":          "garbage without colon\n",
		}, "tensorflow 2.16.1", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := site(t, tt.dists)
			got, err := DetectTF(dir)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("error %q lacks %q", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := got.Name + " " + got.Version.String(); s != tt.want {
				t.Fatalf("got %q, want %q", s, tt.want)
			}
		})
	}
}

func TestDetectTFMissingDir(t *testing.T) {
	if _, err := DetectTF(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Fatal("no error for a missing directory")
	}
}

func TestReadMetadata(t *testing.T) {
	m, err := ReadMetadata(strings.NewReader("Metadata-Version: 2.1\r\nName:  tensorflow \r\nVersion: 2.6.1\r\nClassifier: a\r\n  continued\r\n\r\nbody"))
	if err != nil || m.Name != "tensorflow" || m.Version != "2.6.1" {
		t.Fatalf("got %+v, %v", m, err)
	}
	big := "Name: x\nVersion: 1\n" + strings.Repeat("Classifier: "+strings.Repeat("a", 100)+"\n", 12000)
	if _, err := ReadMetadata(strings.NewReader(big)); !errors.Is(err, ErrMetadata) {
		t.Fatalf("oversized header: %v", err)
	}
	if _, err := ReadMetadata(strings.NewReader("no colon here\n")); !errors.Is(err, ErrMetadata) {
		t.Fatalf("bad line: %v", err)
	}
}

func FuzzReadMetadata(f *testing.F) {
	f.Add([]byte(md("tensorflow", "2.16.1")))
	f.Add([]byte("Name: a\r\nVersion: 1\r\n\r\n"))
	f.Add([]byte("Name: a\n  cont\nVersion:\n"))
	f.Add([]byte(""))
	f.Add([]byte("\n\nName: x"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ReadMetadata(strings.NewReader(string(data)))
		if err != nil {
			if !errors.Is(err, ErrMetadata) {
				t.Fatalf("error does not wrap ErrMetadata: %v", err)
			}
			return
		}
		if m.Name == "" || m.Version == "" {
			t.Fatalf("success with empty field: %+v", m)
		}
	})
}

func TestDetectTFGlobCharacters(t *testing.T) {
	// Directory names with glob metacharacters must not confuse detection.
	parent := t.TempDir()
	dir := filepath.Join(parent, "site[1]-packages*")
	if err := os.MkdirAll(filepath.Join(dir, "tensorflow-2.10.0.dist-info"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tensorflow-2.10.0.dist-info", "METADATA"), []byte(md("tensorflow", "2.10.0")), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := DetectTF(dir)
	if err != nil || got.Version.String() != "2.10.0" {
		t.Fatalf("got %+v, %v", got, err)
	}
}
