package devalloc

// The snapshot in PyTorch's pickle form: the file
// torch.cuda.memory._dump_snapshot writes, which torch.cuda._memory_viz
// and the https://pytorch.org/memory_viz page read.
//
// A small encoder of our own, not a library: the Go pickle libraries are
// decoders (github.com/nlpodyssey/gopickle) or, where they encode
// (github.com/kisielk/og-rek), take interface{} trees and would be the
// module's first dependency beyond the project for the dozen protocol-2
// opcodes this needs. Memoization is not needed: Python's unpickler and
// the viewer's JavaScript one accept a pickle without it. The opcodes are
// the ones PyTorch's own pickler writes for this dict and the viewer's
// JavaScript unpickler (torch/utils/viz/MemoryViz.js) reads, all of
// protocol 2 or older: PROTO 2, EMPTY_DICT, EMPTY_LIST, MARK, SETITEMS,
// APPEND, APPENDS, TUPLE2, BINUNICODE, BININT1, BININT2, BININT, LONG1,
// BINFLOAT, NEWTRUE, NEWFALSE, STOP. Lists and dicts are written in
// batches of 1000 items as Python's pickler does, so the viewer never
// spreads a huge argument list.

import (
	"bufio"
	"encoding/binary"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Pickle opcodes (Python's Lib/pickletools.py names them).
const (
	opProto      = 0x80
	opStop       = '.'
	opMark       = '('
	opEmptyDict  = '}'
	opEmptyList  = ']'
	opSetItem    = 's'
	opSetItems   = 'u'
	opAppend     = 'a'
	opAppends    = 'e'
	opTuple2     = 0x86
	opBinUnicode = 'X'
	opBinInt1    = 'K'
	opBinInt2    = 'M'
	opBinInt     = 'J'
	opLong1      = 0x8a
	opBinFloat   = 'G'
	opNewTrue    = 0x88
	opNewFalse   = 0x89

	pickleProtocol = 2
	// pickleBatch is Python's _BATCHSIZE: items per MARK ... APPENDS.
	pickleBatch = 1000
)

// pickler writes one pickle. A write error sticks in the bufio.Writer and
// is returned by its Flush.
type pickler struct{ w *bufio.Writer }

func (p pickler) op(c byte) { _ = p.w.WriteByte(c) }

// str writes s as BINUNICODE. Invalid UTF-8 is written as U+FFFD, one per
// invalid byte, as encoding/json does, so the pickle and the JSON of one
// snapshot hold the same strings (Python refuses invalid UTF-8).
func (p pickler) str(s string) {
	if !utf8.ValidString(s) {
		s = validUTF8(s)
	}
	p.op(opBinUnicode)
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(s)))
	_, _ = p.w.Write(n[:])
	_, _ = p.w.WriteString(s)
}

// validUTF8 replaces each invalid byte of s with U+FFFD.
func validUTF8(s string) string {
	out := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, s[i:i+size]...)
		}
		i += size
	}
	return string(out)
}

// int writes v with the smallest opcode Python's pickler would use.
func (p pickler) int(v int64) {
	switch {
	case v >= 0 && v <= 0xff:
		p.op(opBinInt1)
		p.op(byte(v))
	case v >= 0 && v <= 0xffff:
		p.op(opBinInt2)
		var b [2]byte
		binary.LittleEndian.PutUint16(b[:], uint16(v))
		_, _ = p.w.Write(b[:])
	case v >= math.MinInt32 && v <= math.MaxInt32:
		p.op(opBinInt)
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(int32(v)))
		_, _ = p.w.Write(b[:])
	default:
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		p.long1(b[:], v < 0)
	}
}

// uint writes v, which may exceed an int64 (addresses).
func (p pickler) uint(v uint64) {
	if v <= math.MaxInt64 {
		p.int(int64(v))
		return
	}
	var b [9]byte // the ninth byte, 0, keeps the sign bit clear
	binary.LittleEndian.PutUint64(b[:], v)
	p.long1(b[:], false)
}

