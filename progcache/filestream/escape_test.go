//go:build unix

package filestream

// Regression tests for issue 23 (Cache): links out of the cache,
// foreign files, pipes, sparse files, prune accounting, leases and
// leftovers. Each failed on the code before the fix, as its comment says.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

// outsideFiles makes n files older than any lease in a fresh directory
// outside any cache and returns the directory and their contents.
func outsideFiles(t *testing.T, n int) (string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	want := map[string][]byte{}
	old := time.Now().Add(-3 * time.Hour)
	for i := range n {
		name := fmt.Sprintf("user-file-%02d", i)
		b := []byte(fmt.Sprintf("precious %d\n", i))
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, old, old)
		want[name] = b
	}
	return dir, want
}

func checkUntouched(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(want) {
		t.Errorf("%s holds %d files, want its %d", dir, len(ents), len(want))
	}
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s: %v, content %q; want it untouched", name, err, got)
		}
	}
}

// Before: opening the cache swept (deleted) 40 of 40 files through a
// symlinked tmp/, trash/ or locks/, and the counter fold on Close renamed
// and deleted those of a symlinked stats/.
func TestFileStreamSymlinkedDirsNotFollowed(t *testing.T) {
	for _, sub := range []string{"tmp", "trash", "locks", "stats"} {
		t.Run(sub, func(t *testing.T) {
			dir := t.TempDir()
			c, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			outside, want := outsideFiles(t, 40)
			if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dir, sub)); err != nil {
				t.Fatal(err)
			}
			c, err = Open(dir, Options{TempLease: time.Minute, LockLease: time.Second})
			if err == nil {
				c.Put(context.Background(), testKey(1), testObject(1, 10))
				c.Get(context.Background(), testKey(1))
				c.Close()
				t.Errorf("Open with %s/ a symlink out of the cache succeeded; want a refusal", sub)
			} else if !errors.Is(err, progcache.ErrNotCache) {
				t.Errorf("Open error %v, want ErrNotCache", err)
			}
			checkUntouched(t, outside, want)
		})
	}
}

// Before: the fold claimed every file in stats/ whose name did not start
// with a dot, so a stray file there was renamed and deleted.
func TestFileStreamStatsFoldLeavesForeignFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := openFS(t, dir, Options{})
	c.Close()
	want := map[string][]byte{}
	for i := range statsFold + 8 {
		name := fmt.Sprintf("notes-%d.txt", i)
		want[name] = []byte("not counters")
		os.WriteFile(filepath.Join(c.stats, name), want[name], filePerm)
	}
	for i := range 3 {
		c := openFS(t, dir, Options{})
		c.Get(ctx, testKey(i))
		c.Close()
	}
	for name, b := range want {
		if got, err := os.ReadFile(filepath.Join(c.stats, name)); err != nil || !bytes.Equal(got, b) {
			t.Errorf("stray file %s: %v; want it untouched", name, err)
		}
	}
}

// Before: an entry that was a symlink to a file outside the cache was read
// and served.
func TestFileStreamSymlinkedEntryNotServed(t *testing.T) {
	ctx := context.Background()
	outsideCache := openFS(t, t.TempDir(), Options{})
	if err := outsideCache.Put(ctx, testKey(1), testObject(1, 100)); err != nil {
		t.Fatal(err)
	}
	target := outsideCache.path(testKey(1))
	before, _ := os.ReadFile(target)

	c := openFS(t, t.TempDir(), Options{})
	p := c.path(testKey(1))
	os.MkdirAll(filepath.Dir(p), dirPerm)
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Get(ctx, testKey(1)); ok || err != nil {
		t.Fatalf("Get through a symlinked entry = hit %v, err %v; want a miss", ok, err)
	}
	c.Delete(ctx, testKey(1))
	c.Entries(ctx, false)
	c.Prune(ctx, 1)
	c.Clear(ctx)
	if after, err := os.ReadFile(target); err != nil || !bytes.Equal(after, before) {
		t.Errorf("the link's target changed: %v", err)
	}
}

