package bolt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/internal/testproc"
	bbolt "go.etcd.io/bbolt"
)

// testKey and testObject make the deterministic keys and objects of these
// tests.
var testKey, testObject = cachetest.KeyN, cachetest.ObjectN

func quietBolt(o Options) Options {
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return o
}

func openCache(t *testing.T, path string, o Options) *Cache {
	t.Helper()
	c, err := Open(path, quietBolt(o))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// pathState is what a test remembers of a path to check that it was left
// untouched: its Lstat and, for a regular file, its bytes.
type pathState struct {
	fi   os.FileInfo
	data []byte
}

func statePath(t *testing.T, p string) pathState {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	s := pathState{fi: fi}
	if fi.Mode().IsRegular() {
		s.data, _ = os.ReadFile(p)
	}
	return s
}

func (s pathState) check(t *testing.T, p string) {
	t.Helper()
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		t.Errorf("%s is gone: %v", p, err)
	case !os.SameFile(fi, s.fi) || fi.Mode() != s.fi.Mode() || !fi.ModTime().Equal(s.fi.ModTime()):
		t.Errorf("%s was replaced or changed: %v %v, was %v %v", p, fi.Mode(), fi.ModTime(), s.fi.Mode(), s.fi.ModTime())
	case fi.Mode().IsRegular():
		if b, _ := os.ReadFile(p); !bytes.Equal(b, s.data) {
			t.Errorf("%s was written to", p)
		}
	}
	if m, _ := filepath.Glob(p + ".corrupt-*"); len(m) != 0 {
		t.Errorf("%s was set aside as %v", p, m)
	}
}

func foreignBolt(t *testing.T, p string) {
	t.Helper()
	db, err := bbolt.Open(p, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bbolt.Tx) error {
		b, _ := tx.CreateBucket([]byte("someone-else"))
		return b.Put([]byte("k"), []byte("v"))
	})
	db.Close()
}

// TestBoltRefusesNonCache: a path holding anything but a bolt cache of ours
// is refused with ErrNotCache naming what is there, and left untouched:
// never renamed, replaced or written, read-write or read-only.
func TestBoltRefusesNonCache(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		// make puts the thing at p and returns another path to check
		// (a link's target), or "".
		make func(t *testing.T, p string) string
	}{
		{"text", `is not a bbolt file (first bytes "hello, not a dat")`, func(t *testing.T, p string) string {
			os.WriteFile(p, []byte("hello, not a database\n"), 0o600)
			return ""
		}},
		{"zeros", "is not a bbolt file", func(t *testing.T, p string) string {
			os.WriteFile(p, make([]byte, 64<<10), 0o600)
			return ""
		}},
		{"random", "is not a bbolt file", func(t *testing.T, p string) string {
			os.WriteFile(p, bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef, 0x01}, 5000), 0o600)
			return ""
		}},
		{"foreign bbolt", "is a bbolt database of another application (no progcache schema)", func(t *testing.T, p string) string {
			foreignBolt(t, p)
			return ""
		}},
		{"directory", "is a directory", func(t *testing.T, p string) string {
			os.Mkdir(p, 0o700)
			os.WriteFile(filepath.Join(p, "x"), []byte("x"), 0o600)
			return ""
		}},
		{"symlink to a directory", "is a symbolic link to a directory", func(t *testing.T, p string) string {
			os.Mkdir(p+".dir", 0o700)
			symlinkOrSkip(t, filepath.Base(p)+".dir", p)
			return p + ".dir"
		}},
		{"symlink to nothing", "is a symbolic link to nothing", func(t *testing.T, p string) string {
			symlinkOrSkip(t, filepath.Base(p)+".missing", p)
			return ""
		}},
		{"symlink to notes", "is not a bbolt file", func(t *testing.T, p string) string {
			os.WriteFile(p+".md", []byte("my notes\n"), 0o600)
			symlinkOrSkip(t, filepath.Base(p)+".md", p)
			return p + ".md"
		}},
		{"named pipe", "is a named pipe", func(t *testing.T, p string) string {
			if err := mkfifo(p); err != nil {
				t.Skip("no named pipes here:", err)
			}
			return ""
		}},
		{"device", "is a device", func(t *testing.T, p string) string {
			if err := mknodZero(p); err != nil {
				t.Skip("cannot make a device node here:", err)
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "cache.db")
			other := tc.make(t, p)
			for _, ro := range []bool{false, true} {
				before := statePath(t, p)
				var otherState pathState
				if other != "" {
					otherState = statePath(t, other)
				}
				c, err := Open(p, quietBolt(Options{ReadOnly: ro, Timeout: 100 * time.Millisecond}))
				if err == nil {
					c.Close()
					t.Fatalf("Open(read-only %v) opened it; want progcache.ErrNotCache", ro)
				}
				if !errors.Is(err, progcache.ErrNotCache) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Open(read-only %v) = %v; want progcache.ErrNotCache naming %s and saying %q", ro, err, p, tc.want)
				}
				before.check(t, p)
				if other != "" {
					otherState.check(t, other)
				}
				if _, err := os.Lstat(p + ".missing"); err == nil {
					t.Error("a file was created through a dangling link")
				}
			}
		})
	}
}

