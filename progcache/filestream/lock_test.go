package filestream

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/internal/testproc"
)

// compileHelper is one of the processes of TestGetOrCompileProcesses.
func compileHelper() error {
	dir := os.Getenv("PROGCACHE_DIR")
	procs, _ := strconv.Atoi(os.Getenv("PROGCACHE_PROCS"))
	c, err := Open(filepath.Join(dir, "cache"), Options{})
	if err != nil {
		return err
	}
	c.hooks.waiting = func(progcache.Key) {
		os.WriteFile(filepath.Join(dir, "waiting", strconv.Itoa(os.Getpid())), nil, 0o600)
	}
	compile := func(ctx context.Context) (progcache.Object, error) {
		f, err := os.OpenFile(filepath.Join(dir, "compiles.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return progcache.Object{}, err
		}
		fmt.Fprintln(f, os.Getpid())
		f.Close()
		// Barrier: hold the lock until every other process waits on it.
		for {
			if ents, _ := os.ReadDir(filepath.Join(dir, "waiting")); len(ents) >= procs-1 {
				break
			}
			if ctx.Err() != nil {
				return progcache.Object{}, ctx.Err()
			}
			runtime.Gosched()
		}
		return testObject(42, 3000), nil
	}
	obj, err := progcache.GetOrCompile(context.Background(), c, testKey(42), compile)
	if err != nil {
		return err
	}
	if !obj.Equal(testObject(42, 3000)) {
		return errors.New("wrong object")
	}
	fmt.Println("GOT")
	return nil
}

func TestGetOrCompileProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "waiting"), 0o700)
	const procs = 4
	var wg sync.WaitGroup
	outs := make([]string, procs)
	for i := range procs {
		cmd, sc := testproc.Start(t, ctx, "PROGCACHE_HELPER=compile", "PROGCACHE_DIR="+dir, "PROGCACHE_PROCS="+strconv.Itoa(procs))
		wg.Go(func() {
			for sc.Scan() {
				outs[i] += sc.Text()
			}
			cmd.Wait()
		})
	}
	wg.Wait()
	for i, o := range outs {
		if o != "GOT" {
			t.Errorf("process %d printed %q, want GOT", i, o)
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "compiles.log"))
	if n := strings.Count(string(log), "\n"); n != 1 {
		t.Fatalf("%d compiles across %d processes, want 1", n, procs)
	}
}

// holdLockHelper takes the compile lock and is killed at the point
// PROGCACHE_KILL_POINT names: "locked" (right after taking the lock) or
// "compiling" (inside the compile function).
func holdLockHelper() error {
	// The waiter honours the lease written in the lock file, so the
	// holder's is short: its heartbeat stops when it is killed.
	c, err := Open(os.Getenv("PROGCACHE_DIR"), Options{LockLease: 200 * time.Millisecond})
	if err != nil {
		return err
	}
	point := os.Getenv("PROGCACHE_KILL_POINT")
	if point == "locked" {
		c.hooks.lockHeld = func() {
			fmt.Println("READY")
			testproc.BlockUntilKilled()
		}
	}
	progcache.GetOrCompile(context.Background(), c, testKey(5), func(context.Context) (progcache.Object, error) {
		if point == "compiling" {
			fmt.Println("READY")
			testproc.BlockUntilKilled()
		}
		return progcache.Object{}, errors.New("unknown kill point " + point)
	})
	return errors.New("not killed")
}

func TestGetOrCompileStaleLock(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("uses SIGKILL")
	}
	for _, point := range []string{"locked", "compiling"} {
		t.Run(point, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			dir := t.TempDir()
			cmd, sc := testproc.Start(t, ctx, "PROGCACHE_HELPER=holdlock", "PROGCACHE_DIR="+dir, "PROGCACHE_KILL_POINT="+point)
			if !sc.Scan() || sc.Text() != "READY" {
				t.Fatalf("child did not reach %s: %q", point, sc.Text())
			}
			cmd.Process.Kill()
			cmd.Wait()
			c := openFS(t, dir, Options{LockLease: 200 * time.Millisecond})
			if _, err := os.Stat(c.lockPath(testKey(5))); err != nil {
				t.Fatalf("the killed child's lock must be there: %v", err)
			}
			compiles := 0
			obj, err := progcache.GetOrCompile(ctx, c, testKey(5), func(context.Context) (progcache.Object, error) {
				compiles++
				return testObject(5, 100), nil
			})
			if err != nil || !obj.Equal(testObject(5, 100)) || compiles != 1 {
				t.Fatalf("after a stale lock: err %v, %d compiles; want one compile", err, compiles)
			}
			if _, err := os.Stat(c.lockPath(testKey(5))); !os.IsNotExist(err) {
				t.Error("the lock must be gone after the compile")
			}
		})
	}
}

func TestGetOrCompileLiveHolderKeepsLock(t *testing.T) {
	const lease = 100 * time.Millisecond
	dir := t.TempDir()
	a := openFS(t, dir, Options{LockLease: lease})
	b := openFS(t, dir, Options{LockLease: lease})
	// b keeps finding a live lock for three leases while a compiles.
	if n := waiterCompiles(t, a, b, 3*lease); n != 0 {
		t.Fatalf("a waiter compiled %d times while a live holder compiled past the lease", n)
	}
}

