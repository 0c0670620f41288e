package progcache

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestErrorPrefixOnce: an error names the package once. The sentinels'
// text has no prefix; the message that wraps one begins with it (before,
// both did: "...: progcache: invalid key").
func TestErrorPrefixOnce(t *testing.T) {
	for _, s := range []error{ErrInvalidInput, ErrNeedsExtraDigest, ErrUncacheable, ErrInvalidKey, ErrCorrupt,
		ErrUnreadable, ErrTooLarge, ErrInvalidConfig, ErrClosed, ErrReadOnly, ErrNotCache} {
		if strings.Contains(s.Error(), "progcache:") {
			t.Errorf("sentinel %q carries the prefix its wrapper adds", s)
		}
	}
	ctx := context.Background()
	m, err := NewMemory(MemoryOptions{MaxBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	_, negErr := NewMemory(MemoryOptions{MaxBytes: -1})
	_, keyErr := ParseKey("zz")
	_, _, recErr := DecodeRecord([]byte("not a record"), RecordOptions{})
	bigErr := m.Put(ctx, Key{1}, Object{Kind: "cubin", Code: make([]byte, 100)})
	m.Close()
	_, _, closedErr := m.Get(ctx, Key{1})
	for _, tc := range []struct {
		name     string
		err      error
		sentinel error
	}{
		{"negative cap", negErr, ErrInvalidConfig},
		{"bad key", keyErr, ErrInvalidKey},
		{"bad record", recErr, ErrCorrupt},
		{"too large", bigErr, ErrTooLarge},
		{"closed", closedErr, ErrClosed},
	} {
		if !errors.Is(tc.err, tc.sentinel) {
			t.Errorf("%s: %v, want an error wrapping %v", tc.name, tc.err, tc.sentinel)
			continue
		}
		msg := tc.err.Error()
		if !strings.HasPrefix(msg, "progcache: ") || strings.Count(msg, "progcache:") != 1 {
			t.Errorf("%s: %q: want one \"progcache:\", at the start", tc.name, msg)
		}
	}
}
