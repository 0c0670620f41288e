package progcache

import (
	"container/list"
	"context"
	"fmt"
	"sync"
)

// MemoryOptions configure a Memory cache. The zero value means no caps.
type MemoryOptions struct {
	// MaxEntries caps the number of entries; 0 means no cap.
	MaxEntries int
	// MaxBytes caps the sum of Object.Size over entries; 0 means no cap.
	MaxBytes int64
}

// Memory is an in-process LRU cache. It stores objects by reference: Put
// keeps the caller's Object (do not modify its Code or maps afterwards) and
// Get returns it as stored. Get promotes an entry; Contains and Len do not.
//
// Memory is safe for concurrent use. Locking: mu guards the fields from
// opts to stats; no method calls out while holding it. group has its own
// lock and is never held together with mu.
type Memory struct {
	mu     sync.Mutex
	opts   MemoryOptions
	lru    *list.List // of *memEntry, most recent at the front
	byKey  map[Key]*list.Element
	bytes  int64
	closed bool
	stats  Stats

	group Group // GetOrCompile's in-process deduplication; own lock
}

type memEntry struct {
	key  Key
	obj  Object
	size int64
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
	return &Memory{opts: opts, lru: list.New(), byKey: map[Key]*list.Element{}}, nil
}

func (m *Memory) enter(ctx context.Context) error {
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
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx); err != nil {
		return Object{}, false, err
	}
	e, ok := m.byKey[k]
	if !ok {
		m.stats.Misses++
		return Object{}, false, nil
	}
	m.stats.Hits++
	m.lru.MoveToFront(e)
	return e.Value.(*memEntry).obj, true, nil
}

// Contains reports whether k is stored, without promoting it or counting a
// hit or miss.
func (m *Memory) Contains(k Key) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.byKey[k]
	return ok
}

// Put stores obj under k, evicting least recently used entries to honour
// the caps. An object over MaxBytes is not stored and evicts nothing.
func (m *Memory) Put(ctx context.Context, k Key, obj Object) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx); err != nil {
		return err
	}
	size := obj.Size()
	if m.opts.MaxBytes > 0 && size > m.opts.MaxBytes {
		m.stats.TooLarge++
		return fmt.Errorf("progcache: object of %d bytes, memory cache cap %d bytes: %w", size, m.opts.MaxBytes, ErrTooLarge)
	}
	if e, ok := m.byKey[k]; ok {
		m.removeElement(e)
	}
	m.byKey[k] = m.lru.PushFront(&memEntry{key: k, obj: obj, size: size})
	m.bytes += size
	m.stats.Puts++
	for (m.opts.MaxBytes > 0 && m.bytes > m.opts.MaxBytes) || (m.opts.MaxEntries > 0 && m.lru.Len() > m.opts.MaxEntries) {
		m.removeElement(m.lru.Back())
		m.stats.Evictions++
	}
	return nil
}

func (m *Memory) removeElement(e *list.Element) {
	me := m.lru.Remove(e).(*memEntry)
	delete(m.byKey, me.key)
	m.bytes -= me.size
}

// Delete removes k; an absent key is not an error.
func (m *Memory) Delete(ctx context.Context, k Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx); err != nil {
		return err
	}
	if e, ok := m.byKey[k]; ok {
		m.removeElement(e)
	}
	return nil
}

// Len returns the number of entries.
func (m *Memory) Len(ctx context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx); err != nil {
		return 0, err
	}
	return m.lru.Len(), nil
}

// Clear removes every entry.
func (m *Memory) Clear(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.enter(ctx); err != nil {
		return err
	}
	m.lru.Init()
	clear(m.byKey)
	m.bytes = 0
	return nil
}

// Stats returns the counters and current contents.
func (m *Memory) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Entries, s.Bytes = int64(m.lru.Len()), m.bytes
	s.MaxEntries, s.MaxBytes = int64(m.opts.MaxEntries), m.opts.MaxBytes
	return s
}

// Close drops every entry; later calls fail with ErrClosed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.lru.Init()
	clear(m.byKey)
	m.bytes = 0
	return nil
}
