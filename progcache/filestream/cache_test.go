package filestream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/internal/testproc"
)

// The tests here are internal (package progcache) so they can set test
// hooks; the conformance suite runs from conformance_test.go.

func testKey(n int) progcache.Key {
	var k progcache.Key
	copy(k[:], fmt.Sprintf("fs-test-key-%08d", n))
	return k
}

func testObject(n, size int) progcache.Object {
	code := bytes.Repeat([]byte{byte(n), byte(n >> 8), 0xA5}, size/3+1)[:size]
	return progcache.Object{Kind: "cubin", Name: "k" + strconv.Itoa(n), Code: code, Symbols: map[string]string{"k": "_Z" + strconv.Itoa(n)}}
}

func openFS(t *testing.T, dir string, opts Options) *Cache {
	t.Helper()
	c, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestFileStreamCorruption(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		damage func(t *testing.T, c *Cache, p string)
	}{
		{"truncate", func(t *testing.T, c *Cache, p string) { os.Truncate(p, 50) }},
		{"truncate to zero", func(t *testing.T, c *Cache, p string) { os.Truncate(p, 0) }},
		{"bit flip", func(t *testing.T, c *Cache, p string) {
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x04
			os.WriteFile(p, b, filePerm)
		}},
		{"zero fill", func(t *testing.T, c *Cache, p string) {
			fi, _ := os.Stat(p)
			os.WriteFile(p, make([]byte, fi.Size()), filePerm)
		}},
		{"wrong magic", func(t *testing.T, c *Cache, p string) {
			b, _ := os.ReadFile(p)
			copy(b, "ELF!")
			os.WriteFile(p, b, filePerm)
		}},
		{"wrong key", func(t *testing.T, c *Cache, p string) {
			// A valid entry of another key copied under this key's name.
			c.Put(ctx, testKey(2), testObject(2, 100))
			b, _ := os.ReadFile(c.path(testKey(2)))
			os.WriteFile(p, b, filePerm)
		}},
		{"foreign file", func(t *testing.T, c *Cache, p string) {
			os.WriteFile(p, []byte("not a cache entry\n"), filePerm)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := openFS(t, t.TempDir(), Options{})
			if err := c.Put(ctx, testKey(1), testObject(1, 1000)); err != nil {
				t.Fatal(err)
			}
			p := c.path(testKey(1))
			tc.damage(t, c, p)
			_, ok, err := c.Get(ctx, testKey(1))
			if ok || err != nil {
				t.Fatalf("Get of a damaged entry = hit %v, err %v; want a miss", ok, err)
			}
			if s := c.Stats(); s.Corrupt != 1 {
				t.Errorf("Stats.Corrupt = %d, want 1", s.Corrupt)
			}
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("damaged entry not removed: %v", err)
			}
		})
	}
}

func TestFileStreamMAC(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key1 := bytes.Repeat([]byte{1}, 32)
	keyed := openFS(t, dir, Options{Record: progcache.RecordOptions{MACKey: key1}})
	plain := openFS(t, dir, Options{})
	other := openFS(t, dir, Options{Record: progcache.RecordOptions{MACKey: bytes.Repeat([]byte{2}, 32)}})

	keyed.Put(ctx, testKey(1), testObject(1, 100))
	if got, ok, _ := keyed.Get(ctx, testKey(1)); !ok || !got.Equal(testObject(1, 100)) {
		t.Fatal("keyed cache must read its own entries")
	}
	if _, ok, _ := other.Get(ctx, testKey(1)); ok {
		t.Fatal("a cache with another MAC key must reject the entry")
	}
	plain.Put(ctx, testKey(2), testObject(2, 100))
	if _, ok, _ := keyed.Get(ctx, testKey(2)); ok {
		t.Fatal("a keyed cache must reject an entry written without the key")
	}
	// Another configuration's entries are misses counted as unreadable,
	// never removed: the peers that wrote them still read them.
	for name, s := range map[string]progcache.Stats{"keyed": keyed.Stats(), "other": other.Stats()} {
		if s.Unreadable != 1 || s.Corrupt != 0 || s.Misses != 1 {
			t.Errorf("%s cache: unreadable %d, corrupt %d, misses %d; want 1, 0, 1", name, s.Unreadable, s.Corrupt, s.Misses)
		}
	}
	if _, ok, _ := keyed.Get(ctx, testKey(1)); !ok {
		t.Error("a peer with another MAC key removed the keyed cache's entry")
	}
	if _, ok, _ := plain.Get(ctx, testKey(2)); !ok {
		t.Error("a keyed peer removed the unkeyed cache's entry")
	}
	if _, err := Open(t.TempDir(), Options{Record: progcache.RecordOptions{MACKey: []byte("short")}}); err == nil {
		t.Error("a 5-byte MAC key must be refused")
	}
}

