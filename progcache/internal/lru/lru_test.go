package lru

import (
	"slices"
	"testing"
)

// order lists the keys from the least to the most recently used.
func order(l *LRU[string, int]) []string {
	var ks []string
	for e := range l.Oldest() {
		ks = append(ks, e.Key)
	}
	return ks
}

func TestLRU(t *testing.T) {
	type step struct {
		op    string // add, get, peek, contains, remove, oldest, purge
		key   string
		size  int64
		ok    bool     // what get, peek, contains, remove and oldest report
		order []string // least recent first, after the step
		bytes int64
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"zero value", []step{
			{op: "get", key: "a", order: nil},
			{op: "oldest", ok: false},
			{op: "remove", key: "a", ok: false},
			{op: "purge"},
			{op: "add", key: "a", size: 1, order: []string{"a"}, bytes: 1},
		}},
		{"add orders by use", []step{
			{op: "add", key: "a", size: 1, order: []string{"a"}, bytes: 1},
			{op: "add", key: "b", size: 2, order: []string{"a", "b"}, bytes: 3},
			{op: "add", key: "c", size: 4, order: []string{"a", "b", "c"}, bytes: 7},
		}},
		{"get promotes, peek and contains do not", []step{
			{op: "add", key: "a", size: 1}, {op: "add", key: "b", size: 1}, {op: "add", key: "c", size: 1, order: []string{"a", "b", "c"}, bytes: 3},
			{op: "peek", key: "a", ok: true, order: []string{"a", "b", "c"}, bytes: 3},
			{op: "contains", key: "a", ok: true, order: []string{"a", "b", "c"}, bytes: 3},
			{op: "get", key: "a", ok: true, order: []string{"b", "c", "a"}, bytes: 3},
			{op: "get", key: "a", ok: true, order: []string{"b", "c", "a"}, bytes: 3},
			{op: "get", key: "z", ok: false, order: []string{"b", "c", "a"}, bytes: 3},
		}},
		{"add replaces and promotes", []step{
			{op: "add", key: "a", size: 1}, {op: "add", key: "b", size: 1},
			{op: "add", key: "a", size: 10, order: []string{"b", "a"}, bytes: 11},
		}},
		{"remove and remove oldest", []step{
			{op: "add", key: "a", size: 1}, {op: "add", key: "b", size: 2}, {op: "add", key: "c", size: 4},
			{op: "remove", key: "b", ok: true, order: []string{"a", "c"}, bytes: 5},
			{op: "remove", key: "b", ok: false, order: []string{"a", "c"}, bytes: 5},
			{op: "oldest", key: "a", ok: true, order: []string{"c"}, bytes: 4},
			{op: "oldest", key: "c", ok: true, order: nil, bytes: 0},
			{op: "oldest", ok: false, order: nil, bytes: 0},
		}},
		{"purge empties and the LRU is usable after", []step{
			{op: "add", key: "a", size: 1}, {op: "add", key: "b", size: 2},
			{op: "purge", order: nil, bytes: 0},
			{op: "contains", key: "a", ok: false},
			{op: "add", key: "c", size: 3, order: []string{"c"}, bytes: 3},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l LRU[string, int]
			for i, s := range tc.steps {
				ok := false
				switch s.op {
				case "add":
					l.Add(s.key, i, s.size)
				case "get":
					var e *Entry[string, int]
					if e, ok = l.Get(s.key); ok && e.Key != s.key {
						t.Fatalf("step %d: Get(%q) returned the entry of %q", i, s.key, e.Key)
					}
				case "peek":
					_, ok = l.Peek(s.key)
				case "contains":
					ok = l.Contains(s.key)
				case "remove":
					ok = l.Remove(s.key)
				case "oldest":
					var e *Entry[string, int]
					if e, ok = l.RemoveOldest(); ok && e.Key != s.key {
						t.Fatalf("step %d: RemoveOldest removed %q, want %q", i, e.Key, s.key)
					}
				case "purge":
					l.Purge()
				}
				if s.op != "add" && s.op != "purge" && ok != s.ok {
					t.Fatalf("step %d: %s(%q) reported %v, want %v", i, s.op, s.key, ok, s.ok)
				}
				if s.order == nil && s.bytes == 0 && s.op == "add" {
					continue // a setup step
				}
				if got := order(&l); !slices.Equal(got, s.order) || l.Len() != len(s.order) || l.Bytes() != s.bytes {
					t.Fatalf("step %d (%s %q): order %q, Len %d, Bytes %d; want %q, %d, %d", i, s.op, s.key, got, l.Len(), l.Bytes(), s.order, len(s.order), s.bytes)
				}
			}
		})
	}
}

func TestLRUValueInPlace(t *testing.T) {
	var l LRU[string, int]
	l.Add("a", 1, 1)
	e, _ := l.Get("a")
	e.Value = 42
	if e, _ := l.Peek("a"); e.Value != 42 {
		t.Errorf("a value changed in place reads back as %d, want 42", e.Value)
	}
}

func TestLRUOldestStops(t *testing.T) {
	var l LRU[string, int]
	for _, k := range []string{"a", "b", "c"} {
		l.Add(k, 0, 1)
	}
	var seen []string
	for e := range l.Oldest() {
		seen = append(seen, e.Key)
		if e.Key == "b" {
			break
		}
	}
	if !slices.Equal(seen, []string{"a", "b"}) {
		t.Errorf("Oldest with a break at b yielded %q", seen)
	}
}

func BenchmarkGetHit(b *testing.B) {
	var l LRU[int, int]
	for i := range 1024 {
		l.Add(i, i, 1)
	}
	i := 0
	for b.Loop() {
		l.Get(i & 1023)
		i++
	}
}
