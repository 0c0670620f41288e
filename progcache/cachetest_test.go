package progcache_test

import (
	"testing"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
)

func TestFileStreamConformance(t *testing.T) {
	dirs := map[progcache.Cache]string{}
	cachetest.Run(t, cachetest.Backend{
		Open: func(t *testing.T, maxBytes int64) progcache.Cache {
			dir := t.TempDir()
			c, err := progcache.OpenFileStream(dir, progcache.FileStreamOptions{MaxBytes: maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			dirs[c] = dir
			return c
		},
		Reopen: func(t *testing.T, c progcache.Cache) progcache.Cache {
			c.Close()
			r, err := progcache.OpenFileStream(dirs[c], progcache.FileStreamOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		Ops: 1000,
	})
}