// Before: a shard directory that was a symlink to an outside directory was
// followed: Get served the file there and Put wrote into it.
func TestFileStreamSymlinkedShardNotFollowed(t *testing.T) {
	ctx := context.Background()
	outsideCache := openFS(t, t.TempDir(), Options{})
	if err := outsideCache.Put(ctx, testKey(1), testObject(1, 100)); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Dir(outsideCache.path(testKey(1)))
	want := map[string][]byte{}
	ents, _ := os.ReadDir(outside)
	for _, e := range ents {
		want[e.Name()], _ = os.ReadFile(filepath.Join(outside, e.Name()))
	}

	c := openFS(t, t.TempDir(), Options{})
	shard := filepath.Dir(c.path(testKey(1)))
	if err := os.Symlink(outside, shard); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Get(ctx, testKey(1)); ok || err != nil {
		t.Fatalf("Get through a symlinked shard = hit %v, err %v; want a miss", ok, err)
	}
	if err := c.Put(ctx, testKey(1), testObject(1, 500)); err == nil {
		t.Error("Put into a symlinked shard succeeded; want an error")
	}
	c.Put(ctx, testKey(2), testObject(2, 50))
	c.Delete(ctx, testKey(1))
	c.Clear(ctx)
	checkUntouched(t, outside, want)
}

// Before: a root writable by others was used as is.
func TestFileStreamRootWritableByOthers(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if c, err := Open(dir, Options{}); err == nil {
		c.Close()
		t.Fatal("Open of a world-writable root succeeded; want a refusal")
	} else if !errors.Is(err, fs.ErrPermission) || !bytes.Contains([]byte(err.Error()), []byte("AllowSharedRoot")) {
		t.Errorf("error %v: want fs.ErrPermission naming the opt-in", err)
	}
	os.Chmod(dir, 0o770)
	if _, err := Open(dir, Options{}); err == nil {
		t.Error("a group-writable root must be refused too")
	}
	c, err := Open(dir, Options{AllowSharedRoot: true})
	if err != nil {
		t.Fatalf("AllowSharedRoot: %v", err)
	}
	c.Close()
}

