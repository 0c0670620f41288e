package evpool

import (
	"slices"

	"github.com/accelkit/accelkit/driver"
)

// streamKey identifies a stream across Stream values: driver.Stream.ID is
// unique per device, so (device ordinal, ID) is unique per driver. It is
// accelkit's one notion of stream identity: Deferred, Handles and
// StreamSet all use it, and SameStream exposes it.
type streamKey struct {
	ordinal int
	id      uint64
}

// keyOf returns s's key; ok is false for a nil stream or one without a
// device.
func keyOf(s driver.Stream) (k streamKey, ok bool) {
	if s == nil {
		return streamKey{}, false
	}
	dev := s.Device()
	if dev == nil {
		return streamKey{}, false
	}
	return streamKey{ordinal: dev.Ordinal(), id: s.ID()}, true
}

// SameStream reports whether a and b are the same stream: the same device
// ordinal and stream ID. Two Stream values for one stream (a backend may
// hand out more than one) compare equal; nil is the same only as nil.
// Backends' Stream values are comparable (the driver contract's are
// pointers), so the common case, the very same value, costs one
// comparison and inlines.
func SameStream(a, b driver.Stream) bool {
	return a == b || sameStreamByKey(a, b)
}

func sameStreamByKey(a, b driver.Stream) bool {
	if a == nil || b == nil {
		return false
	}
	if a.ID() != b.ID() {
		return false // the cheap test first: most differing streams differ here
	}
	ka, okA := keyOf(a)
	kb, okB := keyOf(b)
	return okA && okB && ka == kb
}

// StreamSet is a small set of streams without duplicates, by SameStream:
// the streams whose queued work a stream-ordered release waits for. The
// zero value is an empty set. Sets are tiny (an allocation is used on one
// to three streams), so membership is a linear scan that allocates
// nothing.
//
// A StreamSet is not safe for concurrent use: goroutines that share one
// must hold a lock of their own around every call.
type StreamSet struct {
	s []driver.Stream
}

// Add adds s unless the set holds it already or s is nil, and reports
// whether it was added.
func (ss *StreamSet) Add(s driver.Stream) bool {
	if s == nil || ss.Has(s) {
		return false
	}
	ss.s = append(ss.s, s)
	return true
}

// AddSet adds every stream of o.
func (ss *StreamSet) AddSet(o StreamSet) {
	for _, s := range o.s {
		ss.Add(s)
	}
}

// Has reports whether the set holds s.
func (ss *StreamSet) Has(s driver.Stream) bool {
	for _, t := range ss.s {
		if SameStream(t, s) {
			return true
		}
	}
	return false
}

// Remove takes s out of the set and reports whether it was there.
func (ss *StreamSet) Remove(s driver.Stream) bool {
	for i, t := range ss.s {
		if SameStream(t, s) {
			ss.s = slices.Delete(ss.s, i, i+1)
			return true
		}
	}
	return false
}

// Len returns how many streams the set holds.
func (ss *StreamSet) Len() int { return len(ss.s) }

// Streams returns the set's streams, in the order they were added (less
// removals). The slice is the set's own: do not modify it.
func (ss *StreamSet) Streams() []driver.Stream { return ss.s }

// IDs returns the stream IDs, for error messages.
func (ss *StreamSet) IDs() []uint64 {
	ids := make([]uint64, len(ss.s))
	for i, s := range ss.s {
		ids[i] = s.ID()
	}
	return ids
}
