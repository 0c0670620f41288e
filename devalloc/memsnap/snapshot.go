// Package memsnap is the memory snapshot format: PyTorch's snapshot schema
// (torch.cuda.memory._snapshot()) as Go types, its JSON form (WriteJSON,
// Read) and its pickle form (WritePickle), the file
// torch.cuda.memory._dump_snapshot writes and PyTorch's viewers open.
//
// devalloc fills a Snapshot (Allocator.Snapshot), memviz reads one, and
// anything else that writes snapshots (a C-ABI library over the
// allocator) writes them through this package, so there is one encoder.
// It imports nothing of devalloc: only driver, whose ErrInvalidValue its
// errors wrap, and atomicfile, which writes the files.
package memsnap

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/accelkit/accelkit/atomicfile"
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
	ActionAlloc         = "alloc"
	ActionFreeRequested = "free_requested"
	ActionFreeCompleted = "free_completed"
	ActionSegmentAlloc  = "segment_alloc"
	ActionSegmentFree   = "segment_free"
	ActionSegmentMap    = "segment_map"
	ActionSegmentUnmap  = "segment_unmap"
	ActionOOM           = "oom"
)

// Schema is AllocatorSettings.Schema in the snapshots accelkit writes.
const Schema = "accelkit.devalloc"

// Snapshot is an allocator's state in PyTorch's memory snapshot schema
// (torch.cuda.memory._snapshot()), plus the statistics taken at the same
// instant and what the device reported. WriteJSON and WritePickle write
// it; PyTorch's readers ignore the keys they do not know ("stats",
// "device_info", our extra "allocator_settings" entries).
type Snapshot struct {
	Segments []SegmentInfo `json:"segments"`
	// DeviceTraces is indexed by device ordinal, as in PyTorch: the
	// allocator's trace is at its device's index, earlier ones are empty.
	DeviceTraces [][]TraceEntry   `json:"device_traces"`
	Stats        map[string]int64 `json:"stats"`
	// Allocator holds the settings, under PyTorch's keys and ours.
	Allocator AllocatorSettings `json:"allocator_settings"`
	// Device is what the driver reported when the snapshot was taken.
	Device DeviceInfo `json:"device_info"`
}

// AllocatorSettings is the snapshot's "allocator_settings": the keys
// PyTorch writes there, then ours.
type AllocatorSettings struct {
	// Conf is the configuration in devalloc.ParseConfig syntax, under PyTorch's
	// key for its own.
	Conf string `json:"PYTORCH_CUDA_ALLOC_CONF"`
	// MaxSplitSize is in bytes; -1 when unlimited (PyTorch writes SIZE_MAX
	// cast to int64).
	MaxSplitSize               int64   `json:"max_split_size"`
	GarbageCollectionThreshold float64 `json:"garbage_collection_threshold"`
	ExpandableSegments         bool    `json:"expandable_segments"`
	// RoundupPower2Divisions lists the divisions per power-of-two
	// interval from 1 MiB; the pickle writes it as PyTorch does, a dict
	// keyed "1", "2", "4", ... (the interval's start in MiB).
	RoundupPower2Divisions []int64 `json:"roundup_power2_divisions"`
	// Config is Conf again, under the key earlier snapshots used.
	Config  string `json:"config"`
	Backend string `json:"backend"`
	Schema  string `json:"schema"` // Schema
}

// DeviceInfo is the snapshot's "device_info": the device's memory as the
// driver reported it, and whether virtual memory management was asked
// for, is available and is in use.
type DeviceInfo struct {
	Device      int    `json:"device"`
	TotalMemory uint64 `json:"total_memory"`
	FreeMemory  uint64 `json:"free_memory"`
	// ExpandableRequested: expandable_segments was configured.
	ExpandableRequested bool `json:"expandable_segments_requested"`
	// VMMAvailable: the device offers driver.VMM with a usable
	// granularity (probed by devalloc.New whatever the configuration).
	VMMAvailable bool `json:"vmm_available"`
	// ExpandableInUse: segments are expandable ranges.
	ExpandableInUse bool   `json:"expandable_segments_in_use"`
	VMMGranularity  uint64 `json:"vmm_granularity"`
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
	// Frames is the stack that allocated a live or pending block, when
	// block stacks were recorded (RecordHistory, ContextState or wider).
	Frames []Frame `json:"frames,omitempty"`
}