// Before: a named pipe at an entry's name blocked Get forever in open(2).
func TestFileStreamNamedPipeEntry(t *testing.T) {
	ctx := context.Background()
	c := openFS(t, t.TempDir(), Options{})
	p := c.path(testKey(1))
	os.MkdirAll(filepath.Dir(p), dirPerm)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	t.Cleanup(func() {
		// Release a reader stuck in open(2) on the old code.
		if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		_, ok, err := c.Get(ctx, testKey(1))
		done <- result{ok, err}
	}()
	select {
	case r := <-done:
		if r.ok || r.err != nil {
			t.Fatalf("Get of a named pipe = hit %v, err %v; want a miss", r.ok, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Get of a named pipe at an entry's name did not return in 10 s")
	}
	if fi, err := os.Lstat(p); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("the pipe must be left alone: %v %v", fi, err)
	}
	if s := c.Stats(); s.Misses != 1 || s.Unreadable != 1 {
		t.Errorf("misses %d unreadable %d, want 1 and 1", s.Misses, s.Unreadable)
	}
}

// Before: a 2 GiB sparse file at an entry's name was read whole (2.1 GB of
// memory, 15 s) before it counted as a miss; 8 GiB was an out-of-memory
// crash. Reads are bounded by the entry cap now.
func TestFileStreamSparseEntryBounded(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		size int64
		opts Options
		kept bool // over the bound: kept; under it but not a record: removed
	}{
		{"2GiB over a 1MiB cap", 2 << 30, Options{MaxBytes: 1 << 20}, true},
		{"8GiB with no cap", 8 << 30, Options{}, true},
		// Under the bound, but large: its header is judged before the rest
		// is read.
		{"256MiB of zeros under the bound", 256 << 20, Options{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openFS(t, t.TempDir(), tc.opts)
			p := c.path(testKey(1))
			os.MkdirAll(filepath.Dir(p), dirPerm)
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(tc.size); err != nil {
				t.Skipf("sparse file: %v", err)
			}
			f.Close()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, ok, err := c.Get(ctx, testKey(1))
			runtime.ReadMemStats(&after)
			if ok || err != nil {
				t.Fatalf("Get = hit %v, err %v; want a miss", ok, err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
				t.Errorf("Get of a %d-byte sparse file allocated %d bytes; want it bounded by the entry cap, not the file", tc.size, grew)
			}
			_, err = os.Stat(p)
			if tc.kept && err != nil {
				t.Errorf("a file over the entry bound must be kept (a peer with a larger bound may use it): %v", err)
			}
			if !tc.kept && !os.IsNotExist(err) {
				t.Errorf("a corrupt entry under the bound must be removed: %v", err)
			}
		})
	}
}

// Before: when a peer deleted the chosen victim first, the prune did not
// count its bytes as freed and evicted one more entry than needed.
func TestFileStreamPruneVictimGoneNotOverEvicted(t *testing.T) {
	ctx := context.Background()
	c := openFS(t, t.TempDir(), Options{})
	old := time.Now().Add(-time.Hour)
	for i := range 4 {
		c.Put(ctx, testKey(i), testObject(i, 1000))
		ts := old.Add(time.Duration(i) * time.Minute)
		os.Chtimes(c.path(testKey(i)), ts, ts)
	}
	var first atomic.Bool
	c.hooks.beforeVictimRename = func(p string) {
		if first.CompareAndSwap(false, true) {
			os.Remove(p) // a peer prunes the same victim first
		}
	}
	size := progcache.RecordSize(testObject(0, 1000), progcache.RecordOptions{})
	if _, err := c.Prune(ctx, 3*size); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Len(ctx); n != 3 {
		t.Errorf("%d entries after pruning 4 to fit 3 with a peer's help, want 3 (over-evicted)", n)
	}
}

// Before: Clear removed each file without the identity check, so an entry a
// peer committed after the listing was removed too (the hook did not run).
func TestFileStreamClearKeepsNewerEntry(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := openFS(t, dir, Options{})
	peer := openFS(t, dir, Options{})
	for i := range 3 {
		c.Put(ctx, testKey(i), testObject(i, 100))
	}
	newer := testObject(7, 300)
	ran := false
	c.hooks.beforeVictimRename = func(p string) {
		if p == c.path(testKey(1)) {
			ran = true
			time.Sleep(10 * time.Millisecond) // a distinct mtime
			peer.Put(ctx, testKey(1), newer)
		}
	}
	if err := c.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("Clear did not go through the identity-checked removal")
	}
	if got, ok, _ := c.Get(ctx, testKey(1)); !ok || !got.Equal(newer) {
		t.Error("an entry a peer committed during Clear was removed")
	}
	for _, i := range []int{0, 2} {
		if _, ok, _ := c.Get(ctx, testKey(i)); ok {
			t.Errorf("entry %d survived Clear", i)
		}
	}
}

// Before: a regular file where a shard directory belongs made every Get in
// that shard an error. Now it is a miss, Put says what is wrong, and
// verification with fixing sets it aside.
func TestFileStreamShardReplacedByFile(t *testing.T) {
	ctx := context.Background()
	c := openFS(t, t.TempDir(), Options{})
	shard := filepath.Dir(c.path(testKey(1)))
	os.RemoveAll(shard)
	if err := os.WriteFile(shard, []byte("user notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Get(ctx, testKey(1)); ok || err != nil {
		t.Fatalf("Get in a shard replaced by a file = hit %v, err %v; want a miss", ok, err)
	}
	if err := c.Put(ctx, testKey(1), testObject(1, 10)); !errors.Is(err, progcache.ErrNotCache) {
		t.Fatalf("Put into a shard replaced by a file: %v, want ErrNotCache", err)
	}
	es, err := c.Entries(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || !es[0].Foreign || es[0].MovedTo == "" {
		t.Fatalf("Entries(verify) = %+v; want the file reported foreign and moved aside", es)
	}
	if b, err := os.ReadFile(es[0].MovedTo); err != nil || string(b) != "user notes" {
		t.Errorf("the set-aside file: %q, %v; want it whole", b, err)
	}
	if err := c.Put(ctx, testKey(1), testObject(1, 10)); err != nil {
		t.Fatalf("Put after the repair: %v", err)
	}
	if _, ok, _ := c.Get(ctx, testKey(1)); !ok {
		t.Error("Get after the repair missed")
	}
}

// Before: a waiter with a shorter LockLease than the holder broke the live
// holder's lock (the holder refreshes every one of its own leases/4) and
// compiled a second time.
func TestGetOrCompileWaiterHonoursHolderLease(t *testing.T) {
	dir := t.TempDir()
	a := openFS(t, dir, Options{LockLease: 2 * time.Second}) // heartbeat every 500 ms
	b := openFS(t, dir, Options{LockLease: 50 * time.Millisecond})
	// b polls past its own lease many times over while a's heartbeat is up
	// to 500 ms old.
	if n := waiterCompiles(t, a, b, 1200*time.Millisecond); n != 0 {
		t.Fatalf("a waiter with a shorter lease broke a live holder's lock and compiled %d times", n)
	}
}

// Before: trash/ leftovers of killed processes stayed for the temp lease
// (an hour) and did not count toward the cap.
func TestFileStreamTrashLeftovers(t *testing.T) {
	dir := t.TempDir()
	c := openFS(t, dir, Options{})
	c.Close()
	oldTrash, youngTrash := filepath.Join(c.trash, "123-1-old"), filepath.Join(c.trash, "123-2-young")
	os.WriteFile(oldTrash, make([]byte, 5000), filePerm)
	os.WriteFile(youngTrash, make([]byte, 7000), filePerm)
	past := time.Now().Add(-2 * trashLease)
	os.Chtimes(oldTrash, past, past)
	c = openFS(t, dir, Options{})
	if _, err := os.Stat(oldTrash); !os.IsNotExist(err) {
		t.Error("a trash leftover older than a minute must be swept on open")
	}
	if s := c.Stats(); s.Bytes != 7000 {
		t.Errorf("Stats.Bytes = %d, want the young trash file's 7000 (it takes space)", s.Bytes)
	}
}

// Before: GetOrCompile failed when the cache could not store (a read-only
// directory, no permission), although the compile succeeded.
func TestGetOrCompileCannotStore(t *testing.T) {
	ctx := context.Background()
	for _, err := range []error{
		fmt.Errorf("progcache: commit: %w", fs.ErrPermission),
		&fs.PathError{Op: "open", Path: "x", Err: syscall.EROFS},
		&fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC},
	} {
		m, _ := progcache.NewMemory(progcache.MemoryOptions{})
		var g progcache.Group
		obj, gerr := g.GetOrCompile(ctx, failingPut{m, err}, testKey(1), func(context.Context) (progcache.Object, error) { return testObject(1, 10), nil })
		if gerr != nil || !obj.Equal(testObject(1, 10)) {
			t.Errorf("Put failing with %v: GetOrCompile = %v; want the object and no error", err, gerr)
		}
	}
	// Any other Put failure is still reported with the object.
	other := errors.New("disk on fire")
	m, _ := progcache.NewMemory(progcache.MemoryOptions{})
	var g progcache.Group
	if obj, err := g.GetOrCompile(ctx, failingPut{m, other}, testKey(1), func(context.Context) (progcache.Object, error) { return testObject(1, 10), nil }); !errors.Is(err, other) || !obj.Equal(testObject(1, 10)) {
		t.Errorf("other Put failure: %v", err)
	}
}

type failingPut struct {
	progcache.Cache
	err error
}

func (f failingPut) Put(context.Context, progcache.Key, progcache.Object) error { return f.err }