// long1 writes LONG1 with the shortest two's-complement little-endian
// form of the value in b, as Python's encode_long does.
func (p pickler) long1(b []byte, negative bool) {
	fill := byte(0)
	if negative {
		fill = 0xff
	}
	n := len(b)
	// Drop redundant sign bytes: the byte below must carry the sign.
	for n > 1 && b[n-1] == fill && (b[n-2]&0x80 != 0) == negative {
		n--
	}
	p.op(opLong1)
	p.op(byte(n))
	_, _ = p.w.Write(b[:n])
}

func (p pickler) float(v float64) {
	p.op(opBinFloat)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], math.Float64bits(v))
	_, _ = p.w.Write(b[:])
}

func (p pickler) bool(v bool) {
	if v {
		p.op(opNewTrue)
	} else {
		p.op(opNewFalse)
	}
}

// batched writes n items after the container already on the stack, as
// CPython's _pickle does: a single item with the single-item opcode, more
// between MARK and the batch opcode, pickleBatch at a time (a last batch
// of one too).
func (p pickler) batched(n int, item func(i int), single, multi byte) {
	if n == 1 {
		item(0)
		p.op(single)
		return
	}
	for start := 0; start < n; start += pickleBatch {
		end := min(n, start+pickleBatch)
		p.op(opMark)
		for i := start; i < end; i++ {
			item(i)
		}
		p.op(multi)
	}
}

// list writes a list of n items.
func (p pickler) list(n int, item func(i int)) {
	p.op(opEmptyList)
	p.batched(n, item, opAppend, opAppends)
}

// dict writes a dict with string keys; value(i) writes the i-th value.
func (p pickler) dict(keys []string, value func(i int)) {
	p.op(opEmptyDict)
	p.batched(len(keys), func(i int) { p.str(keys[i]); value(i) }, opSetItem, opSetItems)
}

// WritePickle writes the snapshot as the dict torch.cuda.memory._snapshot()
// returns, pickled with protocol 2, as torch.cuda.memory._dump_snapshot
// writes it: python -m torch.cuda._memory_viz and the
// https://pytorch.org/memory_viz page read it. It holds the same data as
// WriteJSON, with PyTorch's key set where the two differ: every segment,
// block and trace entry carries "frames" (a list, empty when no stack was
// recorded), every segment "segment_pool_id" (0, 0) (devalloc has no
// private pools), and an "oom" trace entry "device_free" in place of
// "addr". The extra top-level keys "stats" and "device_info" are ignored
// by PyTorch's readers.
func (s *Snapshot) WritePickle(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	p := pickler{bw}
	p.op(opProto)
	p.op(pickleProtocol)
	top := []string{"segments", "device_traces", "allocator_settings", "stats", "device_info"}
	p.dict(top, func(i int) {
		switch i {
		case 0:
			p.list(len(s.Segments), func(j int) { p.segment(&s.Segments[j]) })
		case 1:
			p.list(len(s.DeviceTraces), func(d int) {
				tr := s.DeviceTraces[d]
				p.list(len(tr), func(j int) { p.traceEntry(&tr[j]) })
			})
		case 2:
			p.settings(&s.Allocator)
		case 3:
			p.stats(s.Stats)
		case 4:
			p.deviceInfo(&s.Device)
		}
	})
	p.op(opStop)
	return bw.Flush()
}

var segmentKeys = []string{"device", "address", "total_size", "allocated_size", "active_size",
	"requested_size", "stream", "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"}

func (p pickler) segment(sg *SegmentInfo) {
	p.dict(segmentKeys, func(i int) {
		switch i {
		case 0:
			p.int(int64(sg.Device))
		case 1:
			p.uint(sg.Address)
		case 2:
			p.uint(sg.TotalSize)
		case 3:
			p.uint(sg.AllocatedSize)
		case 4:
			p.uint(sg.ActiveSize)
		case 5:
			p.uint(sg.RequestedSize)
		case 6:
			p.uint(sg.Stream)
		case 7:
			p.str(sg.SegmentType)
		case 8:
			p.int(0)
			p.int(0)
			p.op(opTuple2)
		case 9:
			p.bool(sg.IsExpandable)
		case 10:
			p.frames(nil)
		case 11:
			p.list(len(sg.Blocks), func(j int) { p.block(&sg.Blocks[j]) })
		}
	})
}

