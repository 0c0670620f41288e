//go:build unix

package filestream

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

// getAndView checks that both read paths see obj under k.
func getAndView(t *testing.T, c *Cache, k progcache.Key, obj progcache.Object) {
	t.Helper()
	ctx := context.Background()
	got, ok, err := c.Get(ctx, k)
	if !ok || err != nil || !got.Equal(obj) {
		t.Fatalf("Get = hit %v, err %v, equal %v; want the object", ok, err, got.Equal(obj))
	}
	ok, err = c.View(ctx, k, func(v progcache.View) error {
		if !bytes.Equal(v.Code(), obj.Code) {
			t.Error("View shows other code")
		}
		return nil
	})
	if !ok || err != nil {
		t.Fatalf("View = hit %v, err %v; want a hit", ok, err)
	}
}

func statEntry(t *testing.T, c *Cache, k progcache.Key) fileStat {
	t.Helper()
	rel := entryRel(k)
	e, err := c.entriesD.openEntry(rel[:2], rel[3:])
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	return e.st
}

// TestFileStreamVerifiedMemory: a file whose checksum passed is remembered
// by its identity, and any write to it afterwards makes the next read
// verify again and find the damage.
func TestFileStreamVerifiedMemory(t *testing.T) {
	ctx := context.Background()
	c := openFS(t, t.TempDir(), Options{})
	c.verified.window = 0 // remember at once; the racy window is tested below
	k, obj := testKey(1), testObject(1, 4096)
	if err := c.Put(ctx, k, obj); err != nil {
		t.Fatal(err)
	}
	getAndView(t, c, k, obj)
	if !c.verified.verified(k, statEntry(t, c, k)) {
		t.Fatal("a file whose checksum passed is not remembered")
	}
	// Corrupt the code in place, past coarse timestamp ticks so its ctime
	// moves: the identity changes, so the read verifies and misses.
	time.Sleep(20 * time.Millisecond)
	f, err := os.OpenFile(c.path(k), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	if _, err := f.WriteAt([]byte{0xFF, 0xFF}, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if c.verified.verified(k, statEntry(t, c, k)) {
		t.Fatal("a file written after its verification still counts as verified")
	}
	before := c.Stats().Corrupt
	if ok, err := c.View(ctx, k, func(progcache.View) error { t.Error("fn called for a corrupt entry"); return nil }); ok || err != nil {
		t.Fatalf("View of an entry corrupted after verification = hit %v, err %v; want a miss", ok, err)
	}
	if got := c.Stats().Corrupt; got != before+1 {
		t.Errorf("Stats.Corrupt = %d, want %d", got, before+1)
	}
	// A Put replaces the file (a new inode): remembered again on its
	// first read, not before.
	if err := c.Put(ctx, k, obj); err != nil {
		t.Fatal(err)
	}
	if c.verified.verified(k, statEntry(t, c, k)) {
		t.Fatal("a new file counts as verified before any read")
	}
	getAndView(t, c, k, obj)
	if !c.verified.verified(k, statEntry(t, c, k)) {
		t.Fatal("the new file was not remembered after its read")
	}
}

// TestFileStreamVerifiedRules: what is never remembered.
func TestFileStreamVerifiedRules(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		opts   Options
		window time.Duration
	}{
		{"changed within the racy window", Options{}, racyWindow},
		{"VerifyEveryRead", Options{VerifyEveryRead: true}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openFS(t, t.TempDir(), tc.opts)
			c.verified.window = tc.window
			k, obj := testKey(2), testObject(2, 1000)
			if err := c.Put(ctx, k, obj); err != nil {
				t.Fatal(err)
			}
			getAndView(t, c, k, obj)
			if c.verified.verified(k, statEntry(t, c, k)) {
				t.Fatal("file remembered as verified; want every read verified")
			}
		})
	}
}

