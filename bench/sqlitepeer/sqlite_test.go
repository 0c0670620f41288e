package sqlitepeer

import (
	"path/filepath"
	"testing"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
)

func TestConformance(t *testing.T) {
	cachetest.Run(t, cachetest.Backend{
		Open: func(t *testing.T, maxBytes int64) progcache.Cache {
			c, err := Open(filepath.Join(t.TempDir(), "cache.db"), maxBytes)
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
			c2, err := Open(path, max)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c2.Close() })
			return c2
		},
		Ops: 200,
	})
}

func TestNegativeCap(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "x.db"), -1); err == nil {
		t.Fatal("negative cap accepted")
	}
}
