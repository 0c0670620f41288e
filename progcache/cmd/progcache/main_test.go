package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/bolt"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/filestream"
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
	fsc, err := filestream.Open(dir, filestream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, fsc, 5)
	boltPath := filepath.Join(t.TempDir(), "c.db")
	bc, err := bolt.Open(boltPath, bolt.Options{})
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
			if code != 0 || !strings.Contains(out, "5 entries checked: 0 corrupt") {
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

func TestCLIVerifyRemovesCorruptOnlyWithFix(t *testing.T) {
	dir := t.TempDir()
	c, _ := filestream.Open(dir, filestream.Options{})
	fill(t, c, 2)
	k := cachetest.KeyN(0).String()
	p := filepath.Join(dir, "entries", k[:2], k)
	os.WriteFile(p, []byte("garbage"), 0o600)
	out, code := runCLI(t, "--json", "verify", dir)
	var v struct{ Checked, Corrupt, Removed int }
	if code != 1 || json.Unmarshal([]byte(out), &v) != nil || v.Checked != 2 || v.Corrupt != 1 || v.Removed != 0 {
		t.Fatalf("verify without --fix: %d %s; want exit 1, the corrupt entry reported, nothing removed", code, out)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal("verify without --fix removed the corrupt entry")
	}
	out, code = runCLI(t, "--json", "verify", "--fix", dir)
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Checked != 2 || v.Removed != 1 {
		t.Fatalf("verify --fix: %d %s", code, out)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Error("verify --fix must remove the corrupt entry")
	}
}

// treeState records every file under dir (mode, size, mtime, content).
func treeState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		s := fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			s += " " + string(b)
		}
		out[p] = s
		return nil
	})
	return out
}

// Before: stats, ls and verify saved counters, refreshed access times and
// removed entries; on a file that was not a cache they renamed it aside
// and wrote a new bolt file in its place.
func TestCLIReadOnlyCommandsChangeNothing(t *testing.T) {
	fsDir := filepath.Join(t.TempDir(), "fs")
	fsc, err := filestream.Open(fsDir, filestream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, fsc, 5)
	boltDir := t.TempDir()
	bc, err := bolt.Open(filepath.Join(boltDir, "c.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, bc, 5)
	// A corrupt entry, which a verify that changed things would remove.
	k := cachetest.KeyN(0).String()
	os.WriteFile(filepath.Join(fsDir, "entries", k[:2], k), []byte("garbage"), 0o600)
	// Make every entry look old, so a hit would refresh it.
	old := time.Now().Add(-3 * time.Hour)
	filepath.WalkDir(fsDir, func(p string, d fs.DirEntry, err error) error {
		os.Chtimes(p, old, old)
		return nil
	})
	notes := t.TempDir()
	os.WriteFile(filepath.Join(notes, "notes.md"), []byte("# my notes\n"), 0o644)
	for _, tc := range []struct {
		name, dir, path  string
		code, verifyCode int // exit codes of stats and ls, and of verify
	}{
		{"filestream", fsDir, fsDir, 0, 1}, // verify found the corrupt entry
		{"bolt", boltDir, filepath.Join(boltDir, "c.db"), 0, 0},
		{"not a cache", notes, filepath.Join(notes, "notes.md"), 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := treeState(t, tc.dir)
			for _, args := range [][]string{{"stats"}, {"--json", "stats"}, {"ls"}, {"--json", "ls"}, {"verify"}, {"--json", "verify"}} {
				out, code := runCLI(t, append(args, tc.path)...)
				want := tc.code
				if args[len(args)-1] == "verify" {
					want = tc.verifyCode
				}
				if code != want {
					t.Errorf("%v: exit %d, want %d: %s", args, code, want, out)
				}
				if tc.code != 0 && !strings.Contains(out, tc.path) {
					t.Errorf("%v: the error must name the path: %s", args, out)
				}
			}
			after := treeState(t, tc.dir)
			for p, s := range before {
				if after[p] != s {
					t.Errorf("%s changed or vanished", p)
				}
			}
			for p := range after {
				if _, ok := before[p]; !ok {
					t.Errorf("%s was created", p)
				}
			}
		})
	}
}

// Before: verify without the MAC key deleted every good entry of a keyed
// cache, "a MAC key mismatch?". Entries of another configuration are
// unreadable, reported, and never removed, with or without --fix.
func TestCLIVerifyWithoutMACKeyKeepsEntries(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	keyFile := filepath.Join(t.TempDir(), "key")
	os.WriteFile(keyFile, key, 0o600)
	rec := progcache.RecordOptions{MACKey: key}
	fsDir := t.TempDir()
	fsc, _ := filestream.Open(fsDir, filestream.Options{Record: rec})
	fill(t, fsc, 20)
	boltPath := filepath.Join(t.TempDir(), "c.db")
	bc, _ := bolt.Open(boltPath, bolt.Options{Record: rec})
	fill(t, bc, 20)
	for name, path := range map[string]string{"filestream": fsDir, "bolt": boltPath} {
		t.Run(name, func(t *testing.T) {
			for _, args := range [][]string{{"--json", "verify"}, {"--json", "verify", "--fix"}} {
				out, code := runCLI(t, append(args, path)...)
				var v struct{ Checked, Corrupt, Removed, Unreadable int }
				if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Checked != 20 || v.Unreadable != 20 || v.Removed != 0 || v.Corrupt != 0 {
					t.Fatalf("%v without the key: exit %d %s; want 20 unreadable, none removed", args, code, out)
				}
			}
			out, code := runCLI(t, "--json", "--mac-key-file", keyFile, "verify", path)
			var v struct{ Checked, Corrupt, Unreadable int }
			if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Checked != 20 || v.Corrupt != 0 || v.Unreadable != 0 {
				t.Fatalf("verify with the key after: %d %s; want 20 good entries", code, out)
			}
		})
	}
}

func TestCLIHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"-help"}, {"--help"}, {"help"}, {"stats", "-h"}, {"verify", "--help"}, {"prune", "/some/path", "-h"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "usage: progcache") || errb.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %.40q, stderr %q; want 0 and the usage on stdout only", args, code, out.String(), errb.String())
		}
	}
}

