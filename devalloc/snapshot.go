package devalloc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/accelkit/accelkit/driver"
)

// Block states in a Snapshot, as in PyTorch's memory snapshot.
const (
	StateActiveAllocated   = "active_allocated"
	StateActivePendingFree = "active_pending_free"
	StateInactive          = "inactive"
)

// Trace actions, as in PyTorch's memory history.
const (
	ActionAlloc          = "alloc"
	ActionFreeRequested  = "free_requested"
	ActionFreeCompleted  = "free_completed"
	ActionSegmentAlloc   = "segment_alloc"
	ActionSegmentFree    = "segment_free"
	ActionSegmentMap     = "segment_map"
	ActionSegmentUnmap   = "segment_unmap"
	ActionOOM            = "oom"
	snapshotSchemaVendor = "accelkit.devalloc"
)

type action uint8

const (
	actAlloc action = iota
	actFreeRequested
	actFreeCompleted
	actSegmentAlloc
	actSegmentFree
	actSegmentMap
	actSegmentUnmap
	actOOM
)

var actionNames = [...]string{ActionAlloc, ActionFreeRequested, ActionFreeCompleted, ActionSegmentAlloc,
	ActionSegmentFree, ActionSegmentMap, ActionSegmentUnmap, ActionOOM}

// Snapshot is the allocator's state in PyTorch's memory snapshot schema
// (torch.cuda.memory._snapshot()), plus the statistics taken at the same
// instant.
type Snapshot struct {
	Segments     []SegmentInfo     `json:"segments"`
	DeviceTraces [][]TraceEntry    `json:"device_traces"`
	Stats        map[string]int64  `json:"stats"`
	Allocator    map[string]string `json:"allocator_settings,omitempty"`
}

// SegmentInfo is one segment (for expandable segments: one mapped range).
type SegmentInfo struct {
	Device        int         `json:"device"`
	Address       uint64      `json:"address"`
	TotalSize     uint64      `json:"total_size"`
	AllocatedSize uint64      `json:"allocated_size"`
	ActiveSize    uint64      `json:"active_size"`
	RequestedSize uint64      `json:"requested_size"`
	Stream        uint64      `json:"stream"`
	SegmentType   string      `json:"segment_type"` // "small" or "large"
	IsExpandable  bool        `json:"is_expandable"`
	Blocks        []BlockInfo `json:"blocks"`
}

// BlockInfo is one block of a segment.
type BlockInfo struct {
	Address       uint64 `json:"address"`
	Size          uint64 `json:"size"`
	RequestedSize uint64 `json:"requested_size"`
	State         string `json:"state"`
}

// TraceEntry is one history event.
type TraceEntry struct {
	Action string  `json:"action"`
	Addr   uint64  `json:"addr"`
	Size   uint64  `json:"size"`
	Stream uint64  `json:"stream"`
	TimeUS int64   `json:"time_us"`
	Frames []Frame `json:"frames,omitempty"`
}

// Frame is one stack frame of a trace entry.
type Frame struct {
	Filename string `json:"filename"`
	Line     int    `json:"line"`
	Name     string `json:"name"`
}

// history is the trace ring buffer. Its mu is the last lock in the order.
type history struct {
	mu     sync.Mutex
	buf    []histEntry
	next   int
	full   bool
	stacks bool
}

type histEntry struct {
	act    action
	addr   driver.Ptr
	size   uint64
	stream uint64
	t      int64
	pcs    []uintptr
}

// maxStackDepth bounds recorded stacks: enough to see the caller's caller
// chain in a framework, small enough to keep each entry cheap.
const maxStackDepth = 16

func newHistory(n int, stacks bool) *history {
	return &history{buf: make([]histEntry, n), stacks: stacks}
}

func (h *history) add(act action, addr driver.Ptr, size, stream uint64) {
	e := histEntry{act: act, addr: addr, size: size, stream: stream, t: time.Now().UnixMicro()}
	if h.stacks {
		pcs := make([]uintptr, maxStackDepth)
		e.pcs = pcs[:runtime.Callers(3, pcs)]
	}
	h.mu.Lock()
	h.buf[h.next] = e
	h.next++
	if h.next == len(h.buf) {
		h.next, h.full = 0, true
	}
	h.mu.Unlock()
}

// entriesLocked returns the ring's contents, oldest first. h.mu held.
func (h *history) entriesLocked() []TraceEntry {
	var raw []histEntry
	if h.full {
		raw = append(append(raw, h.buf[h.next:]...), h.buf[:h.next]...)
	} else {
		raw = append(raw, h.buf[:h.next]...)
	}
	out := make([]TraceEntry, len(raw))
	for i, e := range raw {
		out[i] = TraceEntry{Action: actionNames[e.act], Addr: uint64(e.addr), Size: e.size, Stream: e.stream, TimeUS: e.t}
		if len(e.pcs) > 0 {
			frames := runtime.CallersFrames(e.pcs)
			for {
				f, more := frames.Next()
				out[i].Frames = append(out[i].Frames, Frame{Filename: f.File, Line: f.Line, Name: f.Function})
				if !more {
					break
				}
			}
		}
	}
	return out
}