func symlinkOrSkip(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
}

// TestBoltEmptyAndMissing: a missing path is created and a 0-byte file is
// initialised in place; read-only, neither is touched.
func TestBoltEmptyAndMissing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	missing, empty := filepath.Join(dir, "missing.db"), filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	emptyState := statePath(t, empty)
	if _, err := Open(missing, quietBolt(Options{ReadOnly: true})); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read-only open of a missing path = %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Lstat(missing); err == nil {
		t.Fatal("a read-only open created the file")
	}
	if _, err := Open(empty, quietBolt(Options{ReadOnly: true})); !errors.Is(err, progcache.ErrNotCache) {
		t.Errorf("read-only open of an empty file = %v, want progcache.ErrNotCache", err)
	}
	emptyState.check(t, empty)
	for _, p := range []string{missing, empty} {
		c := openCache(t, p, Options{})
		if c.SetAside() != "" {
			t.Errorf("%s: set aside %s", p, c.SetAside())
		}
		if err := c.Put(ctx, testKey(1), testObject(1, 10)); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := c.Get(ctx, testKey(1)); !ok {
			t.Fatal("the new cache must work")
		}
		c.Close()
	}
	if fi, _ := os.Stat(empty); !os.SameFile(fi, emptyState.fi) {
		t.Error("the empty file must be initialised in place, not replaced")
	}
}

// TestBoltSymlink: a link to a cache is followed to open it; a link to a
// damaged cache is refused with ErrCorrupt and neither the link nor its
// target is moved.
func TestBoltSymlink(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	target, link := filepath.Join(dir, "real.db"), filepath.Join(dir, "cache.db")
	c := openCache(t, target, Options{})
	c.Put(ctx, testKey(1), testObject(1, 100))
	c.Close()
	symlinkOrSkip(t, "real.db", link)
	c = openCache(t, link, Options{})
	if _, ok, err := c.Get(ctx, testKey(1)); !ok || err != nil {
		t.Fatalf("Get through a link: hit %v, err %v", ok, err)
	}
	c.Close()

	b, _ := os.ReadFile(target)
	os.WriteFile(target, b[:len(b)/3], 0o600) // truncated: damaged
	linkState, targetState := statePath(t, link), statePath(t, target)
	for _, ro := range []bool{false, true} {
		_, err := Open(link, quietBolt(Options{ReadOnly: ro}))
		if !errors.Is(err, progcache.ErrCorrupt) || !strings.Contains(err.Error(), link) {
			t.Errorf("Open(read-only %v) of a link to a damaged cache = %v; want progcache.ErrCorrupt naming the link", ro, err)
		}
		linkState.check(t, link)
		targetState.check(t, target)
	}
}