// waiterCompiles has a take key 3's lock and compile until b, waiting for
// the same key, has polled the lock for hold (or compiled). It returns how
// often b compiled, and fails t unless both end without an error and b
// got a's object when it did not compile.
func waiterCompiles(t *testing.T, a, b *Cache, hold time.Duration) int32 {
	t.Helper()
	locked := make(chan struct{})
	a.hooks.lockHeld = func() { close(locked) }
	release := make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		_, err := progcache.GetOrCompile(context.Background(), a, testKey(3), func(context.Context) (progcache.Object, error) {
			<-release
			return testObject(3, 100), nil
		})
		aDone <- err
	}()
	<-locked
	polls := make(chan struct{}, 1)
	b.hooks.lockPolled = func() {
		select {
		case polls <- struct{}{}:
		default:
		}
	}
	var bCompiles atomic.Int32
	bDone := make(chan error, 1)
	go func() {
		obj, err := progcache.GetOrCompile(context.Background(), b, testKey(3), func(context.Context) (progcache.Object, error) {
			bCompiles.Add(1)
			return testObject(99, 1), nil
		})
		if err == nil && bCompiles.Load() == 0 && !obj.Equal(testObject(3, 100)) {
			err = errors.New("b did not get a's object")
		}
		bDone <- err
	}()
	for start := time.Now(); time.Since(start) < hold && bCompiles.Load() == 0; {
		select {
		case <-polls:
		case <-time.After(hold / 10):
		}
	}
	close(release)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	return bCompiles.Load()
}

