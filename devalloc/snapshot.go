package devalloc

import (
	"errors"
	"math"
	"os"
	"os/signal"
	"slices"
	"sync"

	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver"
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

var actionNames = [...]string{memsnap.ActionAlloc, memsnap.ActionFreeRequested, memsnap.ActionFreeCompleted, memsnap.ActionSegmentAlloc,
	memsnap.ActionSegmentFree, memsnap.ActionSegmentMap, memsnap.ActionSegmentUnmap, memsnap.ActionOOM}

// Snapshot returns, in memsnap's format, the allocator's segments,
// blocks, history and stats as one consistent state: it holds the
// allocator's lock while it reads, so concurrent calls wait for it
// briefly. Stacks are resolved to frames
// after the lock is released.
func (a *Allocator) Snapshot() *memsnap.Snapshot {
	free, total, _ := a.dev.MemInfo() // best effort: zeros if the device cannot say
	dev := a.dev.Ordinal()
	snap := &memsnap.Snapshot{Segments: []memsnap.SegmentInfo{}, DeviceTraces: make([][]memsnap.TraceEntry, max(dev, 0)+1)}
	for i := range snap.DeviceTraces {
		snap.DeviceTraces[i] = []memsnap.TraceEntry{}
	}
	type blockStack struct {
		seg, blk int
		pcs      []uintptr
	}
	var stacks []blockStack
	a.mu.Lock()
	for fs := a.setHead; fs != nil; fs = fs.nextSet {
		for seg := range fs.segs {
			typ := "large"
			if fs.small {
				typ = "small"
			}
			// An expandable range is reported as PyTorch does: one segment
			// per run of mapped memory; holes hold none.
			var si *memsnap.SegmentInfo
			for b := seg.head; b != nil; b = b.next {
				if b.state == stateUnmapped {
					if si != nil {
						snap.Segments = append(snap.Segments, *si)
						si = nil
					}
					continue
				}
				if si == nil {
					si = &memsnap.SegmentInfo{Device: dev, Address: uint64(b.ptr),
						Stream: fs.stream.ID(), SegmentType: typ, IsExpandable: seg.exp != nil, Blocks: []memsnap.BlockInfo{}}
				}
				bi := memsnap.BlockInfo{Address: uint64(b.ptr), Size: b.size, RequestedSize: b.requested, State: memsnap.StateInactive}
				switch b.state {
				case stateAllocated:
					bi.State = memsnap.StateActiveAllocated
					si.AllocatedSize += b.size
					si.ActiveSize += b.size
					si.RequestedSize += b.requested
				case statePendingFree:
					// Active until its streams' work is over: PyTorch's
					// requested_size counts it too.
					bi.State = memsnap.StateActivePendingFree
					si.ActiveSize += b.size
					si.RequestedSize += b.requested
				}
				if pcs := b.stack(); len(pcs) > 0 {
					stacks = append(stacks, blockStack{len(snap.Segments), len(si.Blocks), pcs})
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
	a.rec.mu.Lock()
	raw := a.rec.rawLocked()
	a.rec.mu.Unlock()
	a.mu.Unlock()
	for _, bs := range stacks {
		snap.Segments[bs.seg].Blocks[bs.blk].Frames = frames(bs.pcs)
	}
	if dev >= 0 {
		snap.DeviceTraces[dev] = traceEntries(raw)
	}
	snap.Stats = st.Map()
	snap.Allocator = a.settings()
	snap.Device = memsnap.DeviceInfo{Device: dev, TotalMemory: total, FreeMemory: free,
		ExpandableRequested: a.cfg.ExpandableSegments, VMMAvailable: a.vmmAvail,
		ExpandableInUse: a.vmm != nil}
	if v, ok := driver.AsVMM(a.dev); ok && a.vmmAvail {
		snap.Device.VMMGranularity = v.Granularity()
	}
	slices.SortFunc(snap.Segments, func(x, y memsnap.SegmentInfo) int {
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

// settings returns the snapshot's allocator_settings.
func (a *Allocator) settings() memsnap.AllocatorSettings {
	conf := a.cfg.String()
	st := memsnap.AllocatorSettings{Conf: conf, MaxSplitSize: -1, GarbageCollectionThreshold: a.cfg.GarbageCollectionThreshold,
		ExpandableSegments: a.cfg.ExpandableSegments, RoundupPower2Divisions: make([]int64, RoundupIntervals),
		Config: conf, Backend: a.cfg.Backend.String(), Schema: memsnap.Schema}
	if a.cfg.MaxSplitSize != 0 {
		st.MaxSplitSize = int64(min(a.cfg.MaxSplitSize, math.MaxInt64))
	}
	for i, d := range a.cfg.RoundupPower2Divisions {
		st.RoundupPower2Divisions[i] = int64(min(d, math.MaxInt64))
	}
	return st
}

// WriteSnapshot writes a.Snapshot() with memsnap's Snapshot.WriteFiles:
// JSON at path and the pickle at memsnap.PicklePath(path), each
// atomically (a symlink at a path is replaced, never written through; a
// new file is 0600). A path ending in ".pickle" is refused.
func (a *Allocator) WriteSnapshot(path string) error {
	return a.Snapshot().WriteFiles(path)
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