func TestFileStreamPermissions(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no POSIX permissions")
	}
	c := openFS(t, t.TempDir(), Options{})
	c.Put(context.Background(), testKey(1), testObject(1, 10))
	p := c.path(testKey(1))
	for path, want := range map[string]os.FileMode{p: filePerm, filepath.Dir(p): dirPerm | os.ModeDir, c.tmp: dirPerm | os.ModeDir, c.entries: dirPerm | os.ModeDir} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode() != want {
			t.Errorf("%s mode %v, want %v (%v)", path, fi.Mode(), want, err)
		}
	}
}

func TestFileStreamSync(t *testing.T) {
	ctx := context.Background()
	c := openFS(t, t.TempDir(), Options{Sync: true})
	if err := c.Put(ctx, testKey(1), testObject(1, 4096)); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := c.Get(ctx, testKey(1)); !ok || !got.Equal(testObject(1, 4096)) {
		t.Fatal("Sync commit did not read back")
	}
	if ents, _ := os.ReadDir(c.tmp); len(ents) != 0 {
		t.Errorf("temp files left after commit: %d", len(ents))
	}
}

func TestFileStreamCaps(t *testing.T) {
	for _, tc := range []struct {
		o     Options
		field string // the field and value the error must name
	}{
		{Options{MaxBytes: -1}, "Options.MaxBytes -1"},
		{Options{MaxEntryBytes: -1}, "Options.MaxEntryBytes -1"},
		{Options{TempLease: -1}, "Options.TempLease -1ns"},
		{Options{LockLease: -1}, "Options.LockLease -1ns"},
		{Options{LockLease: 3}, "Options.LockLease 3ns"}, // the heartbeat ticker would panic
		{Options{Record: progcache.RecordOptions{MACKey: make([]byte, 8)}}, "RecordOptions.MACKey of 8 bytes"},
	} {
		if _, err := Open(t.TempDir(), tc.o); !errors.Is(err, progcache.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Open(%+v) = %v; want ErrInvalidConfig naming the field and value (%q)", tc.o, err, tc.field)
		}
	}
}

func TestFileStreamLRURefresh(t *testing.T) {
	ctx := context.Background()
	c := openFS(t, t.TempDir(), Options{})
	old := time.Now().Add(-time.Hour)
	for i := range 3 {
		c.Put(ctx, testKey(i), testObject(i, 1000))
		os.Chtimes(c.path(testKey(i)), old.Add(time.Duration(i)*time.Minute), old.Add(time.Duration(i)*time.Minute))
	}
	c.Get(ctx, testKey(0)) // refreshes entry 0: now the newest
	size := progcache.RecordSize(testObject(0, 1000), progcache.RecordOptions{})
	n, err := c.Prune(ctx, 2*size)
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1 eviction", n, err)
	}
	if _, ok, _ := c.Get(ctx, testKey(1)); ok {
		t.Error("least recently used entry 1 must be evicted")
	}
	for _, i := range []int{0, 2} {
		if _, ok, _ := c.Get(ctx, testKey(i)); !ok {
			t.Errorf("entry %d must survive", i)
		}
	}
}

func TestFileStreamPruneRace(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := openFS(t, dir, Options{})
	peer := openFS(t, dir, Options{})
	old := time.Now().Add(-time.Hour)
	for i := range 4 {
		c.Put(ctx, testKey(i), testObject(i, 1000))
		os.Chtimes(c.path(testKey(i)), old, old)
	}
	newer := testObject(100, 1500)
	var victim string
	c.hooks.beforeVictimRename = func(p string) {
		if victim != "" {
			return
		}
		victim = p
		// A peer replaces the chosen victim before it is renamed away.
		for i := range 4 {
			if c.path(testKey(i)) == p {
				if err := peer.Put(ctx, testKey(i), newer); err != nil {
					t.Error(err)
				}
			}
		}
	}
	size := progcache.RecordSize(testObject(0, 1000), progcache.RecordOptions{})
	if _, err := c.Prune(ctx, size); err != nil {
		t.Fatal(err)
	}
	if victim == "" {
		t.Fatal("hook never ran")
	}
	k, _ := progcache.ParseKey(filepath.Base(victim))
	got, ok, err := c.Get(ctx, k)
	if !ok || err != nil || !got.Equal(newer) {
		t.Fatalf("entry a peer replaced during pruning: hit %v err %v; it must survive and read back", ok, err)
	}
	if ents, _ := os.ReadDir(c.trash); len(ents) != 0 {
		t.Errorf("trash not empty: %d files", len(ents))
	}
}