// TestCLIUsage checks that each kind of bad usage exits 2 with a message
// that says what was wrong and what is valid, and touches no cache.
func TestCLIUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{nil, "progcache: no command given; valid commands: stats, ls, verify, prune, clear, help\n\nusage: progcache"},
		{[]string{"--json"}, "no command given; valid commands: stats, ls,"},
		{[]string{"bogus", dir}, `progcache: unknown command "bogus"; valid commands: stats, ls, verify, prune, clear, help (run progcache -h for usage)`},
		{[]string{"bogus"}, `unknown command "bogus"; valid commands:`},
		{[]string{dir}, `unknown command "` + dir + `"; valid commands:`},
		{[]string{"stats"}, "progcache: stats needs a cache PATH: a cache directory or a bolt file\n\nusage:"},
		{[]string{"ls", dir, "other"}, `progcache: unexpected argument "other" after PATH "` + dir + `": ls takes one PATH`},
		{[]string{"--bogus", "stats", dir}, "progcache: flag provided but not defined: -bogus\n\nusage: progcache"},
		{[]string{"stats", dir, "--json=maybe"}, `invalid boolean value "maybe" for -json`},
		{[]string{"ls", dir, "--max-size"}, "flag needs an argument: -max-size"},
		{[]string{"stats", "--fix", dir}, "progcache: --fix goes with verify, not stats"},
		{[]string{"clear", "--max-size", "1MB", dir}, "progcache: --max-size goes with prune, not clear"},
		{[]string{"prune", dir}, "progcache: prune needs --max-size SIZE, the size to prune down to, e.g. 500MB or 2GiB"},
		{[]string{"prune", "--max-size", "x", dir}, `progcache: --max-size: size "x": want a byte count with an optional unit`},
		{[]string{"prune", "--max-size", "-1MB", dir}, `size "-1MB": want a byte count`},
		// Usage is judged before the key file is read.
		{[]string{"--mac-key-file", filepath.Join(dir, "nokey"), "bogus", dir}, `unknown command "bogus"`},
	} {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.msg) || out.Len() != 0 {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q; want 2 and %q on stderr only", tc.args, code, out.String(), errb.String(), tc.msg)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("usage errors wrote into the cache directory: %v", ents)
	}
	if _, code := runCLI(t, "stats", filepath.Join(t.TempDir(), "missing")); code != 1 {
		t.Error("a missing path must fail with 1")
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o600)
	if out, code := runCLI(t, "stats", other); code != 1 || !strings.Contains(out, "holds files but no entries/ directory, so it is not a progcache cache directory; give the cache's own directory or a bolt file") {
		t.Errorf("a directory that is not a cache: exit %d, %q; want 1 and why it was refused", code, out)
	}
	if out, code := runCLI(t, "--mac-key-file", filepath.Join(other, "nokey"), "stats", other); code != 1 || !strings.Contains(out, "--mac-key-file: open ") || !strings.Contains(out, "want a file holding the cache's MAC key") {
		t.Errorf("a missing key file: exit %d, %q; want 1 naming the flag and what it wants", code, out)
	}
	if _, err := os.Stat(filepath.Join(other, "entries")); !os.IsNotExist(err) {
		t.Error("the CLI must not create a cache inside a foreign directory")
	}
}