// TestBoltDamagedSetAside: a damaged file of ours is renamed aside with
// its bytes intact and a new cache made in its place.
func TestBoltDamagedSetAside(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "cache.db")
	orig := writeDamageFixture(t, p, 40)
	b := orig[:len(orig)/4]
	os.WriteFile(p, b, 0o600)
	c := openCache(t, p, Options{})
	if c.SetAside() == "" {
		t.Fatal("a truncated cache must be set aside")
	}
	if got, _ := os.ReadFile(c.SetAside()); !bytes.Equal(got, b) {
		t.Error("the set-aside file must keep the damaged bytes")
	}
	if s := c.Stats(); s.Corrupt != 1 || s.Entries != 0 {
		t.Errorf("corrupt %d, entries %d; want 1, 0", s.Corrupt, s.Entries)
	}
	if err := c.Put(ctx, testKey(1), testObject(1, 10)); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := c.Get(ctx, testKey(1)); !ok {
		t.Fatal("the rebuilt file must work")
	}
}

func TestBoltSchemaMismatch(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cache.db")
	c := openCache(t, p, Options{})
	c.Put(context.Background(), testKey(1), testObject(1, 10))
	c.h.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchema, []byte("accelkit/progcache/bolt/v0"))
	})
	c.Close()
	c2 := openCache(t, p, Options{})
	if c2.SetAside() == "" {
		t.Fatal("a schema mismatch must rebuild")
	}
	if n, _ := c2.Len(context.Background()); n != 0 {
		t.Errorf("rebuilt file has %d entries", n)
	}
}

func TestBoltCorruptEntry(t *testing.T) {
	ctx := context.Background()
	c := openCache(t, filepath.Join(t.TempDir(), "cache.db"), Options{})
	c.Put(ctx, testKey(1), testObject(1, 100))
	k1 := testKey(1)
	c.h.db.Update(func(tx *bbolt.Tx) error {
		v := bytes.Clone(tx.Bucket(bucketEntries).Get(k1[:]))
		v[len(v)/2] ^= 1
		return tx.Bucket(bucketEntries).Put(k1[:], v)
	})
	if _, ok, err := c.Get(ctx, testKey(1)); ok || err != nil {
		t.Fatalf("corrupt entry: hit %v err %v; want a miss", ok, err)
	}
	if n, _ := c.Len(ctx); n != 0 || c.Stats().Corrupt != 1 {
		t.Errorf("corrupt entry not removed and counted: len %d corrupt %d", n, c.Stats().Corrupt)
	}
}

func TestBoltReadAwareLRU(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "cache.db")
	size := progcache.RecordSize(testObject(0, 1000), progcache.RecordOptions{})
	c := openCache(t, p, Options{MaxBytes: 3 * size})
	for i := range 3 {
		c.Put(ctx, testKey(i), testObject(i, 1000))
	}
	c.Get(ctx, testKey(0)) // 0 becomes the most recent; 1 is now the oldest
	c.Close()
	// The access time was batched in memory and written on Close; a
	// reopened cache must know 0 was used after 1 and 2.
	c = openCache(t, p, Options{MaxBytes: 3 * size})
	c.Put(ctx, testKey(3), testObject(3, 1000))
	if _, ok, _ := c.Get(ctx, testKey(1)); ok {
		t.Error("entry 1 (least recently used) must be evicted")
	}
	if _, ok, _ := c.Get(ctx, testKey(0)); !ok {
		t.Error("entry 0 (read before reopen) must survive")
	}
}

func TestBoltAccessBatch(t *testing.T) {
	ctx := context.Background()
	c := openCache(t, filepath.Join(t.TempDir(), "cache.db"), Options{})
	c.Put(ctx, testKey(1), testObject(1, 10))
	writes := func() int64 { st := c.h.db.Stats(); return st.TxStats.GetWrite() }
	before := writes()
	for range accessBatch - 1 {
		c.Get(ctx, testKey(1))
	}
	if w := writes() - before; w != 0 {
		t.Errorf("%d page writes for %d hits; access times must be batched", w, accessBatch-1)
	}
}