func TestFileStreamTempLease(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := openFS(t, dir, Options{TempLease: time.Hour})
	young := filepath.Join(c.tmp, ".young")
	expired := filepath.Join(c.tmp, ".expired")
	os.WriteFile(young, make([]byte, 10000), filePerm)
	os.WriteFile(expired, make([]byte, 10000), filePerm)
	past := time.Now().Add(-2 * time.Hour)
	os.Chtimes(expired, past, past)
	c.Close()

	oldLock, liveLock := filepath.Join(c.locks, lockName(testKey(1))), filepath.Join(c.locks, lockName(testKey(2)))
	os.WriteFile(oldLock, nil, filePerm)
	os.WriteFile(liveLock, nil, filePerm)
	os.Chtimes(oldLock, past, past)

	c = openFS(t, dir, Options{TempLease: time.Hour, MaxBytes: 12000})
	if _, err := os.Stat(oldLock); !os.IsNotExist(err) {
		t.Error("a lock file older than the leases must be swept on open")
	}
	if _, err := os.Stat(liveLock); err != nil {
		t.Error("a fresh lock file must survive open")
	}
	if _, err := os.Stat(expired); !os.IsNotExist(err) {
		t.Error("an expired temp file must be swept on open")
	}
	if _, err := os.Stat(young); err != nil {
		t.Error("a young temp file must survive open")
	}
	if s := c.Stats(); s.Bytes != 10000 {
		t.Errorf("Stats.Bytes = %d, want the young temp file's 10000", s.Bytes)
	}
	// The young temp file counts toward the cap: a 3000-byte entry does
	// not fit beside it, so the prune after Put evicts nothing it may not
	// (the new entry is kept) and the temp file survives.
	c.Put(ctx, testKey(1), testObject(1, 500))
	c.Put(ctx, testKey(2), testObject(2, 2500))
	if _, ok, _ := c.Get(ctx, testKey(1)); ok {
		t.Error("entry 1 must be evicted: the temp file counts toward the cap")
	}
	if _, err := os.Stat(young); err != nil {
		t.Error("a young temp file must survive pruning")
	}
}

// TestHelperProcess is not a test: it is the body of the worker processes
// that the cross-process tests start by re-executing the test binary.
func TestHelperProcess(t *testing.T) {
	testproc.Serve(t, map[string]func() error{
		"hammer":   hammer,
		"compile":  compileHelper,
		"holdlock": holdLockHelper,
	})
}

// hammerSize is the code size of key n in the cross-process test.
func hammerSize(n int) int { return 2000 + n*300 }

func hammer() error {
	dir := os.Getenv("PROGCACHE_DIR")
	seed, _ := strconv.Atoi(os.Getenv("PROGCACHE_SEED"))
	killAt, _ := strconv.Atoi(os.Getenv("PROGCACHE_KILL_AT_WRITE"))
	c, err := Open(dir, Options{MaxBytes: 96 << 10})
	if err != nil {
		return err
	}
	writes := 0
	c.hooks.midWrite = func() {
		writes++
		if writes == killAt {
			fmt.Println("MIDWRITE")
			testproc.BlockUntilKilled()
		}
	}
	ctx := context.Background()
	r := rand.New(rand.NewPCG(uint64(seed), 1))
	for range 200 {
		n := r.IntN(40)
		switch op := r.IntN(10); {
		case op < 4:
			if err := c.Put(ctx, testKey(n), testObject(n, hammerSize(n))); err != nil {
				return err
			}
		case op < 9:
			got, ok, err := c.Get(ctx, testKey(n))
			if err != nil {
				return err
			}
			if ok && !got.Equal(testObject(n, hammerSize(n))) {
				return fmt.Errorf("read a wrong or partial object for key %d", n)
			}
		default:
			if _, err := c.Prune(ctx, 64<<10); err != nil {
				return err
			}
		}
	}
	if s := c.Stats(); s.Corrupt != 0 {
		return fmt.Errorf("saw %d corrupt entries", s.Corrupt)
	}
	fmt.Println("DONE")
	return nil
}