// staleLock leaves a lock for k in c's directory as a holder killed an
// hour ago would.
func staleLock(t *testing.T, c *Cache, k progcache.Key) string {
	t.Helper()
	p := c.lockPath(k)
	if err := os.WriteFile(p, []byte("progcache-lock pid=1 host=gone lease=1000000\n"), filePerm); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStaleLockBreakFails: a stale lock whose removal fails is an error
// from tryLock, not "stale, try again", which sent LockKey straight back
// to the same failure in a loop.
func TestStaleLockBreakFails(t *testing.T) {
	dir := t.TempDir()
	c := openFS(t, dir, Options{LockLease: time.Second})
	k := testKey(3)
	p := staleLock(t, c, k)
	// A directory where removeIfSameLocked renames the lock to makes the
	// rename fail (a file cannot replace a directory).
	next := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(trashSeq.Load()+1, 10) + "-" + lockName(k)
	if err := os.Mkdir(filepath.Join(dir, "trash", next), dirPerm); err != nil {
		t.Fatal(err)
	}
	unlock, stale, err := c.tryLock(context.Background(), lockName(k))
	if unlock != nil {
		unlock()
	}
	if err == nil || stale || !strings.Contains(err.Error(), "break stale lock") {
		t.Fatalf("tryLock on an unbreakable stale lock = stale %v, err %v; want an error saying the lock could not be broken", stale, err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Errorf("the stale lock must still be there: %v", err)
	}
}

// TestGetOrCompileUnbreakableStaleLock: a stale lock this process may not
// remove (another user's, in a lock directory it cannot write) means no
// lock can be taken here, so GetOrCompile compiles without it.
func TestGetOrCompileUnbreakableStaleLock(t *testing.T) {
	if runtime.GOOS == "windows" || os.Geteuid() == 0 {
		t.Skip("needs Unix directory permissions that bind the test's user")
	}
	dir := t.TempDir()
	c := openFS(t, dir, Options{LockLease: time.Second})
	k := testKey(4)
	staleLock(t, c, k)
	locks := filepath.Join(dir, "locks")
	if err := os.Chmod(locks, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(locks, dirPerm) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	compiles := 0
	obj, err := progcache.GetOrCompile(ctx, c, k, func(context.Context) (progcache.Object, error) {
		compiles++
		return testObject(4, 100), nil
	})
	if err != nil || !obj.Equal(testObject(4, 100)) || compiles != 1 {
		t.Fatalf("GetOrCompile past an unbreakable stale lock = err %v, %d compiles; want the object from one compile", err, compiles)
	}
}

// plantLock writes a lock file for k saying content, with mtime mtime, as
// a dead or hostile holder would leave it.
func plantLock(t *testing.T, c *Cache, k progcache.Key, content string, mtime time.Time) string {
	t.Helper()
	p := c.lockPath(k)
	if err := os.WriteFile(p, []byte(content), filePerm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	return p
}

// Before: a lock file planted with a huge lease= or a mtime in the future
// blocked its key for good: GetOrCompile waited on it forever.
func TestGetOrCompilePlantedLock(t *testing.T) {
	const maxLease = 300 * time.Millisecond
	for _, tc := range []struct {
		name, content string
		mtime         time.Duration // from now
	}{
		{"huge lease", "progcache-lock pid=1 host=x lease=9223372036854775807\n", 0},
		{"mtime a year ahead", "progcache-lock pid=1 host=x lease=30000000\n", 365 * 24 * time.Hour},
		{"huge lease, mtime a year ahead", "progcache-lock pid=1 host=x lease=9223372036854775807\n", 365 * 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openFS(t, t.TempDir(), Options{LockLease: 20 * time.Millisecond, MaxLockLease: maxLease})
			k := testKey(7)
			plantLock(t, c, k, tc.content, time.Now().Add(tc.mtime))
			// A live lock is honoured for at most twice MaxLockLease; give
			// the waiter far more, and fail rather than hang.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			compiles := 0
			obj, err := progcache.GetOrCompile(ctx, c, k, func(context.Context) (progcache.Object, error) {
				compiles++
				return testObject(7, 100), nil
			})
			if err != nil || compiles != 1 || !obj.Equal(testObject(7, 100)) {
				t.Fatalf("GetOrCompile past a planted lock = %v after %v, %d compiles; want the object, compiled once, within 2*MaxLockLease (%v)", err, time.Since(start), compiles, 2*maxLease)
			}
			if d := time.Since(start); d > 2*maxLease+2*time.Second {
				t.Errorf("GetOrCompile took %v past a planted lock, want at most about 2*MaxLockLease (%v)", d, 2*maxLease)
			}
		})
	}
}

// A heartbeat in the future within MaxLockLease is clock skew: the lock
// is live (a peer on a host whose clock is ahead holds it).
func TestGetOrCompileLockClockSkew(t *testing.T) {
	c := openFS(t, t.TempDir(), Options{LockLease: 20 * time.Millisecond, MaxLockLease: time.Minute})
	k := testKey(8)
	plantLock(t, c, k, "progcache-lock pid=1 host=x lease=20000000\n", time.Now().Add(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := progcache.GetOrCompile(ctx, c, k, func(context.Context) (progcache.Object, error) {
		t.Error("compiled while a lock whose heartbeat is 30 s ahead (within MaxLockLease) was live")
		return testObject(8, 10), nil
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetOrCompile = %v, want to wait on the live lock until ctx ends", err)
	}
}

// Before: a sweeping open kept a lock file planted with a huge lease= or a
// mtime in the future. Only our own lock files are swept.
func TestFileStreamSweepPlantedLocks(t *testing.T) {
	dir := t.TempDir()
	c := openFS(t, dir, Options{})
	c.Close()
	now := time.Now()
	huge := "progcache-lock pid=1 host=x lease=9223372036854775807\n"
	gone := map[string]string{
		"huge lease, 2 h old":    plantLock(t, c, testKey(1), huge, now.Add(-2*time.Hour)),
		"mtime a year ahead":     plantLock(t, c, testKey(2), "progcache-lock pid=1 host=x lease=30000000000\n", now.Add(365*24*time.Hour)),
		"huge lease, year ahead": plantLock(t, c, testKey(3), huge, now.Add(365*24*time.Hour)),
		"empty, 2 h old":         plantLock(t, c, testKey(4), "", now.Add(-2*time.Hour)),
	}
	kept := map[string]string{
		"mtime 1 min ahead (clock skew)": plantLock(t, c, testKey(5), "progcache-lock pid=1 host=x lease=30000000000\n", now.Add(time.Minute)),
		"huge lease, fresh":              plantLock(t, c, testKey(6), huge, now),
		"foreign content":                plantLock(t, c, testKey(7), "not a lock of ours\n", now.Add(-2*time.Hour)),
	}
	other := filepath.Join(c.locks, "notes.lock")
	if err := os.WriteFile(other, []byte(huge), filePerm); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(other, now.Add(-2*time.Hour), now.Add(-2*time.Hour))
	kept["not a key's lock name"] = other

	openFS(t, dir, Options{})
	for what, p := range gone {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: a sweeping open left the lock file (err %v)", what, err)
		}
	}
	for what, p := range kept {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: a sweeping open removed the file: %v", what, err)
		}
	}
}

func TestFileStreamMaxLockLeaseOption(t *testing.T) {
	for _, o := range []Options{
		{MaxLockLease: -1},
		{LockLease: time.Minute, MaxLockLease: time.Second},
		{MaxLockLease: time.Microsecond},
	} {
		if _, err := Open(t.TempDir(), o); !errors.Is(err, progcache.ErrInvalidConfig) || !strings.Contains(err.Error(), "MaxLockLease") {
			t.Errorf("Open(%+v) = %v, want ErrInvalidConfig naming MaxLockLease", o, err)
		}
	}
	c := openFS(t, t.TempDir(), Options{LockLease: time.Hour})
	if c.opts.MaxLockLease != time.Hour {
		t.Errorf("MaxLockLease defaults to %v with a LockLease of 1 h, want 1 h", c.opts.MaxLockLease)
	}
	c = openFS(t, t.TempDir(), Options{})
	if c.opts.MaxLockLease != DefaultMaxLockLease {
		t.Errorf("MaxLockLease defaults to %v, want DefaultMaxLockLease", c.opts.MaxLockLease)
	}
}
