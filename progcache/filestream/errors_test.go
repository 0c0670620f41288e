package filestream_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/filestream"
)

// TestErrorPrefix: an error of this package names it once, at the start,
// and wraps progcache's sentinel (before the package split, "progcache:").
func TestErrorPrefix(t *testing.T) {
	ctx := context.Background()
	_, notCacheErr := filestream.Open(t.TempDir(), filestream.Options{ReadOnly: true})
	_, negErr := filestream.Open(t.TempDir(), filestream.Options{MaxBytes: -1})
	dir := filepath.Join(t.TempDir(), "c")
	c, err := filestream.Open(dir, filestream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	_, _, closedErr := c.Get(ctx, progcache.Key{1})
	ro, err := filestream.Open(dir, filestream.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	roErr := ro.Put(ctx, progcache.Key{1}, progcache.Object{Kind: "cubin", Code: []byte("x")})
	ro.Close()
	for _, tc := range []struct {
		name     string
		err      error
		sentinel error
	}{
		{"not a cache", notCacheErr, progcache.ErrNotCache},
		{"negative cap", negErr, progcache.ErrInvalidConfig},
		{"closed", closedErr, progcache.ErrClosed},
		{"read-only", roErr, progcache.ErrReadOnly},
	} {
		if !errors.Is(tc.err, tc.sentinel) {
			t.Errorf("%s: %v, want an error wrapping %v", tc.name, tc.err, tc.sentinel)
			continue
		}
		msg := tc.err.Error()
		if !strings.HasPrefix(msg, "filestream: ") || strings.Count(msg, "filestream:") != 1 || strings.Contains(msg, "progcache:") {
			t.Errorf("%s: %q: want one \"filestream:\", at the start, and no \"progcache:\"", tc.name, msg)
		}
	}
}
