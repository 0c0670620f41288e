package bolt

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

// growSparse extends the file at p to the largest of sizes the filesystem
// allows (a hole: nothing is written) and returns it, or skips.
func growSparse(t *testing.T, p string, sizes ...int64) int64 {
	t.Helper()
	for _, n := range sizes {
		if err := os.Truncate(p, n); err == nil {
			return n
		}
	}
	t.Skipf("the filesystem under %s allows none of the sparse sizes %v", p, sizes)
	return 0
}

// setHighWater sets both meta pages' page count to hwm and reseals them.
func setHighWater(t *testing.T, p string, hwm uint64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 2*4096)
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	ps := int(parseBoltMeta(head).pageSize)
	for _, off := range []int{0, ps} {
		nativeEndian.PutUint64(head[off+boltPageHeader+40:], hwm)
	}
	resealMetas(head)
	if _, err := f.WriteAt(head[:2*ps], 0); err != nil {
		t.Fatal(err)
	}
}

// sparseState is what a test keeps of a sparse file to check it was left
// alone: its Lstat (inode, size, mtime) and its first and last MiB (the
// file is too large to read whole).
type sparseState struct {
	fi         os.FileInfo
	head, tail []byte
}

func stateSparse(t *testing.T, p string) sparseState {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return sparseState{fi: fi, head: readAtMost(f, 0, 1<<20), tail: readAtMost(f, max(0, fi.Size()-1<<20), 1<<20)}
}

func (s sparseState) check(t *testing.T, p string) {
	t.Helper()
	now := stateSparse(t, p)
	if !os.SameFile(now.fi, s.fi) || now.fi.Size() != s.fi.Size() || !now.fi.ModTime().Equal(s.fi.ModTime()) ||
		!bytes.Equal(now.head, s.head) || !bytes.Equal(now.tail, s.tail) {
		t.Errorf("%s was replaced or written to", p)
	}
	if m, _ := filepath.Glob(p + ".corrupt-*"); len(m) != 0 {
		t.Errorf("%s was set aside as %v", p, m)
	}
}

// allocDuring returns the bytes f allocates on the heap.
func allocDuring(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestBoltSparseHugePageCount: a sound cache whose metas count far more
// pages than it holds, in a sparse file that long, is damage found with
// memory bounded by what the file holds, not by its page count (the check
// used to allocate a bitset per page: 2^50 pages killed the process), read
// only (progcache stats) as well as read-write.
func TestBoltSparseHugePageCount(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cache.db")
	writeDamageFixture(t, p, 20)
	size := growSparse(t, p, 1<<62, 1<<50, 1<<44-1<<16, 1<<42, 1<<40)
	setHighWater(t, p, uint64(size/4096))
	before := stateSparse(t, p)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	var chk boltCheck
	alloc := allocDuring(func() { chk = checkBoltFile(f, size) })
	f.Close()
	if chk.verdict != boltDamaged {
		t.Errorf("verdict %v (%s), want damaged", chk.verdict, chk.reason)
	}
	if alloc > 64<<20 {
		t.Errorf("checking a %d-byte sparse file allocated %d MiB", size, alloc>>20)
	}
	within(t, "read-only open of the sparse file", func() {
		_, err := Open(p, quietBolt(Options{ReadOnly: true}))
		if !errors.Is(err, progcache.ErrCorrupt) {
			t.Errorf("read-only open: %v, want ErrCorrupt", err)
		}
	})
	before.check(t, p)
	within(t, "read-write open of the sparse file", func() {
		c, err := Open(p, quietBolt(Options{}))
		if err != nil {
			t.Fatalf("read-write open: %v, want the file set aside and a new one", err)
		}
		defer c.Close()
		if c.SetAside() == "" {
			t.Error("the damaged file was not set aside")
		}
		if err := c.Put(context.Background(), testKey(1), testObject(1, 100)); err != nil {
			t.Error(err)
		}
	})
}

// TestBoltSparseNoValidMeta: a sparse file with bbolt's magic and no valid
// meta page is judged from its start and end, not read whole (64 GiB used
// to take minutes).
func TestBoltSparseNoValidMeta(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cache.db")
	head := make([]byte, 4096)
	nativeEndian.PutUint32(head[boltPageHeader:], boltMagic)
	if err := os.WriteFile(p, head, 0o600); err != nil {
		t.Fatal(err)
	}
	growSparse(t, p, 64<<30, 16<<30, 4<<30)
	before := stateSparse(t, p)
	for _, ro := range []bool{true, false} {
		done := make(chan error, 1)
		go func() {
			_, err := Open(p, quietBolt(Options{ReadOnly: ro}))
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, progcache.ErrNotCache) {
				t.Errorf("open (read-only %v): %v, want ErrNotCache", ro, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("open (read-only %v) still running after 20s", ro)
		}
	}
	before.check(t, p)
}
