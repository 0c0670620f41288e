package memsnap

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
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/accelkit/accelkit/driver"
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

// maxPickleString is the longest string BINUNICODE holds: its length is
// 32 bits. Python's pickler switches to BINUNICODE8 beyond it, but the
// viewer's JavaScript unpickler (MemoryViz.js) does not read that opcode,
// so a longer string is refused.
const maxPickleString = math.MaxUint32

// pickler writes one pickle. A write error sticks in the bufio.Writer and
// is returned by its Flush; a value that cannot be pickled sets err, after
// which nothing more is written.
type pickler struct {
	w      *bufio.Writer
	maxStr uint64 // maxPickleString; smaller in tests
	err    error
}

func (p *pickler) op(c byte) {
	if p.err == nil {
		_ = p.w.WriteByte(c)
	}
}

func (p *pickler) write(b []byte) {
	if p.err == nil {
		_, _ = p.w.Write(b)
	}
}

// str writes s as BINUNICODE. Invalid UTF-8 is written as U+FFFD, one per
// invalid byte, as encoding/json does, so the pickle and the JSON of one
// snapshot hold the same strings (Python refuses invalid UTF-8). A string
// longer than p.maxStr stops the pickle with an error: its length would
// wrap and its tail be read as opcodes.
func (p *pickler) str(s string) {
	if p.err != nil {
		return
	}
	// Checked before and after the replacement, which only lengthens s:
	// an over-long string is not scanned.
	if uint64(len(s)) <= p.maxStr && !utf8.ValidString(s) {
		s = validUTF8(s)
	}
	if uint64(len(s)) > p.maxStr {
		p.err = fmt.Errorf("devalloc: write pickle: a string of %d bytes (starting %q) is longer than a pickle string for PyTorch's viewer holds (%d bytes: BINUNICODE's 32-bit length; the viewer does not read BINUNICODE8): %w",
			len(s), s[:min(len(s), 32)], p.maxStr, driver.ErrInvalidValue)
		return
	}
	p.op(opBinUnicode)
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(s)))
	p.write(n[:])
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
func (p *pickler) int(v int64) {
	switch {
	case v >= 0 && v <= 0xff:
		p.op(opBinInt1)
		p.op(byte(v))
	case v >= 0 && v <= 0xffff:
		p.op(opBinInt2)
		var b [2]byte
		binary.LittleEndian.PutUint16(b[:], uint16(v))
		p.write(b[:])
	case v >= math.MinInt32 && v <= math.MaxInt32:
		p.op(opBinInt)
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(int32(v)))
		p.write(b[:])
	default:
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		p.long1(b[:], v < 0)
	}
}

// uint writes v, which may exceed an int64 (addresses).
func (p *pickler) uint(v uint64) {
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
func (p *pickler) long1(b []byte, negative bool) {
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
	p.write(b[:n])
}

func (p *pickler) float(v float64) {
	p.op(opBinFloat)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], math.Float64bits(v))
	p.write(b[:])
}

