package counters

import (
	"bytes"
	"testing"
)

func TestParse(t *testing.T) {
	full := Set{1, 2, 3, 4, 5, 6, 7}
	for _, tc := range []struct {
		name string
		b    []byte
		want Set
		ok   bool
	}{
		{"seven counters", full.Append(nil), full, true},
		{"six counters, written before unreadable was counted", full.Append(nil)[:oldSize], Set{1, 2, 3, 4, 5, 6, 0}, true},
		{"empty", nil, Set{}, false},
		{"short", full.Append(nil)[:Size-1], Set{}, false},
		{"long", append(full.Append(nil), 0), Set{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Parse(tc.b)
			if ok != tc.ok || got != tc.want {
				t.Errorf("Parse(%d bytes) = %v, %v; want %v, %v", len(tc.b), got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestAdd(t *testing.T) {
	sum := Set{10, 10, 10, 10, 10, 10, 10}
	sum.Add(Set{5, 4, 3, 2, 1, 0, 9}, Set{1, 1, 1, 1, 1, 0, 0})
	if want := (Set{14, 13, 12, 11, 10, 10, 19}); sum != want {
		t.Errorf("Add = %v, want %v", sum, want)
	}
}

// FuzzParse: Parse accepts exactly the two record sizes, and what it reads
// from a full record encodes back to the same bytes.
func FuzzParse(f *testing.F) {
	f.Add(Set{1, 2, 3, 4, 5, 6, 7}.Append(nil))
	f.Add(Set{-1, 0, 1 << 62, 0, 0, 0, 0}.Append(nil)[:oldSize])
	f.Add([]byte{})
	f.Add(make([]byte, Size+1))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, ok := Parse(b)
		if ok != (len(b) == Size || len(b) == oldSize) {
			t.Fatalf("Parse(%d bytes) ok = %v", len(b), ok)
		}
		if ok && !bytes.Equal(s.Append(nil)[:len(b)], b) {
			t.Fatalf("Parse then Append changed the record: %x -> %x", b, s.Append(nil))
		}
	})
}
