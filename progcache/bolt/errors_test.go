package bolt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

// TestErrorPrefix: an error of this package names it once, at the start,
// as redistier's and tiered's do, and wraps the sentinel (before, bolt's
// errors began "progcache:", naming the wrong package).
func TestErrorPrefix(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "c.db")
	_, negErr := Open(filepath.Join(dir, "neg.db"), Options{MaxBytes: -1})
	c, err := Open(p, quietBolt(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	_, lockedErr := Open(p, quietBolt(Options{Timeout: 50 * time.Millisecond}))
	c.Close()
	_, _, closedErr := c.Get(ctx, progcache.Key{1})
	ro, err := Open(p, quietBolt(Options{ReadOnly: true}))
	if err != nil {
		t.Fatal(err)
	}
	roErr := ro.Put(ctx, progcache.Key{1}, progcache.Object{Kind: "cubin", Code: []byte("x")})
	ro.Close()
	notBolt := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notBolt, []byte("my notes, not a cache"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, notCacheErr := Open(notBolt, quietBolt(Options{}))
	for _, tc := range []struct {
		name     string
		err      error
		sentinel error
	}{
		{"negative cap", negErr, progcache.ErrInvalidConfig},
		{"locked", lockedErr, ErrLocked},
		{"closed", closedErr, progcache.ErrClosed},
		{"read-only", roErr, progcache.ErrReadOnly},
		{"not a cache", notCacheErr, progcache.ErrNotCache},
	} {
		if !errors.Is(tc.err, tc.sentinel) {
			t.Errorf("%s: %v, want an error wrapping %v", tc.name, tc.err, tc.sentinel)
			continue
		}
		msg := tc.err.Error()
		if !strings.HasPrefix(msg, "bolt: ") || strings.Count(msg, "bolt:") != 1 || strings.Contains(msg, "progcache:") {
			t.Errorf("%s: %q: want one \"bolt:\", at the start, and no \"progcache:\"", tc.name, msg)
		}
	}
}