func (p *pickler) bool(v bool) {
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
func (p *pickler) batched(n int, item func(i int), single, multi byte) {
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
func (p *pickler) list(n int, item func(i int)) {
	p.op(opEmptyList)
	p.batched(n, item, opAppend, opAppends)
}

// dict writes a dict with string keys; value(i) writes the i-th value.
func (p *pickler) dict(keys []string, value func(i int)) {
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
// by PyTorch's readers. A string longer than BINUNICODE's 32-bit length
// holds (4 GiB - 1 bytes) is refused with an error wrapping
// driver.ErrInvalidValue, and the pickle written so far ends without its
// STOP opcode, so no reader takes it for a whole one.
func (s *Snapshot) WritePickle(w io.Writer) error {
	return s.writePickle(w, maxPickleString)
}

// writePickle is WritePickle refusing strings longer than maxStr bytes.
func (s *Snapshot) writePickle(w io.Writer, maxStr uint64) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	p := &pickler{w: bw, maxStr: maxStr}
	p.op(opProto)
	p.op(pickleProtocol)
	p.fields(func() {
		p.key("segments").list(len(s.Segments), func(j int) { p.segment(&s.Segments[j]) })
		p.key("device_traces").list(len(s.DeviceTraces), func(d int) {
			tr := s.DeviceTraces[d]
			p.list(len(tr), func(j int) { p.traceEntry(&tr[j]) })
		})
		p.key("allocator_settings").settings(&s.Allocator)
		keys := slices.Sorted(maps.Keys(s.Stats))
		p.key("stats").dict(keys, func(i int) { p.int(s.Stats[keys[i]]) })
		p.key("device_info").deviceInfo(&s.Device)
	})
	p.op(opStop)
	flushErr := bw.Flush()
	if p.err != nil {
		return p.err
	}
	return flushErr
}

// fields writes a dict of a few fixed keys (more than one, fewer than a
// batch), whose items fn writes with key and a value.
func (p *pickler) fields(fn func()) {
	p.op(opEmptyDict)
	p.op(opMark)
	fn()
	p.op(opSetItems)
}

// key writes a dict key and returns p for its value.
func (p *pickler) key(k string) *pickler {
	p.str(k)
	return p
}

func (p *pickler) segment(sg *SegmentInfo) {
	p.fields(func() {
		p.key("device").int(int64(sg.Device))
		p.key("address").uint(sg.Address)
		p.key("total_size").uint(sg.TotalSize)
		p.key("allocated_size").uint(sg.AllocatedSize)
		p.key("active_size").uint(sg.ActiveSize)
		p.key("requested_size").uint(sg.RequestedSize)
		p.key("stream").uint(sg.Stream)
		p.key("segment_type").str(sg.SegmentType)
		p.key("segment_pool_id").int(0) // (0, 0): devalloc has no private pools
		p.int(0)
		p.op(opTuple2)
		p.key("is_expandable").bool(sg.IsExpandable)
		p.key("frames").frames(nil)
		p.key("blocks").list(len(sg.Blocks), func(j int) { p.block(&sg.Blocks[j]) })
	})
}

func (p *pickler) block(b *BlockInfo) {
	p.fields(func() {
		p.key("address").uint(b.Address)
		p.key("size").uint(b.Size)
		p.key("requested_size").uint(b.RequestedSize)
		p.key("state").str(b.State)
		p.key("frames").frames(b.Frames)
	})
}

func (p *pickler) traceEntry(e *TraceEntry) {
	p.fields(func() {
		p.key("action").str(e.Action)
		if e.Action == ActionOOM {
			p.key("device_free").uint(e.DeviceFree)
		} else {
			p.key("addr").uint(e.Addr)
		}
		p.key("size").uint(e.Size)
		p.key("stream").uint(e.Stream)
		p.key("time_us").int(e.TimeUS)
		p.key("frames").frames(e.Frames)
	})
}

func (p *pickler) frames(fs []Frame) {
	p.list(len(fs), func(j int) {
		p.fields(func() {
			p.key("filename").str(fs[j].Filename)
			p.key("line").int(int64(fs[j].Line))
			p.key("name").str(fs[j].Name)
		})
	})
}

func (p *pickler) settings(st *AllocatorSettings) {
	p.fields(func() {
		p.key("PYTORCH_CUDA_ALLOC_CONF").str(st.Conf)
		p.key("max_split_size").int(st.MaxSplitSize)
		p.key("garbage_collection_threshold").float(st.GarbageCollectionThreshold)
		p.key("expandable_segments").bool(st.ExpandableSegments)
		keys := make([]string, len(st.RoundupPower2Divisions))
		for j := range keys {
			keys[j] = strconv.Itoa(1 << j)
		}
		p.key("roundup_power2_divisions").dict(keys, func(j int) { p.int(st.RoundupPower2Divisions[j]) })
		p.key("config").str(st.Config)
		p.key("backend").str(st.Backend)
		p.key("schema").str(st.Schema)
	})
}

func (p *pickler) deviceInfo(d *DeviceInfo) {
	p.fields(func() {
		p.key("device").int(int64(d.Device))
		p.key("total_memory").uint(d.TotalMemory)
		p.key("free_memory").uint(d.FreeMemory)
		p.key("expandable_segments_requested").bool(d.ExpandableRequested)
		p.key("vmm_available").bool(d.VMMAvailable)
		p.key("expandable_segments_in_use").bool(d.ExpandableInUse)
		p.key("vmm_granularity").uint(d.VMMGranularity)
	})
}
