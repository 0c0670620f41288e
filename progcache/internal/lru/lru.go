// Package lru is the least-recently-used index that progcache.Memory and
// the bolt package's Cache share, in the shape of golang-lru's simplelru:
// a plain core that keeps keys in use order, with a value and a size per
// key and the total of the sizes. It makes no policy: no cap, no eviction
// of its own, no lock. Each cache wraps it in its own lock and decides
// what to evict (Memory: past its entry and byte caps; bolt: past its byte
// cap, after the file agreed).
package lru

import "iter"

// LRU orders keys from most to least recently used. The zero value is an
// empty LRU, ready to use.
//
// Locking: none. An LRU is not safe for concurrent use: its owner holds
// its own lock around every call (Memory.mu, the bolt Cache's mu), and an
// *Entry it returned is valid only under that lock and until the entry is
// removed.
type LRU[K comparable, V any] struct {
	items map[K]*Entry[K, V]
	root  Entry[K, V] // sentinel: root.next is the most recent, root.prev the least
	bytes int64
}

// Entry is one key of an LRU. Value may be changed in place; Key and Size
// are the LRU's (Add changes the size).
type Entry[K comparable, V any] struct {
	Key   K
	Value V
	Size  int64

	next, prev *Entry[K, V]
}

// Len returns the number of keys.
func (l *LRU[K, V]) Len() int { return len(l.items) }

// Bytes returns the sum of the keys' sizes.
func (l *LRU[K, V]) Bytes() int64 { return l.bytes }

// Add stores v with size under k as the most recently used key, replacing
// what k held.
func (l *LRU[K, V]) Add(k K, v V, size int64) {
	if e, ok := l.items[k]; ok {
		l.bytes += size - e.Size
		e.Value, e.Size = v, size
		l.moveToFront(e)
		return
	}
	if l.items == nil {
		l.items = map[K]*Entry[K, V]{}
	}
	if l.root.next == nil {
		l.root.next, l.root.prev = &l.root, &l.root
	}
	e := &Entry[K, V]{Key: k, Value: v, Size: size}
	l.insertFront(e)
	l.items[k] = e
	l.bytes += size
}

// Get returns k's entry and makes k the most recently used key.
func (l *LRU[K, V]) Get(k K) (*Entry[K, V], bool) {
	e, ok := l.items[k]
	if ok {
		l.moveToFront(e)
	}
	return e, ok
}

// Peek returns k's entry without changing the order.
func (l *LRU[K, V]) Peek(k K) (*Entry[K, V], bool) {
	e, ok := l.items[k]
	return e, ok
}

// Contains reports whether k is present, without changing the order.
func (l *LRU[K, V]) Contains(k K) bool {
	_, ok := l.items[k]
	return ok
}

// Remove removes k and reports whether it was present.
func (l *LRU[K, V]) Remove(k K) bool {
	e, ok := l.items[k]
	if ok {
		l.remove(e)
	}
	return ok
}

// RemoveOldest removes the least recently used key and returns its entry;
// ok is false when the LRU is empty.
func (l *LRU[K, V]) RemoveOldest() (e *Entry[K, V], ok bool) {
	if len(l.items) == 0 {
		return nil, false
	}
	e = l.root.prev
	l.remove(e)
	return e, true
}

// Oldest yields the entries from the least to the most recently used. The
// LRU must not be changed during the iteration.
func (l *LRU[K, V]) Oldest() iter.Seq[*Entry[K, V]] {
	return func(yield func(*Entry[K, V]) bool) {
		if len(l.items) == 0 {
			return
		}
		for e := l.root.prev; e != &l.root; e = e.prev {
			if !yield(e) {
				return
			}
		}
	}
}

// Purge removes every key.
func (l *LRU[K, V]) Purge() {
	clear(l.items)
	l.root.next, l.root.prev = &l.root, &l.root
	l.bytes = 0
}

func (l *LRU[K, V]) insertFront(e *Entry[K, V]) {
	e.prev, e.next = &l.root, l.root.next
	l.root.next.prev = e
	l.root.next = e
}

func (l *LRU[K, V]) moveToFront(e *Entry[K, V]) {
	if l.root.next == e {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	l.insertFront(e)
}

func (l *LRU[K, V]) remove(e *Entry[K, V]) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.next, e.prev = nil, nil
	delete(l.items, e.Key)
	l.bytes -= e.Size
}