var blockKeys = []string{"address", "size", "requested_size", "state", "frames"}

func (p pickler) block(b *BlockInfo) {
	p.dict(blockKeys, func(i int) {
		switch i {
		case 0:
			p.uint(b.Address)
		case 1:
			p.uint(b.Size)
		case 2:
			p.uint(b.RequestedSize)
		case 3:
			p.str(b.State)
		case 4:
			p.frames(b.Frames)
		}
	})
}

var (
	traceKeys    = []string{"action", "addr", "size", "stream", "time_us", "frames"}
	traceOOMKeys = []string{"action", "device_free", "size", "stream", "time_us", "frames"}
)

func (p pickler) traceEntry(e *TraceEntry) {
	keys := traceKeys
	if e.Action == ActionOOM {
		keys = traceOOMKeys
	}
	p.dict(keys, func(i int) {
		switch i {
		case 0:
			p.str(e.Action)
		case 1:
			if e.Action == ActionOOM {
				p.uint(e.DeviceFree)
			} else {
				p.uint(e.Addr)
			}
		case 2:
			p.uint(e.Size)
		case 3:
			p.uint(e.Stream)
		case 4:
			p.int(e.TimeUS)
		case 5:
			p.frames(e.Frames)
		}
	})
}

var frameKeys = []string{"filename", "line", "name"}

func (p pickler) frames(fs []Frame) {
	p.list(len(fs), func(j int) {
		f := &fs[j]
		p.dict(frameKeys, func(i int) {
			switch i {
			case 0:
				p.str(f.Filename)
			case 1:
				p.int(int64(f.Line))
			case 2:
				p.str(f.Name)
			}
		})
	})
}

var settingsKeys = []string{"PYTORCH_CUDA_ALLOC_CONF", "max_split_size", "garbage_collection_threshold",
	"expandable_segments", "roundup_power2_divisions", "config", "backend", "schema"}

func (p pickler) settings(st *AllocatorSettings) {
	p.dict(settingsKeys, func(i int) {
		switch i {
		case 0:
			p.str(st.Conf)
		case 1:
			p.int(st.MaxSplitSize)
		case 2:
			p.float(st.GarbageCollectionThreshold)
		case 3:
			p.bool(st.ExpandableSegments)
		case 4:
			keys := make([]string, len(st.RoundupPower2Divisions))
			for j := range keys {
				keys[j] = strconv.Itoa(1 << j)
			}
			p.dict(keys, func(j int) { p.int(st.RoundupPower2Divisions[j]) })
		case 5:
			p.str(st.Config)
		case 6:
			p.str(st.Backend)
		case 7:
			p.str(st.Schema)
		}
	})
}

func (p pickler) stats(m map[string]int64) {
	keys := slices.Sorted(maps.Keys(m))
	p.dict(keys, func(i int) { p.int(m[keys[i]]) })
}

var deviceInfoKeys = []string{"device", "total_memory", "free_memory", "expandable_segments_requested",
	"vmm_available", "expandable_segments_in_use", "vmm_granularity"}

func (p pickler) deviceInfo(d *DeviceInfo) {
	p.dict(deviceInfoKeys, func(i int) {
		switch i {
		case 0:
			p.int(int64(d.Device))
		case 1:
			p.uint(d.TotalMemory)
		case 2:
			p.uint(d.FreeMemory)
		case 3:
			p.bool(d.ExpandableRequested)
		case 4:
			p.bool(d.VMMAvailable)
		case 5:
			p.bool(d.ExpandableInUse)
		case 6:
			p.uint(d.VMMGranularity)
		}
	})
}
