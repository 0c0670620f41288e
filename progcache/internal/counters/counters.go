// Package counters is the persistent form of a cache's event counters:
// hits, misses, puts, evictions, too-large, corrupt and unreadable, as
// little-endian uint64s in that order. progcache/filestream keeps one such record
// per closed session in its stats/ directory and the bolt package keeps a
// running total in its meta bucket, so that Totals can report every
// session, like ccache -s.
package counters

import (
	"encoding/binary"

	"github.com/accelkit/accelkit/progcache"
)

// Set holds the counters in their stored order: hits, misses, puts,
// evictions, too-large, corrupt, unreadable.
type Set [7]int64

// Size is the encoded size of a Set; oldSize, of the six counters written
// before unreadable entries were counted, which Parse still reads.
const (
	Size    = 8 * len(Set{})
	oldSize = Size - 8
)

// Append appends the encoded form of s to b.
func (s Set) Append(b []byte) []byte {
	for _, v := range s {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// Parse decodes b, the form Append writes or the older six-counter form
// (unreadable then reads as 0); ok is false for anything else.
func Parse(b []byte) (s Set, ok bool) {
	if len(b) != Size && len(b) != oldSize {
		return s, false
	}
	for i := range len(b) / 8 {
		s[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return s, true
}

// Add adds now minus since to s, counter by counter: how a session's
// counts since its last save are folded into a stored total.
func (s *Set) Add(now, since Set) {
	for i := range s {
		s[i] += now[i] - since[i]
	}
}

// Of returns s's event counters in their stored order.
func Of(s progcache.Stats) Set {
	return Set{s.Hits, s.Misses, s.Puts, s.Evictions, s.TooLarge, s.Corrupt, s.Unreadable}
}

// Into returns s with its event counters set from c.
func (c Set) Into(s progcache.Stats) progcache.Stats {
	s.Hits, s.Misses, s.Puts, s.Evictions, s.TooLarge, s.Corrupt, s.Unreadable = c[0], c[1], c[2], c[3], c[4], c[5], c[6]
	return s
}
