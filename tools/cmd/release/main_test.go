package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"-h"}, 0, "commands:"},
		{[]string{"--help"}, 0, "commands:"},
		{[]string{"alone", "-h"}, 0, "-race"},
		{nil, 2, "no command given"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate" (valid: list, check, tag`},
		{[]string{"-bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"alone"}, 2, "alone needs at least one module folder"},
		{[]string{"check", "-create", "driver"}, 2, "check never creates tags"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.stderr) {
			t.Errorf("release %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errb.String(), tc.code, tc.stderr)
		}
	}
}
