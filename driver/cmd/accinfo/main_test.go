package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver/sim"
)

func TestRunSim(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-driver", "sim", "-dsn", "devices=2,capacity=64MiB"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	// The sim offers VMM where its platform can (not on Windows).
	vmm := "vmm               no"
	if sim.DefaultConfig().VMM {
		vmm = "vmm               yes"
	}
	for _, want := range []string{"driver sim", "2 device(s)", "device 0:", "device 1:", "64 MiB total", vmm, "peer access       1", "host register     yes"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"-driver", "sim", "-dsn", "hostregister=false"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "host register     no") || strings.Contains(out.String(), "hostregister") {
		t.Errorf("with hostregister=false the output should say \"host register     no\" once, from the capability:\n%s", out.String())
	}
}

// TestRunUsage checks the exit status and the message of help and of each
// kind of bad usage: 0 for help, 2 for usage errors, each naming what was
// wrong and what is valid.
func TestRunUsage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string // substring of stdout
		stderr string // substring of stderr
	}{
		{"-h", []string{"-h"}, 0, "usage: accinfo [-driver NAME]", ""},
		{"-help", []string{"-help"}, 0, "Exit status: 0 on success", ""},
		{"--help", []string{"--help"}, 0, "backend: auto, ", ""},
		{"unknown flag", []string{"-bogus"}, 2, "", "accinfo: flag provided but not defined: -bogus\n\nusage: accinfo"},
		{"flag without value", []string{"-driver"}, 2, "", "flag needs an argument: -driver"},
		{"extra argument", []string{"-driver", "sim", "extra"}, 2, "", `unexpected argument "extra": accinfo takes only flags`},
		{"unknown backend", []string{"-driver", "nosuch"}, 2, "", `-driver "nosuch": unknown backend; valid: auto, `},
		{"unknown dsn key", []string{"-driver", "sim", "-dsn", "bogus=1"}, 2, "", "-dsn: sim dsn: unknown key \"bogus\" (valid keys: devices, capacity"},
		{"bad dsn value", []string{"-driver", "sim", "-dsn", "capacity=lots"}, 2, "", "want an integer with an optional unit"},
		{"dsn out of range", []string{"-driver", "sim", "-dsn", "devices=0"}, 2, "", "devices"},
		// A backend that cannot start is a runtime failure, not bad usage:
		// without cgo the cuda backend says so, with it the library is missing.
		{"backend unavailable", []string{"-driver", "cuda", "-dsn", "lib=/nonexistent/libcuda.so.1"}, 1, "", "accinfo: cuda"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tc.args, &out, &errb)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errb.String())
			}
			if !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errb.String(), tc.stderr) {
				t.Errorf("stdout %q\nstderr %q\nwant %q and %q in them", out.String(), errb.String(), tc.stdout, tc.stderr)
			}
			if tc.code == 0 && errb.Len() != 0 {
				t.Errorf("help wrote to stderr: %q", errb.String())
			}
			if tc.code != 0 && out.Len() != 0 {
				t.Errorf("a usage error wrote to stdout: %q", out.String())
			}
		})
	}
}

// TestRunEnvUsage: a mistake in ACCELKIT_DRIVER is a usage error like the
// same mistake in -driver or -dsn (exit 2), and the message names the
// variable and the valid backends, not a blank import.
func TestRunEnvUsage(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		args      []string
		code      int
		stderr    []string
	}{
		{"unknown backend", "nosuch", nil, 2, []string{`accinfo: ACCELKIT_DRIVER="nosuch": unknown backend "nosuch"; valid: auto, `, "sim", "unset ACCELKIT_DRIVER"}},
		{"unknown backend with a dsn", "nosuch:devices=2", nil, 2, []string{`ACCELKIT_DRIVER="nosuch:devices=2": unknown backend "nosuch"`}},
		{"malformed", "si m", nil, 2, []string{"accinfo: ACCELKIT_DRIVER: driver spec", "valid backends: auto, "}},
		{"bad dsn", "sim:bogus=1", nil, 2, []string{`accinfo: ACCELKIT_DRIVER="sim:bogus=1": sim dsn: unknown key "bogus"`}},
		{"-dsn beside it", "sim", []string{"-dsn", "devices=2"}, 2, []string{`-dsn "devices=2" with -driver auto while ACCELKIT_DRIVER="sim" is set`}},
		{"-driver overrides it", "nosuch", []string{"-driver", "sim"}, 0, nil},
		{"good", "sim:devices=2", nil, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ACCELKIT_DRIVER", tc.env)
			var out, errb bytes.Buffer
			code := run(tc.args, &out, &errb)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errb.String())
			}
			for _, w := range tc.stderr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr %q lacks %q", errb.String(), w)
				}
			}
			if strings.Contains(errb.String(), "import") {
				t.Errorf("stderr tells a command-line user to import a package: %q", errb.String())
			}
			if code != 0 && out.Len() != 0 {
				t.Errorf("a usage error wrote to stdout: %q", out.String())
			}
		})
	}
	// The flag's own mistake gets the same status.
	t.Setenv("ACCELKIT_DRIVER", "")
	var out, errb bytes.Buffer
	if code := run([]string{"-driver", "nosuch"}, &out, &errb); code != 2 {
		t.Errorf("-driver nosuch: exit %d, want 2", code)
	}
}