// failWriter fails every write, as a closed pipe does.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestCLIJSONWriteFailure: JSON output that cannot be written fails the
// command with exit status 1 and says so, for every command that prints.
func TestCLIJSONWriteFailure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fs")
	c, err := filestream.Open(dir, filestream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, c, 2)
	for _, args := range [][]string{
		{"--json", "stats", dir},
		{"--json", "ls", dir},
		{"--json", "verify", dir},
		{"--json", "prune", "--max-size", "1MiB", dir},
		{"--json", "clear", dir},
	} {
		var errb bytes.Buffer
		code := run(args, failWriter{}, &errb)
		if code != 1 || !strings.Contains(errb.String(), "write JSON output") || !strings.Contains(errb.String(), "broken pipe") {
			t.Errorf("%s with stdout failing = exit %d, stderr %q; want 1 and the write error", strings.Join(args, " "), code, errb.String())
		}
	}
}

// Before: prune, clear and verify --fix on a path that was not a cache
// made it one: a bolt cache written into an empty file (also through a
// link to one), progcache buckets added to another application's bbolt
// file, the cache layout created in an empty directory. A write command
// works on an existing cache only, and leaves anything else as it was.
func TestCLIWriteCommandsCreateNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, dir string) string // returns the PATH
	}{
		{"empty file", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "c.db")
			os.WriteFile(p, nil, 0o600)
			return p
		}},
		{"link to empty file", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "c.db")
			os.WriteFile(p, nil, 0o600)
			l := filepath.Join(dir, "link.db")
			if err := os.Symlink(p, l); err != nil {
				t.Skip("no symbolic links here:", err)
			}
			return l
		}},
		{"fresh bbolt file", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "app.db")
			db, err := bbolt.Open(p, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			return p
		}},
		{"bbolt file with other buckets", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "app.db")
			db, err := bbolt.Open(p, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Update(func(tx *bbolt.Tx) error {
				b, err := tx.CreateBucket([]byte("users"))
				if err != nil {
					return err
				}
				return b.Put([]byte("alice"), []byte("admin"))
			})
			db.Close()
			return p
		}},
		{"empty directory", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "cache")
			os.Mkdir(p, 0o700)
			return p
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := tc.make(t, dir)
			for _, args := range [][]string{{"prune", "--max-size", "1MB"}, {"clear"}, {"verify", "--fix"}} {
				before := treeState(t, dir)
				out, code := runCLI(t, append(args, path)...)
				if code != 1 || !strings.Contains(out, path) || !strings.Contains(out, "not a progcache cache") {
					t.Errorf("%v: exit %d, %q; want 1 and an error naming %s as not a cache", args, code, out, path)
				}
				after := treeState(t, dir)
				for p, s := range before {
					if after[p] != s {
						t.Errorf("%v: %s changed or vanished", args, p)
					}
				}
				for p := range after {
					if _, ok := before[p]; !ok {
						t.Errorf("%v: %s was created", args, p)
					}
				}
			}
		})
	}
}