// TestVerifiedFilesBounded: the memory never holds more than maxVerified
// files.
func TestVerifiedFilesBounded(t *testing.T) {
	var v verifiedFiles
	now := time.Now()
	for i := range maxVerified + 100 {
		var k progcache.Key
		k[0], k[1], k[2] = byte(i), byte(i>>8), byte(i>>16)
		v.remember(k, fileStat{ino: uint64(i), size: 1}, now, -1)
	}
	if len(v.m) != maxVerified {
		t.Fatalf("verifiedFiles holds %d files, want the bound %d", len(v.m), maxVerified)
	}
}

// heldFDs counts this process's open descriptors (Linux), or -1.
func heldFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// TestFileStreamHeldFiles: a verified small file's descriptor is held and
// serves later hits; a replacement, an in-place write, a Delete and Close
// each let go of it, and a hit never shows stale or damaged bytes.
func TestFileStreamHeldFiles(t *testing.T) {
	ctx := context.Background()
	c := openFS(t, t.TempDir(), Options{})
	c.verified.window = 0
	k, obj := testKey(1), testObject(1, 4096)
	if err := c.Put(ctx, k, obj); err != nil {
		t.Fatal(err)
	}
	getAndView(t, c, k, obj)
	f := c.verified.acquire(k)
	if f == nil {
		t.Fatal("a verified small file's descriptor is not held")
	}
	c.verified.release(f)
	hits := c.Stats().Hits
	getAndView(t, c, k, obj) // from the held descriptor
	if got := c.Stats().Hits; got != hits+2 {
		t.Fatalf("Stats.Hits = %d after two held hits, want %d", got, hits+2)
	}

	// A Put renames a new file over the name: the held one is stale.
	time.Sleep(20 * time.Millisecond)
	obj2 := testObject(2, 5000)
	if err := c.Put(ctx, k, obj2); err != nil {
		t.Fatal(err)
	}
	getAndView(t, c, k, obj2)

	// An in-place write: found by the identity check, then by the checksum.
	getAndView(t, c, k, obj2) // held again
	time.Sleep(20 * time.Millisecond)
	w, err := os.OpenFile(c.path(k), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte{0xEE, 0xEE, 0xEE}, 3000); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if ok, err := c.View(ctx, k, func(progcache.View) error { t.Error("fn called for a damaged entry"); return nil }); ok || err != nil {
		t.Fatalf("View after an in-place write = hit %v, err %v; want a miss", ok, err)
	}

	// Delete lets go of the descriptor.
	if err := c.Put(ctx, k, obj); err != nil {
		t.Fatal(err)
	}
	getAndView(t, c, k, obj)
	if c.verified.held != 1 {
		t.Fatalf("held = %d, want 1", c.verified.held)
	}
	if err := c.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if c.verified.held != 0 {
		t.Fatalf("held = %d after Delete, want 0", c.verified.held)
	}
	if _, ok, _ := c.Get(ctx, k); ok {
		t.Fatal("Get after Delete hits")
	}
}

