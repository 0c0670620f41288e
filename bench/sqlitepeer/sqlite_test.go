package sqlitepeer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
)

func TestConformance(t *testing.T) {
	cachetest.Run(t, cachetest.Backend{
		Open: func(t *testing.T, maxBytes int64) progcache.Cache {
			c, err := Open(filepath.Join(t.TempDir(), "cache.db"), Options{MaxBytes: maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		},
		Reopen: func(t *testing.T, c progcache.Cache) progcache.Cache {
			sc := c.(*Cache)
			var path string
			if err := sc.db.QueryRow(`SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
				t.Fatal(err)
			}
			max := sc.maxBytes
			sc.Close()
			c2, err := Open(path, Options{MaxBytes: max})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c2.Close() })
			return c2
		},
		Ops: 200,
	})
}

// TestNegativeCap: a negative MaxBytes is refused with an error naming the
// field, and no database file is made.
func TestNegativeCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	_, err := Open(path, Options{MaxBytes: -1})
	if !errors.Is(err, progcache.ErrInvalidConfig) || !strings.Contains(err.Error(), "Options.MaxBytes -1") {
		t.Fatalf("Open with MaxBytes -1 = %v, want ErrInvalidConfig naming Options.MaxBytes", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused Open left %s behind (stat: %v)", path, err)
	}
}

// TestCorruptEntryRemoval: a corrupt record is a counted miss and is
// removed; when the removal fails (a trigger refuses DELETE), Get says so
// instead of reporting a plain miss, and a later Get removes it.
func TestCorruptEntryRemoval(t *testing.T) {
	ctx := context.Background()
	c, err := Open(filepath.Join(t.TempDir(), "cache.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var k progcache.Key
	k[0] = 1
	if err := c.Put(ctx, k, progcache.Object{Kind: "elf", Name: "f.o", Code: []byte("code")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.db.Exec(`UPDATE entries SET record = x'00' WHERE key = ?`, k[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.db.Exec(`CREATE TRIGGER refuse_delete BEFORE DELETE ON entries BEGIN SELECT RAISE(ABORT, 'delete refused'); END`); err != nil {
		t.Fatal(err)
	}
	_, ok, err := c.Get(ctx, k)
	if ok || err == nil || !strings.Contains(err.Error(), "remove corrupt entry") || !strings.Contains(err.Error(), "delete refused") {
		t.Fatalf("Get of a corrupt entry that cannot be removed = (hit %v, %v), want a miss with the removal error", ok, err)
	}
	if _, err := c.db.Exec(`DROP TRIGGER refuse_delete`); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Get(ctx, k); ok || err != nil {
		t.Fatalf("Get of a corrupt entry = (hit %v, %v), want a plain miss", ok, err)
	}
	if n, err := c.Len(ctx); n != 0 || err != nil {
		t.Errorf("Len = %d, %v after the corrupt entry's removal, want 0", n, err)
	}
	if st := c.Stats(); st.Corrupt != 2 || st.Misses != 2 {
		t.Errorf("corrupt %d misses %d, want 2 and 2", st.Corrupt, st.Misses)
	}
}