// TestCLIPrefixOnce: every message names the program once. The library's
// errors begin with "progcache:" and wrap sentinels; before, the sentinels'
// text began with it too, so `progcache ls /etc/passwd` ended "left
// untouched: progcache: not a progcache cache".
func TestCLIPrefixOnce(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	passwd := write("passwd", []byte("root:x:0:0:root:/root:/bin/bash\n"))
	empty := write("empty.db", nil)
	key := write("short.key", []byte("abc"))
	notCache := filepath.Join(dir, "notcache")
	os.Mkdir(notCache, 0o700)
	write("notcache/notes.txt", []byte("x"))
	emptyDir := filepath.Join(dir, "emptydir")
	os.Mkdir(emptyDir, 0o700)

	// A bolt cache whose pages after the meta pages are overwritten.
	damaged := filepath.Join(dir, "damaged.db")
	bc, err := bolt.Open(damaged, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, bc, 20)
	b, err := os.ReadFile(damaged)
	if err != nil {
		t.Fatal(err)
	}
	for i := 2 * 4096; i < len(b); i++ {
		b[i] = 0xff
	}
	write("damaged.db", b)

	// A bolt cache another process (here: another open) holds.
	locked := filepath.Join(dir, "locked.db")
	lc, err := bolt.Open(locked, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ls", passwd}, "left untouched: not a progcache cache"},
		{[]string{"stats", filepath.Join(dir, "missing")}, "no such file or directory"},
		{[]string{"ls", notCache}, "no entries/ directory"},
		{[]string{"prune", "--max-size", "1MB", empty}, "left untouched: not a progcache cache"},
		{[]string{"clear", emptyDir}, "has no entries/ directory, and a read-only or NoCreate open creates nothing: not a progcache cache"},
		{[]string{"ls", damaged}, "damaged"},
		{[]string{"prune", "--max-size", "1MB", locked}, "held by another process"},
		{[]string{"--mac-key-file", key, "ls", notCache}, "--mac-key-file " + key + " holds 3 bytes"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		msg := errb.String()
		if code != 1 || !strings.Contains(msg, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 1 and %q", tc.args, code, msg, tc.want)
		}
		if !strings.HasPrefix(msg, "progcache: ") || strings.Count(msg, "progcache:") != 1 {
			t.Errorf("%q: stderr %q: want one \"progcache:\", at the start", tc.args, msg)
		}
		if strings.Count(msg, "not a progcache cache") > 1 {
			t.Errorf("%q: stderr %q says \"not a progcache cache\" twice", tc.args, msg)
		}
	}

	// verify's lines give each entry's error after its key, without the
	// library's prefix.
	fsDir := filepath.Join(dir, "fs")
	fsc, err := filestream.Open(fsDir, filestream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, fsc, 3)
	var flipped bool
	filepath.WalkDir(filepath.Join(fsDir, "entries"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !flipped {
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 1
			os.WriteFile(p, b, 0o600)
			flipped = true
		}
		return nil
	})
	write("fs/entries/junk", []byte("x"))
	out, code := runCLI(t, "verify", fsDir)
	if code != 1 || !strings.Contains(out, "corrupt ") || !strings.Contains(out, "foreign entries/junk: ") || strings.Contains(out, "progcache:") {
		t.Errorf("verify: exit %d, %q; want 1, a corrupt and a foreign line, and no \"progcache:\" in them", code, out)
	}
}