// Snapshot returns the allocator's segments, blocks, history and stats as
// one consistent state: it holds the allocator's lock while it reads, so
// concurrent calls wait for it briefly.
func (a *Allocator) Snapshot() *Snapshot {
	a.mu.Lock()
	snap := &Snapshot{Segments: []SegmentInfo{}, DeviceTraces: [][]TraceEntry{{}}}
	for fs := a.setHead; fs != nil; fs = fs.nextSet {
		for seg := range fs.segs {
			typ := "large"
			if fs.small {
				typ = "small"
			}
			// An expandable range is reported as PyTorch does: one segment
			// per run of mapped memory; holes hold none.
			var si *SegmentInfo
			for b := seg.head; b != nil; b = b.next {
				if b.state == stateUnmapped {
					if si != nil {
						snap.Segments = append(snap.Segments, *si)
						si = nil
					}
					continue
				}
				if si == nil {
					si = &SegmentInfo{Device: a.dev.Ordinal(), Address: uint64(b.ptr),
						Stream: fs.stream.ID(), SegmentType: typ, IsExpandable: seg.exp != nil, Blocks: []BlockInfo{}}
				}
				bi := BlockInfo{Address: uint64(b.ptr), Size: b.size, RequestedSize: b.requested, State: StateInactive}
				switch b.state {
				case stateAllocated:
					bi.State = StateActiveAllocated
					si.AllocatedSize += b.size
					si.ActiveSize += b.size
					si.RequestedSize += b.requested
				case statePendingFree:
					bi.State = StateActivePendingFree
					si.ActiveSize += b.size
				}
				si.TotalSize += b.size
				si.Blocks = append(si.Blocks, bi)
			}
			if si != nil {
				snap.Segments = append(snap.Segments, *si)
			}
		}
	}
	st := a.statsLocked()
	if a.hist != nil {
		a.hist.mu.Lock()
		snap.DeviceTraces[0] = a.hist.entriesLocked()
		a.hist.mu.Unlock()
	}
	a.mu.Unlock()
	snap.Stats = st.Map()
	snap.Allocator = map[string]string{"config": a.cfg.String(), "backend": a.cfg.Backend.String(), "schema": snapshotSchemaVendor}
	slices.SortFunc(snap.Segments, func(x, y SegmentInfo) int {
		switch {
		case x.Address < y.Address:
			return -1
		case x.Address > y.Address:
			return 1
		}
		return 0
	})
	return snap
}

// WriteJSON encodes the snapshot as JSON.
func (s *Snapshot) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	return enc.Encode(s)
}

// ReadSnapshot decodes a snapshot written by WriteJSON (or a PyTorch
// snapshot converted to JSON with the same field names).
func ReadSnapshot(r io.Reader) (*Snapshot, error) {
	var s Snapshot
	dec := json.NewDecoder(r)
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("devalloc: decode snapshot: %w", err)
	}
	if s.Segments == nil {
		return nil, fmt.Errorf("devalloc: decode snapshot: no \"segments\" array: %w", driver.ErrInvalidValue)
	}
	return &s, nil
}

// WriteSnapshot writes a JSON snapshot to path atomically: through a
// temporary file in the same directory, fsynced and renamed into place,
// then the directory is synced. A symlink at path is replaced, never
// written through; a file being replaced keeps its permissions, a new one
// is 0600 (snapshots may hold stack traces). When the write fails, path
// is untouched and no temporary file is left.
func (a *Allocator) WriteSnapshot(path string) error {
	snap := a.Snapshot()
	if err := writeFileAtomic(path, 0o600, snap.WriteJSON); err != nil {
		return fmt.Errorf("devalloc: write snapshot: %w", err)
	}
	return nil
}

// NotifySnapshotOnSignal writes a snapshot to path each time the process
// receives sig (for example syscall.SIGUSR1), until stop is called; stop
// returns the errors of writes that failed, if any.
func (a *Allocator) NotifySnapshotOnSignal(sig os.Signal, path string) (stop func() error) {
	ch := make(chan os.Signal, 1)
	done := make(chan struct{})
	finished := make(chan error, 1)
	signal.Notify(ch, sig)
	go func() {
		var errs []error
		for {
			select {
			case <-ch:
				if err := a.WriteSnapshot(path); err != nil {
					errs = append(errs, err)
				}
				if a.snapWritten != nil {
					a.snapWritten()
				}
			case <-done:
				finished <- errors.Join(errs...)
				return
			}
		}
	}()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			err = <-finished
		})
		return err
	}
}
