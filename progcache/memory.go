package progcache

import (
	"context"
	"fmt"
	"sync"

	"github.com/accelkit/accelkit/progcache/internal/lru"
)

// MemoryOptions configure a Memory cache. The zero value means no caps.
type MemoryOptions struct {
	// MaxEntries caps the number of entries; 0 means no cap.
	MaxEntries int
	// MaxBytes caps the sum of Object.Size over entries; 0 means no cap.
	MaxBytes int64
}

var (
	_ Grouped = (*Memory)(nil)
	_ Viewer  = (*Memory)(nil)
)

// Memory is an in-process LRU cache. It stores objects by reference: Put
// keeps the caller's Object (do not modify its Code or maps afterwards) and
// Get returns it as stored. Get promotes an entry; Contains and Len do not.
//
// Memory is safe for concurrent use.
type Memory struct {
	// Locking: mu guards lru, closed and
	// stats (opts is set once, before the cache is shared); no method calls
	// out while holding it. group has its own lock and is never held together
	// with mu.

	mu     sync.Mutex
	opts   MemoryOptions
	lru    lru.LRU[Key, Object] // sizes are Object.Size
	closed bool
	stats  Stats

	group Group // GetOrCompile's in-process deduplication; own lock
}

// NewMemory returns an empty memory cache. A negative cap is an error
// wrapping ErrInvalidConfig that names the field.
func NewMemory(opts MemoryOptions) (*Memory, error) {
	if opts.MaxEntries < 0 {
		return nil, fmt.Errorf("progcache: MemoryOptions.MaxEntries %d: want 0 (no cap) or a positive count: %w", opts.MaxEntries, ErrInvalidConfig)
	}
	if opts.MaxBytes < 0 {
		return nil, fmt.Errorf("progcache: MemoryOptions.MaxBytes %d: want 0 (no cap) or a positive byte count: %w", opts.MaxBytes, ErrInvalidConfig)
	}
	return &Memory{opts: opts}, nil
}

// enterLocked checks ctx and that the cache is open; mu is held.
func (m *Memory) enterLocked(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.closed {
		return fmt.Errorf("progcache: memory cache: %w", ErrClosed)
	}
	return nil
}

// Group returns the Group that GetOrCompile uses for this cache.
func (m *Memory) Group() *Group { return &m.group }

// Get returns the object stored under k and promotes it.
func (m *Memory) Get(ctx context.Context, k Key) (Object, bool, error) {
	// GetInto's body, not a call of it: one frame more cost a hit 8 ns.
	// With the defer, e.Value goes from the list to the results with no
	// copy between; unlocking first needs one, which cost 1.7 ns.
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enterLocked(ctx); err != nil {
		return Object{}, false, err
	}
	e, ok := m.lru.Get(k)
	if !ok {
		m.stats.Misses++
		return Object{}, false, nil
	}
	m.stats.Hits++
	return e.Value, true, nil
}

// GetInto is Get storing the object in *dst, which it leaves alone on a
// miss or an error: for a cache in front of a Memory (progcache/tiered),
// which would otherwise copy the Object it returns from one call frame
// to the next. Object has too many fields for the compiler to keep in
// registers, and a Get through one more frame cost a hit 14 ns on a
// 30 ns hit (issue 41). It unlocks without a defer: nothing between
// Lock and Unlock can panic.
func (m *Memory) GetInto(ctx context.Context, k Key, dst *Object) (bool, error) {
	m.mu.Lock()
	if err := m.enterLocked(ctx); err != nil {
		m.mu.Unlock()
		return false, err
	}
	e, ok := m.lru.Get(k)
	if !ok {
		m.stats.Misses++
		m.mu.Unlock()
		return false, nil
	}
	m.stats.Hits++
	*dst = e.Value
	m.mu.Unlock()
	return true, nil
}

// View lends fn the stored object itself (see Viewer): nothing is copied
// or allocated. fn runs after the cache's lock is released, so it may call
// the cache; a Put that replaces k meanwhile does not change what fn sees.
func (m *Memory) View(ctx context.Context, k Key, fn func(View) error) (bool, error) {
	obj, ok, err := m.Get(ctx, k)
	if !ok || err != nil {
		return ok, err
	}
	return true, fn(ViewOf(obj))
}

// Contains reports whether k is stored, without promoting it or counting a
// hit or miss.
func (m *Memory) Contains(k Key) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lru.Contains(k)
}

// Put stores obj under k, evicting least recently used entries to honour
// the caps. An object over MaxBytes is not stored and evicts nothing.
func (m *Memory) Put(ctx context.Context, k Key, obj Object) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enterLocked(ctx); err != nil {
		return err
	}
	size := obj.Size()
	if m.opts.MaxBytes > 0 && size > m.opts.MaxBytes {
		m.stats.TooLarge++
		return fmt.Errorf("progcache: object of %d bytes, memory cache cap %d bytes: %w", size, m.opts.MaxBytes, ErrTooLarge)
	}
	m.lru.Add(k, obj, size)
	m.stats.Puts++
	// The new entry is the most recent and fits the byte cap alone, so
	// it is never its own victim.
	for (m.opts.MaxBytes > 0 && m.lru.Bytes() > m.opts.MaxBytes) || (m.opts.MaxEntries > 0 && m.lru.Len() > m.opts.MaxEntries) {
		m.lru.RemoveOldest()
		m.stats.Evictions++
	}
	return nil
}

// Delete removes k; an absent key is not an error.
func (m *Memory) Delete(ctx context.Context, k Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enterLocked(ctx); err != nil {
		return err
	}
	m.lru.Remove(k)
	return nil
}

// Len returns the number of entries.
func (m *Memory) Len(ctx context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enterLocked(ctx); err != nil {
		return 0, err
	}
	return m.lru.Len(), nil
}

// Clear removes every entry.
func (m *Memory) Clear(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enterLocked(ctx); err != nil {
		return err
	}
	m.lru.Purge()
	return nil
}

// Stats returns the counters and current contents.
func (m *Memory) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Entries, s.Bytes = int64(m.lru.Len()), m.lru.Bytes()
	s.MaxEntries, s.MaxBytes = int64(m.opts.MaxEntries), m.opts.MaxBytes
	return s
}

// Close drops every entry; later calls fail with ErrClosed, and Stats keeps
// answering. It is idempotent.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.lru.Purge()
	return nil
}