func TestBoltCaps(t *testing.T) {
	for _, tc := range []struct {
		o     Options
		field string // the field and value the error must name
	}{
		{Options{MaxBytes: -1}, "bolt: Options.MaxBytes -1"},
		{Options{Timeout: -1}, "bolt: Options.Timeout -1ns"},
		{Options{Record: progcache.RecordOptions{MACKey: make([]byte, 65)}}, "RecordOptions.MACKey of 65 bytes"},
	} {
		if _, err := Open(filepath.Join(t.TempDir(), "x.db"), tc.o); !errors.Is(err, progcache.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Open(%+v) = %v; want ErrInvalidConfig naming the field and value (%q)", tc.o, err, tc.field)
		}
	}
}

// TestHelperProcess is not a test: it is the body of the processes that
// TestBoltLocked starts by re-executing the test binary.
func TestHelperProcess(t *testing.T) {
	testproc.Serve(t, map[string]func() error{"holdbolt": holdBoltHelper})
}

func holdBoltHelper() error {
	c, err := Open(os.Getenv("PROGCACHE_FILE"), Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("OPEN")
	testproc.BlockUntilKilled()
	return nil
}

func TestBoltLocked(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("flock semantics")
	}
	p := filepath.Join(t.TempDir(), "cache.db")
	c := openCache(t, p, Options{})
	c.Put(context.Background(), testKey(1), testObject(1, 100))
	c.Close()
	sum := func() [32]byte { b, _ := os.ReadFile(p); return sha256.Sum256(b) }
	before := sum()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, sc := testproc.Start(t, ctx, "PROGCACHE_HELPER=holdbolt", "PROGCACHE_FILE="+p)
	if !sc.Scan() || sc.Text() != "OPEN" {
		t.Fatalf("child did not open the file: %q", sc.Text())
	}
	if sum() != before {
		t.Fatal("opening an existing file must not write to it")
	}
	_, err := Open(p, quietBolt(Options{Timeout: 200 * time.Millisecond}))
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("Open on a held file = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "progcache/filestream") {
		t.Errorf("the ErrLocked message must point to progcache/filestream: %v", err)
	}
	if sum() != before {
		t.Error("a held file must be left untouched")
	}
	if m, _ := filepath.Glob(p + ".corrupt-*"); len(m) != 0 {
		t.Error("a held file must not be set aside as corrupt")
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// TestBoltOtherMACKeyKept: reopened with another MAC key, a Cache reports
// the entries as unreadable misses and keeps them; the right key reads them
// again, and verification does not remove them.
func TestBoltOtherMACKeyKept(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "cache.db")
	right := Options{Record: progcache.RecordOptions{MACKey: bytes.Repeat([]byte{1}, 32)}}
	wrong := Options{Record: progcache.RecordOptions{MACKey: bytes.Repeat([]byte{2}, 32)}}
	c := openCache(t, p, right)
	if err := c.Put(ctx, testKey(1), testObject(1, 100)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = openCache(t, p, wrong)
	if _, ok, err := c.Get(ctx, testKey(1)); ok || err != nil {
		t.Fatalf("Get with another MAC key = hit %v, err %v; want a miss", ok, err)
	}
	es, err := c.Entries(ctx, true)
	if err != nil || len(es) != 1 || !es[0].Unreadable {
		t.Fatalf("Entries(verify) with another MAC key = %+v, %v; want the entry reported unreadable", es, err)
	}
	if s := c.Stats(); s.Unreadable != 1 || s.Corrupt != 0 || s.Misses != 1 {
		t.Errorf("unreadable %d, corrupt %d, misses %d; want 1, 0, 1", s.Unreadable, s.Corrupt, s.Misses)
	}
	c.Close()
	c = openCache(t, p, right)
	if got, ok, err := c.Get(ctx, testKey(1)); !ok || err != nil || !got.Equal(testObject(1, 100)) {
		t.Fatalf("Get with the right key after a wrong-key session = hit %v, err %v; want the object", ok, err)
	}
}

// TestBoltReadOnly: a read-only open reads, refuses every change with
// ErrReadOnly, and leaves the file byte-identical with its modification
// time, for a sound file, one with a corrupt entry, and a damaged one.
func TestBoltReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "cache.db")
	c := openCache(t, p, Options{})
	for n := range 5 {
		c.Put(ctx, testKey(n), testObject(n, 300))
	}
	c.Get(ctx, testKey(0))
	c.Close()
	// Entry 4's record is corrupt.
	k4 := testKey(4)
	db, err := bbolt.Open(p, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bbolt.Tx) error {
		v := bytes.Clone(tx.Bucket(bucketEntries).Get(k4[:]))
		v[len(v)/2] ^= 1
		return tx.Bucket(bucketEntries).Put(k4[:], v)
	})
	db.Close()
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	os.Chtimes(p, old, old)
	before := statePath(t, p)

	ro := openCache(t, p, Options{ReadOnly: true})
	// A second reader shares the lock.
	ro2 := openCache(t, p, Options{ReadOnly: true})
	if _, err := Open(p, quietBolt(Options{Timeout: 100 * time.Millisecond})); !errors.Is(err, ErrLocked) {
		t.Errorf("read-write open while read-only opens hold the file = %v, want ErrLocked", err)
	}
	for range accessBatch + 1 {
		if got, ok, err := ro.Get(ctx, testKey(1)); !ok || err != nil || !got.Equal(testObject(1, 300)) {
			t.Fatalf("read-only Get: hit %v, err %v", ok, err)
		}
	}
	if _, ok, err := ro.Get(ctx, testKey(4)); ok || err != nil {
		t.Errorf("read-only Get of a corrupt entry: hit %v, err %v; want a miss", ok, err)
	}
	if n, _ := ro.Len(ctx); n != 5 {
		t.Errorf("Len = %d after a corrupt read-only Get; want 5 (the entry is kept)", n)
	}
	if s := ro.Stats(); s.Corrupt != 1 || s.Hits != accessBatch+1 {
		t.Errorf("corrupt %d, hits %d; want 1, %d", s.Corrupt, s.Hits, accessBatch+1)
	}
	es, err := ro.Entries(ctx, false)
	bad := 0
	for _, e := range es {
		if e.Err != "" {
			bad++
		}
	}
	if err != nil || len(es) != 5 || bad != 1 {
		t.Errorf("Entries = %d entries, %d with errors, %v; want 5, 1, nil", len(es), bad, err)
	}
	if tot, err := ro.Totals(ctx); err != nil || tot.Entries != 5 {
		t.Errorf("Totals = %+v, %v", tot, err)
	}
	for op, err := range map[string]error{
		"Put":             ro.Put(ctx, testKey(9), testObject(9, 10)),
		"Delete":          ro.Delete(ctx, testKey(1)),
		"Clear":           ro.Clear(ctx),
		"Prune":           func() error { _, err := ro.Prune(ctx, 1); return err }(),
		"Entries(verify)": func() error { _, err := ro.Entries(ctx, true); return err }(),
	} {
		if !errors.Is(err, progcache.ErrReadOnly) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s on a read-only cache = %v, want progcache.ErrReadOnly naming the file", op, err)
		}
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	ro2.Close()
	before.check(t, p)

	// Damaged: an error wrapping ErrCorrupt, and nothing moved or written.
	b, _ := os.ReadFile(p)
	os.WriteFile(p, b[:len(b)/3], 0o600)
	os.Chtimes(p, old, old)
	before = statePath(t, p)
	if _, err := Open(p, quietBolt(Options{ReadOnly: true})); !errors.Is(err, progcache.ErrCorrupt) || !strings.Contains(err.Error(), p) {
		t.Errorf("read-only open of a damaged file = %v, want progcache.ErrCorrupt naming it", err)
	}
	before.check(t, p)
}