func TestFileStreamCrossProcess(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("uses SIGKILL")
	}
	if testing.Short() {
		t.Skip("starts 8 processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	const workers = 8
	var wg sync.WaitGroup
	results := make([]string, workers)
	for w := range workers {
		killAt := 0
		if w%3 == 0 { // workers 0, 3, 6 are killed half way through a write
			killAt = 5 + w
		}
		cmd, sc := testproc.Start(t, ctx, "PROGCACHE_HELPER=hammer", "PROGCACHE_DIR="+dir,
			"PROGCACHE_SEED="+strconv.Itoa(w), "PROGCACHE_KILL_AT_WRITE="+strconv.Itoa(killAt))
		wg.Go(func() {
			var last string
			for sc.Scan() {
				last = sc.Text()
				if last == "MIDWRITE" {
					cmd.Process.Kill()
					break
				}
			}
			cmd.Wait()
			results[w] = last
		})
	}
	wg.Wait()
	for w, r := range results {
		want := "DONE"
		if w%3 == 0 {
			want = "MIDWRITE"
		}
		if r != want {
			t.Errorf("worker %d ended with %q, want %q", w, r, want)
		}
	}
	// Every entry left reads back valid or is absent; no file is corrupt.
	c := openFS(t, dir, Options{})
	ents, err := c.Entries(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Err != "" {
			t.Errorf("entry %s: %s", e.Key, e.Err)
		}
	}
	for n := range 40 {
		got, ok, err := c.Get(context.Background(), testKey(n))
		if err != nil || (ok && !got.Equal(testObject(n, hammerSize(n)))) {
			t.Errorf("key %d: hit %v err %v: wrong object", n, ok, err)
		}
	}
	if s := c.Stats(); s.Corrupt != 0 {
		t.Errorf("%d corrupt entries after the run", s.Corrupt)
	}
	// The killed writers left young temp files; they are not swept.
	if tmp, _ := os.ReadDir(c.tmp); len(tmp) < 3 {
		t.Errorf("%d temp files left, want at least the 3 killed writers'", len(tmp))
	}
}

func TestFileStreamCountersFold(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for i := range statsFold + 5 {
		c, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		c.Put(ctx, testKey(i), testObject(i, 10))
		c.Get(ctx, testKey(i))
		c.Get(ctx, testKey(-1))
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	c := openFS(t, dir, Options{})
	tot, err := c.Totals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(statsFold + 5)
	if tot.Puts != n || tot.Hits != n || tot.Misses != n || tot.Entries != n {
		t.Errorf("totals %+v, want %d puts, hits, misses and entries", tot, n)
	}
	if ds, _ := os.ReadDir(c.stats); len(ds) > statsFold {
		t.Errorf("%d counter files: they must be folded", len(ds))
	}
}

// TestOpenEntryStat checks that the stat openEntry returns describes the
// file as os.Lstat does (identity, size, mtime, mode), which
// removeIfSameLocked's identity check relies on, and that openEntry opens
// only regular files.
func TestOpenEntryStat(t *testing.T) {
	dir := t.TempDir()
	shard := filepath.Join(dir, "ab")
	if err := os.Mkdir(shard, dirPerm); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(shard, "file")
	if err := os.WriteFile(file, []byte("record bytes"), filePerm); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(shard, "dir"), dirPerm); err != nil {
		t.Fatal(err)
	}
	d, err := openRootDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	e, err := d.openEntry("ab", "file")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.read(context.Background(), e.st.size)
	e.close()
	if err != nil || string(b) != "record bytes" {
		t.Fatalf("read = %q, %v", b, err)
	}
	fi, err := os.Lstat(file)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := d.lstat("ab")
	if err != nil || !ls.mode.IsDir() {
		t.Fatalf("lstat of the shard = %v, %v", ls.mode, err)
	}
	sd, _ := d.subdir("ab", false)
	defer sd.close()
	ls, _ = sd.lstat("file")
	if !e.st.same(ls) || e.st.size != fi.Size() || !e.st.mtime.Equal(fi.ModTime()) || e.st.mode != fi.Mode() {
		t.Errorf("openEntry stat %+v; lstat %+v; os.Lstat size %d mtime %v mode %v", e.st, ls, fi.Size(), fi.ModTime(), fi.Mode())
	}
	if _, err := d.openEntry("ab", "dir"); !errors.Is(err, progcache.ErrNotCache) {
		t.Errorf("openEntry of a directory: %v, want ErrNotCache", err)
	}
	if _, err := d.openEntry("ab", "absent"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("openEntry of an absent file: %v, want fs.ErrNotExist", err)
	}
}
