package filestream

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

// treeState records every path under dir with its mode, size, mtime and
// content, without following links.
func treeState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
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
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, before, after map[string]string) {
	t.Helper()
	for p, s := range before {
		if a, ok := after[p]; !ok {
			t.Errorf("%s was removed", p)
		} else if a != s {
			t.Errorf("%s changed", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s was created", p)
		}
	}
}

// TestFileStreamReadOnlyChangesNothing: a read-only Cache reads and
// reports, and leaves every file, mode and time as it was, even with a
// corrupt entry, an old entry a hit would refresh, temp and trash files a
// sweep would remove, and counters a Close would write.
func TestFileStreamReadOnlyChangesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w := openFS(t, dir, Options{})
	for i := range 4 {
		w.Put(ctx, testKey(i), testObject(i, 100))
	}
	old := time.Now().Add(-3 * time.Hour)
	os.Chtimes(w.path(testKey(0)), old, old)
	b, _ := os.ReadFile(w.path(testKey(1)))
	b[len(b)/2] ^= 1
	os.WriteFile(w.path(testKey(1)), b, filePerm)
	for _, p := range []string{filepath.Join(w.tmp, "old"), filepath.Join(w.trash, "old"), filepath.Join(w.locks, lockName(testKey(9)))} {
		os.WriteFile(p, []byte("x"), filePerm)
		os.Chtimes(p, old, old)
	}
	w.Close()
	before := treeState(t, dir)

	c, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Get(ctx, testKey(0)); !ok || err != nil {
		t.Errorf("read-only Get of a good entry = %v, %v", ok, err)
	}
	if _, ok, err := c.Get(ctx, testKey(1)); ok || err != nil {
		t.Errorf("read-only Get of a corrupt entry = %v, %v; want a miss", ok, err)
	}
	if es, err := c.Entries(ctx, false); err != nil || len(es) != 4 {
		t.Errorf("read-only Entries = %d, %v", len(es), err)
	}
	if _, err := c.Totals(ctx); err != nil {
		t.Error(err)
	}
	for name, op := range map[string]func() error{
		"Put":             func() error { return c.Put(ctx, testKey(5), testObject(5, 1)) },
		"Delete":          func() error { return c.Delete(ctx, testKey(2)) },
		"Clear":           func() error { return c.Clear(ctx) },
		"Prune":           func() error { _, err := c.Prune(ctx, 1); return err },
		"Entries(verify)": func() error { _, err := c.Entries(ctx, true); return err },
	} {
		if err := op(); !errors.Is(err, progcache.ErrReadOnly) {
			t.Errorf("read-only %s: %v, want ErrReadOnly", name, err)
		}
	}
	obj, err := progcache.GetOrCompile(ctx, c, testKey(6), func(context.Context) (progcache.Object, error) { return testObject(6, 10), nil })
	if err != nil || !obj.Equal(testObject(6, 10)) {
		t.Errorf("GetOrCompile on a read-only cache = %v; want the compiled object", err)
	}
	if s := c.Stats(); s.Corrupt != 1 || s.Hits != 1 {
		t.Errorf("stats %+v: want the corrupt miss and the hit counted", s)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	sameTree(t, before, treeState(t, dir))

	// A directory that is not a cache is refused, and nothing is created.
	empty := t.TempDir()
	if _, err := Open(empty, Options{ReadOnly: true}); !errors.Is(err, progcache.ErrNotCache) {
		t.Errorf("read-only open of an empty directory: %v, want ErrNotCache", err)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("read-only open created %d entries", len(ents))
	}
}

// TestRetryRename pins the Windows commit's retry policy: only a retryable
// error is retried, at most commitRetries times with a doubling pause.
func TestRetryRename(t *testing.T) {
	busy, other := errors.New("sharing violation"), errors.New("path not found")
	retryable := func(err error) bool { return errors.Is(err, busy) }
	for _, tc := range []struct {
		name      string
		errs      []error // what successive calls return; nil after the list
		wantCalls int
		wantErr   error
	}{
		{"ok at once", nil, 1, nil},
		{"other error is not retried", []error{other}, 1, other},
		{"busy then ok", []error{busy, busy}, 3, nil},
		{"busy then other", []error{busy, other}, 2, other},
		{"busy past the bound", nil, 0, nil},
	} {
		if tc.name == "busy past the bound" {
			for range commitRetries + 5 {
				tc.errs = append(tc.errs, busy)
			}
			tc.wantCalls, tc.wantErr = commitRetries+1, busy
		}
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			var pauses []time.Duration
			err := retryRename(func() error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			}, retryable, func(d time.Duration) { pauses = append(pauses, d) })
			if !errors.Is(err, tc.wantErr) || calls != tc.wantCalls {
				t.Errorf("err %v after %d calls; want %v after %d", err, calls, tc.wantErr, tc.wantCalls)
			}
			for i := 1; i < len(pauses); i++ {
				if pauses[i] != 2*pauses[i-1] {
					t.Errorf("pauses %v do not double", pauses)
				}
			}
		})
	}
}

// TestFileStreamCloseDuringOperations: Close waits for operations that hold
// the directory handles and later ones fail with ErrClosed, so a closed
// descriptor (perhaps reused for another file) is never used.
func TestFileStreamCloseDuringOperations(t *testing.T) {
	ctx := context.Background()
	for round := range 20 {
		c, err := Open(t.TempDir(), Options{MaxBytes: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		errs := make(chan error, 64)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				<-start
				for i := range 50 {
					k := testKey((g*50 + i) % 23)
					var err error
					switch i % 5 {
					case 0, 1:
						err = c.Put(ctx, k, testObject(i, 3000))
					case 2:
						_, _, err = c.Get(ctx, k)
					case 3:
						err = c.Delete(ctx, k)
					case 4:
						_, err = c.Entries(ctx, false)
					}
					if err != nil && !errors.Is(err, progcache.ErrClosed) {
						errs <- err
						return
					}
				}
			})
		}
		close(start)
		if round%2 == 0 {
			time.Sleep(time.Millisecond)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
		if _, _, err := c.Get(ctx, testKey(1)); !errors.Is(err, progcache.ErrClosed) {
			t.Fatalf("Get after Close: %v, want ErrClosed", err)
		}
	}
}

// TestEntryReadHonoursContext: a read larger than one chunk looks at its
// context between chunks, so an abandoned Get of a large entry stops.
func TestEntryReadHonoursContext(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "ab"), dirPerm)
	if err := os.WriteFile(filepath.Join(dir, "ab", "big"), make([]byte, 3*readChunk), filePerm); err != nil {
		t.Fatal(err)
	}
	d, err := openRootDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	e, err := d.openEntry("ab", "big")
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.read(ctx, e.st.size); !errors.Is(err, context.Canceled) {
		t.Errorf("read of %d bytes with a cancelled context: %v, want context.Canceled", e.st.size, err)
	}
	if b, err := e.read(context.Background(), e.st.size); err != nil || int64(len(b)) != e.st.size {
		t.Errorf("read = %d bytes, %v", len(b), err)
	}
}
