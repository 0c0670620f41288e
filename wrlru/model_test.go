package wrlru

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
)

// model is the reference: a map and a recency list, single-threaded.
type model struct {
	max          int
	order        *list.List // front = most recently used; values are mkey
	elems        map[mkey]*list.Element
	hits, misses uint64
}

type mkey struct{ obj, args int }

func newModel(max int) *model {
	return &model{max: max, order: list.New(), elems: map[mkey]*list.Element{}}
}

// get returns whether the key was a hit; fail makes the computation fail.
func (m *model) get(k mkey, fail bool) bool {
	if e, ok := m.elems[k]; ok {
		m.order.MoveToFront(e)
		m.hits++
		return true
	}
	m.misses++
	if fail {
		return false
	}
	if m.max > 0 && m.order.Len() == m.max {
		old := m.order.Back()
		m.order.Remove(old)
		delete(m.elems, old.Value.(mkey))
	}
	m.elems[k] = m.order.PushFront(k)
	return false
}

func (m *model) evict(obj int) {
	for k, e := range m.elems {
		if k.obj == obj {
			m.order.Remove(e)
			delete(m.elems, k)
		}
	}
}

func (m *model) clear() {
	m.order.Init()
	clear(m.elems)
	m.hits, m.misses = 0, 0
}

var errModel = errors.New("model: failing argument")

// FuzzModel drives a one-shard cache and the reference model with the same
// operations and compares every result, the counters and the key set.
// Byte 0 picks the bound (0 = unbounded); each following byte is one
// operation: the top two bits choose Get (two of four codes), Evict or
// Clear, the low bits the object (of 4) and arguments (of 8). Argument 7
// makes the computation fail: not cached, counted as a miss.
func FuzzModel(f *testing.F) {
	f.Add([]byte{3, 0x01, 0x02, 0x03, 0x01, 0x04, 0x02, 0x05})
	f.Add([]byte{1, 0x00, 0x00, 0x08, 0x00, 0x80, 0x00})
	f.Add([]byte{4, 0x07, 0x07, 0x01, 0x11, 0x21, 0x31, 0x01, 0x41, 0xC0, 0x01})
	f.Add([]byte{0, 0x01, 0x12, 0x23, 0x34, 0x80, 0x91, 0x01, 0xFF})
	f.Add([]byte{2, 0x10, 0x20, 0x10, 0x30, 0x20, 0x40, 0x10, 0x8F, 0x20})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) == 0 {
			return
		}
		max := int(ops[0] % 9) // the model's bound; 0 is unbounded
		size := max
		if max == 0 {
			size = Unbounded
		}
		objs := newObjs(4)
		calls := 0
		c, err := New(func(_ context.Context, o *obj, a int) (string, error) {
			calls++
			if a == 7 {
				return "", errModel
			}
			return fmt.Sprint(o.id, "/", a), nil
		}, Options{MaxSize: size, Shards: 1})
		if err != nil {
			t.Fatal(err)
		}
		m := newModel(max)
		ctx := context.Background()
		for i, op := range ops[1:] {
			o, a := int(op>>3)&3, int(op&7)
			switch op >> 6 {
			case 0, 1:
				before := calls
				v, err := c.Get(ctx, objs[o], a)
				hit := m.get(mkey{o, a}, a == 7)
				if a == 7 {
					if !errors.Is(err, errModel) {
						t.Fatalf("op %d: Get(%d,%d) err = %v, want the computation's error", i, o, a, err)
					}
				} else if err != nil || v != fmt.Sprint(o, "/", a) {
					t.Fatalf("op %d: Get(%d,%d) = %q, %v", i, o, a, v, err)
				}
				if computed := calls != before; computed == hit {
					t.Fatalf("op %d: Get(%d,%d) computed=%v, model hit=%v", i, o, a, computed, hit)
				}
			case 2:
				c.Evict(objs[o])
				m.evict(o)
			case 3:
				c.Clear()
				m.clear()
			}
			inf := c.Info()
			if inf.Hits != m.hits || inf.Misses != m.misses || inf.CurrSize != m.order.Len() {
				t.Fatalf("op %d: Info %v, model hits=%d misses=%d currsize=%d", i, inf, m.hits, m.misses, m.order.Len())
			}
			var got, want []mkey
			for _, k := range c.Keys() {
				got = append(got, mkey{k.Obj.id, k.Args})
			}
			for k := range m.elems {
				want = append(want, k)
			}
			cmp := func(x, y mkey) int { return (x.obj-y.obj)*8 + x.args - y.args }
			slices.SortFunc(got, cmp)
			slices.SortFunc(want, cmp)
			if !slices.Equal(got, want) {
				t.Fatalf("op %d: keys %v, model %v", i, got, want)
			}
		}
		runtime.KeepAlive(objs)
	})
}
