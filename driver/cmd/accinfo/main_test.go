package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunSim(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, "sim", "devices=2,capacity=64MiB"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"driver sim", "2 device(s)", "device 0:", "device 1:", "64 MiB total", "vmm               yes", "peer access       1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunErrors(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, "nosuch", ""); err == nil || !strings.Contains(err.Error(), "unknown backend") {
		t.Errorf("unknown backend: err = %v", err)
	}
	if err := run(&out, "sim", "bogus=1"); err == nil || !strings.Contains(err.Error(), "valid keys") {
		t.Errorf("bad dsn: err = %v", err)
	}
}
