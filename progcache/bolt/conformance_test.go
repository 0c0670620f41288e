package bolt_test

import (
	"path/filepath"
	"testing"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/bolt"
	"github.com/accelkit/accelkit/progcache/cachetest"
)

func TestBoltConformance(t *testing.T) {
	paths := map[progcache.Cache]string{}
	cachetest.Run(t, cachetest.Backend{
		Open: func(t *testing.T, maxBytes int64) progcache.Cache {
			p := filepath.Join(t.TempDir(), "cache.db")
			c, err := bolt.Open(p, bolt.Options{MaxBytes: maxBytes, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			paths[c] = p
			return c
		},
		Reopen: func(t *testing.T, c progcache.Cache) progcache.Cache {
			c.Close()
			r, err := bolt.Open(paths[c], bolt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		Ops: 1000,
	})
}