// TraceEntry is one history event. Size is the requested size for alloc
// and free events (as in PyTorch), the mapped or allocated size for
// segment events, the request for oom.
type TraceEntry struct {
	Action string `json:"action"`
	Addr   uint64 `json:"addr"`
	// DeviceFree is, for an oom entry, the device's free memory as the
	// driver reported it (PyTorch's "device_free"); 0 otherwise.
	DeviceFree uint64  `json:"device_free,omitempty"`
	Size       uint64  `json:"size"`
	Stream     uint64  `json:"stream"`
	TimeUS     int64   `json:"time_us"`
	Frames     []Frame `json:"frames,omitempty"`
}

// Frame is one stack frame of a trace entry or a block.
type Frame struct {
	Filename string `json:"filename"`
	Line     int    `json:"line"`
	Name     string `json:"name"`
}

// WriteJSON encodes the snapshot as JSON.
func (s *Snapshot) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	return enc.Encode(s)
}

// DefaultReadLimit is how many bytes Read reads at most:
// 1 GiB, several times the JSON of a full default history (100,000
// entries) with stacks. It also keeps every string of the snapshot under
// the 4 GiB a pickle string holds, even where decoding turns each invalid
// byte into a 3-byte U+FFFD.
const DefaultReadLimit = 1 << 30

// Read decodes a snapshot written by WriteJSON (or a PyTorch snapshot
// converted to JSON with the same field names), reading at most
// DefaultReadLimit bytes; ReadLimit takes another limit.
func Read(r io.Reader) (*Snapshot, error) {
	return ReadLimit(r, DefaultReadLimit)
}

// ReadLimit is Read reading at most limit bytes (limit >
// 0): a longer input is refused, without being read further, with an
// error that names the limit and wraps driver.ErrInvalidValue. Decoding
// takes several times the input's size in memory.
func ReadLimit(r io.Reader, limit int64) (*Snapshot, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("memsnap: decode snapshot: read limit %d: want a positive number of bytes: %w", limit, driver.ErrInvalidValue)
	}
	var s Snapshot
	lr := &io.LimitedReader{R: r, N: limit}
	if limit < math.MaxInt64 {
		lr.N++ // one byte more shows the input is longer
	}
	dec := json.NewDecoder(lr)
	err := dec.Decode(&s)
	if lr.N == 0 {
		return nil, fmt.Errorf("memsnap: decode snapshot: longer than the read limit of %d bytes (%s; ReadLimit and memviz -max-bytes take a larger one): %w",
			limit, formatBytes(uint64(limit)), driver.ErrInvalidValue)
	}
	if err != nil {
		return nil, fmt.Errorf("memsnap: decode snapshot: %w", err)
	}
	if s.Segments == nil {
		return nil, fmt.Errorf("memsnap: decode snapshot: no \"segments\" array: %w", driver.ErrInvalidValue)
	}
	return &s, nil
}

// PicklePath returns where WriteFiles(path) writes the pickle form:
// path with its extension replaced by ".pickle" (snap.json ->
// snap.pickle), or with ".pickle" added when it has none. The name is the
// one torch.cuda.memory._dump_snapshot uses by default.
func PicklePath(path string) string {
	return strings.TrimSuffix(path, filepath.Ext(path)) + ".pickle"
}

// WriteFiles writes the snapshot twice: as JSON to path, and in
// PyTorch's pickle form (WritePickle) to PicklePath(path), which
// torch.cuda._memory_viz and https://pytorch.org/memory_viz open. Each
// file is written by atomicfile's policy: through a temporary file in the
// same directory, fsynced and renamed into place, then the directory is
// synced. A file being replaced keeps its permissions, a new one is 0600
// (snapshots may hold stack traces); a symbolic link or anything else but
// a regular file at a path is refused (atomicfile.ErrNotRegular), neither
// written through nor replaced. When a write fails, its path is untouched
// and no temporary file is left; the JSON is written first, and a failure
// of either is returned. A path whose extension is ".pickle" is refused: the
// two files would have one name.
func (s *Snapshot) WriteFiles(path string) error {
	pp := PicklePath(path)
	if pp == path {
		return fmt.Errorf("memsnap: write snapshot %q: the path names the pickle file; give the JSON path (for example snapshot.json, which writes snapshot.pickle beside it): %w", path, driver.ErrInvalidValue)
	}
	if err := atomicfile.WriteFile(path, 0o600, s.WriteJSON); err != nil {
		return fmt.Errorf("memsnap: write snapshot: %w", err)
	}
	if err := atomicfile.WriteFile(pp, 0o600, s.WritePickle); err != nil {
		return fmt.Errorf("memsnap: write snapshot pickle: %w", err)
	}
	return nil
}

// formatBytes prints n as devalloc's messages do.
func formatBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
