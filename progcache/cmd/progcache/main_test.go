package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"123", 123, true}, {"64KiB", 64 << 10, true}, {"500MB", 500e6, true},
		{"1.5GiB", 3 << 29, true}, {"2 gib", 2 << 30, true}, {"10B", 10, true},
		{"", 0, false}, {"-1", 0, false}, {"MB", 0, false}, {"1e30", 0, false}, {"NaN", 0, false}, {"12XB", 0, false},
	} {
		got, err := parseSize(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseSize(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "64KiB", "1.5GB", "-1", "", "9223372036854775807", "1e300TiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err == nil && n < 0 {
			t.Fatalf("parseSize(%q) = %d: negative", s, n)
		}
	})
}

func fill(t *testing.T, c progcache.Cache, n int) {
	for i := range n {
		if err := c.Put(context.Background(), cachetest.KeyN(i), cachetest.ObjectN(i, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	c.Get(context.Background(), cachetest.KeyN(0))   // one hit
	c.Get(context.Background(), cachetest.KeyN(n+1)) // one miss
	c.Close()
}

func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String() + errb.String(), code
}

func TestCLI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fs")
	fsc, err := progcache.OpenFileStream(dir, progcache.FileStreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, fsc, 5)
	boltPath := filepath.Join(t.TempDir(), "c.db")
	bc, err := progcache.OpenBolt(boltPath, progcache.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, bc, 5)
	for name, path := range map[string]string{"filestream": dir, "bolt": boltPath} {
		t.Run(name, func(t *testing.T) {
			out, code := runCLI(t, "--json", "stats", path)
			var st progcache.Stats
			if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
				t.Fatalf("stats: %d %s", code, out)
			}
			if st.Entries != 5 || st.Puts != 5 || st.Hits != 1 || st.Misses != 1 {
				t.Errorf("stats %+v: want 5 entries, 5 puts, 1 hit, 1 miss kept across processes", st)
			}
			if out, _ := runCLI(t, "stats", path); !strings.Contains(out, "hits") || !strings.Contains(out, "50.00 %") {
				t.Errorf("human stats: %s", out)
			}
			out, code = runCLI(t, "--json", "ls", path)
			var es []progcache.EntryInfo
			if code != 0 || json.Unmarshal([]byte(out), &es) != nil || len(es) != 5 {
				t.Fatalf("ls --json: %d %s", code, out)
			}
			if es[0].Kind != "cubin" || es[0].Err != "" {
				t.Errorf("ls entry %+v", es[0])
			}
			out, code = runCLI(t, "verify", path)
			if code != 0 || !strings.Contains(out, "5 entries checked, 0 removed") {
				t.Fatalf("verify: %d %s", code, out)
			}
			out, code = runCLI(t, "prune", "--max-size", "3KiB", "--json", path)
			var pr struct{ Evicted, Entries int }
			if code != 0 || json.Unmarshal([]byte(out), &pr) != nil || pr.Evicted != 3 || pr.Entries != 2 {
				t.Fatalf("prune: %d %s", code, out)
			}
			out, code = runCLI(t, "clear", path)
			if code != 0 || !strings.Contains(out, "removed 2 entries") {
				t.Fatalf("clear: %d %s", code, out)
			}
		})
	}
}

func TestCLIVerifyRemovesCorrupt(t *testing.T) {
	dir := t.TempDir()
	c, _ := progcache.OpenFileStream(dir, progcache.FileStreamOptions{})
	fill(t, c, 2)
	k := cachetest.KeyN(0).String()
	p := filepath.Join(dir, "entries", k[:2], k)
	os.WriteFile(p, []byte("garbage"), 0o600)
	out, code := runCLI(t, "--json", "verify", dir)
	var v struct{ Checked, Removed int }
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Checked != 2 || v.Removed != 1 {
		t.Fatalf("verify: %d %s", code, out)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Error("verify must remove the corrupt entry")
	}
}

func TestCLIUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"stats"}, {"bogus", t.TempDir()}, {"prune", t.TempDir()}, {"prune", "--max-size", "x", t.TempDir()}} {
		if _, code := runCLI(t, args...); code != 2 {
			t.Errorf("run(%q) = %d, want 2", args, code)
		}
	}
	if _, code := runCLI(t, "stats", filepath.Join(t.TempDir(), "missing")); code != 1 {
		t.Error("a missing path must fail with 1")
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o600)
	if _, code := runCLI(t, "stats", other); code != 1 {
		t.Error("a directory that is not a cache must be refused")
	}
	if _, err := os.Stat(filepath.Join(other, "entries")); !os.IsNotExist(err) {
		t.Error("the CLI must not create a cache inside a foreign directory")
	}
}