// TestFileStreamHeldBounded: at most maxHeld descriptors, all closed by
// Close.
func TestFileStreamHeldBounded(t *testing.T) {
	ctx := context.Background()
	base := heldFDs(t)
	c, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.verified.window = 0
	const maxHeld = 12
	c.verified.maxHeld = maxHeld
	before := heldFDs(t)
	for i := range maxHeld + 10 {
		if err := c.Put(ctx, testKey(i), testObject(i, 100)); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := c.Get(ctx, testKey(i)); !ok || err != nil {
			t.Fatalf("Get %d: %v %v", i, ok, err)
		}
	}
	if c.verified.held != maxHeld {
		t.Fatalf("held = %d, want the bound %d", c.verified.held, maxHeld)
	}
	if n := heldFDs(t); before >= 0 && n-before != maxHeld {
		t.Errorf("%d more descriptors open, want %d", n-before, maxHeld)
	}
	big := testObject(999, maxHeldSize+1)
	if err := c.Put(ctx, testKey(999), big); err != nil {
		t.Fatal(err)
	}
	c.Get(ctx, testKey(999))
	if f := c.verified.acquire(testKey(999)); f != nil {
		t.Error("a file over maxHeldSize is held")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := heldFDs(t); base >= 0 && n != base {
		t.Errorf("%d descriptors open after Close, want the %d open before the cache", n, base)
	}
}

// TestFileStreamHeldStress: readers on held descriptors while a writer
// replaces and deletes the same entries; run under -race. Every hit shows
// a whole object that was put under its key.
func TestFileStreamHeldStress(t *testing.T) {
	t.Run("all held", func(t *testing.T) { heldStress(t, 0) })
	// Descriptors let go of and taken again (readRemembered, hold) while
	// files are replaced.
	t.Run("2 held", func(t *testing.T) { heldStress(t, 2) })
}

func heldStress(t *testing.T, maxHeld int) {
	ctx := context.Background()
	c := openFS(t, t.TempDir(), Options{})
	c.verified.window = 0
	if maxHeld > 0 {
		c.verified.maxHeld = maxHeld
	}
	const keys = 6
	valid := func(n int, code []byte) bool {
		return bytes.Equal(code, testObject(n, 2000).Code) || bytes.Equal(code, testObject(n+100, 3000).Code)
	}
	for n := range keys {
		if err := c.Put(ctx, testKey(n), testObject(n, 2000)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	wg.Go(func() {
		for i := range 300 {
			n := i % keys
			var err error
			switch i % 3 {
			case 0:
				err = c.Put(ctx, testKey(n), testObject(n+100, 3000))
			case 1:
				err = c.Put(ctx, testKey(n), testObject(n, 2000))
			case 2:
				err = c.Delete(ctx, testKey(n))
			}
			if err != nil {
				errs <- err
				return
			}
		}
	})
	for w := range 4 {
		wg.Go(func() {
			for i := range 600 {
				n := (i + w) % keys
				_, err := c.View(ctx, testKey(n), func(v progcache.View) error {
					if !valid(n, v.Code()) {
						return fmt.Errorf("key %d: view shows %d bytes that were never put under it", n, len(v.Code()))
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestFileStreamVerifiedWriteDuringRead: a remembered file that is not held
// (over maxHeldSize) and is written in place after its fstat but before its
// read is verified, not trusted: the identity is compared again after the
// read.
func TestFileStreamVerifiedWriteDuringRead(t *testing.T) {
	ctx := context.Background()
	c := openFS(t, t.TempDir(), Options{})
	c.verified.window = 0
	k, obj := testKey(3), testObject(3, maxHeldSize+4096)
	if err := c.Put(ctx, k, obj); err != nil {
		t.Fatal(err)
	}
	getAndView(t, c, k, obj)
	if f := c.verified.acquire(k); f != nil {
		t.Fatal("a file over maxHeldSize is held")
	}
	if !c.verified.verified(k, statEntry(t, c, k)) {
		t.Fatal("the file was not remembered")
	}
	c.hooks.beforeRead = func() {
		c.hooks.beforeRead = nil
		time.Sleep(20 * time.Millisecond) // past coarse timestamp ticks
		w, err := os.OpenFile(c.path(k), os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer w.Close()
		if _, err := w.WriteAt([]byte{0xEE, 0xEE, 0xEE}, int64(len(obj.Code)/2)); err != nil {
			t.Error(err)
		}
	}
	if _, ok, err := c.Get(ctx, k); ok || err != nil {
		t.Fatalf("Get of a file written between its fstat and its read = hit %v, err %v; want a miss (checksum)", ok, err)
	}
}

// TestFileStreamManyKeysRemembered: with more keys in use than descriptors
// held, a file whose descriptor was let go of is still remembered as
// verified: its later hits compute no checksum and allocate nothing, at
// the default bounds (500 keys) and at bounds far below the keys in use.
// A file replaced on disk meanwhile is verified again.
func TestFileStreamManyKeysRemembered(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxHeld int // 0: the default
	}{{"default bounds", 0}, {"8 held", 8}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := openFS(t, t.TempDir(), Options{})
			c.verified.window = 0
			if tc.maxHeld > 0 {
				c.verified.maxHeld = tc.maxHeld
			}
			const keys = 500
			for i := range keys {
				if err := c.Put(ctx, testKey(i), testObject(i, 4096)); err != nil {
					t.Fatal(err)
				}
			}
			var sums []progcache.Key
			c.hooks.checksummed = func(k progcache.Key) { sums = append(sums, k) }
			var sum int
			fn := func(v progcache.View) error { sum += len(v.Code()); return nil }
			ks := make([]progcache.Key, keys)
			for j := range ks {
				ks[j] = testKey(j)
			}
			i := 0
			view := func() {
				if ok, err := c.View(ctx, ks[i%keys], fn); !ok || err != nil {
					t.Fatalf("View %d = hit %v, err %v", i%keys, ok, err)
				}
				i++
			}
			for range keys { // warm-up: each file is verified once
				view()
			}
			if len(sums) != keys {
				t.Fatalf("warm-up computed %d checksums, want one per key (%d)", len(sums), keys)
			}
			sums = nil
			if a := testing.AllocsPerRun(2*keys, view); a != 0 {
				t.Errorf("a hit allocates %v times with %d keys in use, want 0", a, keys)
			}
			if len(sums) != 0 {
				t.Errorf("%d hits of unchanged, verified files computed %d checksums (first %v), want 0", 2*keys+1, len(sums), sums[0])
			}
			if tc.maxHeld > 0 && c.verified.held > tc.maxHeld {
				t.Errorf("held = %d, over the bound %d", c.verified.held, tc.maxHeld)
			}

			// A file damaged in place and one replaced by a rename: each has
			// another identity now, so its next read computes the checksum
			// and finds the damage, or verifies the new file.
			var notHeld []progcache.Key
			for j := range keys {
				if f := c.verified.acquire(testKey(j)); f != nil {
					c.verified.release(f)
				} else {
					notHeld = append(notHeld, testKey(j))
				}
			}
			if tc.maxHeld > 0 && len(notHeld) < 2 {
				t.Fatalf("%d files not held with the bound %d", len(notHeld), tc.maxHeld)
			}
			damaged, replaced := testKey(3), testKey(4)
			if len(notHeld) >= 2 {
				damaged, replaced = notHeld[0], notHeld[1]
			}
			time.Sleep(20 * time.Millisecond) // past coarse timestamp ticks
			w, err := os.OpenFile(c.path(damaged), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.WriteAt([]byte{0xEE, 0xEE, 0xEE}, 2000); err != nil {
				t.Fatal(err)
			}
			w.Close()
			sums = nil
			corrupt := c.Stats().Corrupt
			if ok, err := c.View(ctx, damaged, func(progcache.View) error { t.Error("fn called for a damaged entry"); return nil }); ok || err != nil {
				t.Fatalf("View of a remembered file damaged in place = hit %v, err %v; want a miss", ok, err)
			}
			if c.Stats().Corrupt != corrupt+1 || len(sums) != 1 {
				t.Errorf("damaged file: Corrupt %d -> %d, %d checksums; want one more corrupt entry after one checksum", corrupt, c.Stats().Corrupt, len(sums))
			}
			var n int
			for j := range keys {
				if testKey(j) == replaced {
					n = j
				}
			}
			other := testObject(n+1000, 4096)
			if err := c.Put(ctx, replaced, other); err != nil {
				t.Fatal(err)
			}
			sums = nil
			getAndView(t, c, replaced, other)
			if len(sums) != 1 {
				t.Errorf("a replaced file was read with %d checksums, want 1 (then remembered)", len(sums))
			}
		})
	}
}
