package filestream_test

import (
	"testing"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/filestream"
)

func TestConformance(t *testing.T) {
	dirs := map[progcache.Cache]string{}
	cachetest.Run(t, cachetest.Backend{
		Open: func(t *testing.T, maxBytes int64) progcache.Cache {
			dir := t.TempDir()
			c, err := filestream.Open(dir, filestream.Options{MaxBytes: maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			dirs[c] = dir
			return c
		},
		Reopen: func(t *testing.T, c progcache.Cache) progcache.Cache {
			c.Close()
			r, err := filestream.Open(dirs[c], filestream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		Ops: 1000,
	})
}
