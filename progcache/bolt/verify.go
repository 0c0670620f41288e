package bolt

// Checking a bolt file before bbolt touches it.
//
// bbolt trusts its file: a damaged page makes it panic (its assertions,
// slices out of range), fault (a truncated file is still mapped to its old
// length, and reading past the end is SIGBUS, a fatal error unless the
// goroutine asked for faults to panic), or recurse for ever (a branch page
// that points back up the tree sends Cursor.search round the cycle until
// the stack overflows, a fatal error that no recover sees). bbolt's own
// Tx.Check cannot be the guard: it reads through the same mapping on a
// goroutine of its own (where SetPanicOnFault cannot be set), it
// dereferences a page before checking its id against the high-water mark
// (a child id far past it: fatal fault), its forEachPage and key-order
// walks recurse without a visited set (a branch page pointing at itself:
// "multiple references" reported again and again, still running after two
// minutes), it reports nothing for a leaf key running past its page, and on
// a file whose free list is not synced it starts a second goroutine
// without a recover.
//
// checkBoltFile therefore reads the file itself, with ReadAt on the
// descriptor bbolt is about to use and under bbolt's lock, and checks every
// structural fact bbolt's reads and writes rely on, iteratively and with
// each page visited at most once:
//
//   - meta pages: chosen as bbolt chooses them (page 0's page size, the
//     valid meta of the higher transaction id); the page size a power of two
//     in [minBoltPageSize, maxBoltPageSize]; the root bucket and the free
//     list inside the high-water mark; the file at least high-water mark x
//     page size long (truncation);
//   - the free list page: its type and id, its ids inside [2, high-water
//     mark) and distinct;
//   - every page reachable from the root bucket, nested buckets included:
//     id field equal to the page id, type branch or leaf, overflow inside the
//     high-water mark, element headers, keys and values inside the page's
//     span, keys non-empty and strictly increasing and inside the range
//     their parent branch gives them, branch pages not empty, tree depth at
//     most maxBoltDepth, no page reachable twice or both reachable and free
//     (bbolt panics freeing it again, or hands it out while in use);
//   - inline buckets: a leaf page inside the value, with no nested buckets.
//
// It looks at page headers, element headers and keys, not at values
// (except bucket headers and the schema record). It reads the file in
// checkChunk pieces, keeping the last checkSlots of them (a small cache:
// bbolt allocates pages roughly in order), and reads a key that lies past
// its page's first page on its own: see BenchmarkBoltOpenCheck for the
// figures on a 100 MB cache.
//
// Whose file is it: a file is ours when bbolt's magic is in a meta page and
// the progcache schema is present: the meta bucket's schema record when the
// structure checks out; when it does not, bytes in a page whose header says
// leaf that only this package writes there, found by reading the file
// once: the schema record as bbolt lays out a leaf element (the key
// "schema" and the value "accelkit/progcache/bolt/..." next to each
// other), or an entry record stored under its key (32 bytes of key, then a
// record that starts with the record magic and repeats the same key). The
// second matters for truncation: bbolt rewrites the root page, where the
// schema record lives, on every commit, often at the end of the file. Only
// such a file is ever set aside; anything else is refused with ErrNotCache
// and left alone.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math/bits"
	"os"
	"strings"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/internal/recordfmt"
)

// bbolt's on-disk format (go.etcd.io/bbolt/internal/common), in the byte
// order of the machine that wrote it, as bbolt reads it.
const (
	boltMagic         = 0xED0CDAED
	boltVersion       = 2
	boltPageHeader    = 16 // id u64, flags u16, count u16, overflow u32
	boltElemSize      = 16 // branch: pos u32, ksize u32, pgid u64; leaf: flags u32, pos u32, ksize u32, vsize u32
	boltBucketHeader  = 16 // root pgid u64, sequence u64
	boltMetaSize      = 64 // magic, version, page size, flags u32; root, sequence, freelist, pgid, txid, checksum u64
	boltBranchFlag    = 0x01
	boltLeafFlag      = 0x02
	boltFreelistFlag  = 0x10
	boltBucketLeaf    = 0x01
	boltNoFreelist    = ^uint64(0)
	boltFreelistLarge = 0xFFFF // a free list count this large is stored in the first id slot

	// minBoltPageSize and maxBoltPageSize bound the page sizes accepted:
	// bbolt uses the OS page size (4 KiB, 16 KiB on Apple silicon, 64 KiB on
	// some arm64 kernels); 1 KiB is the smallest it probes for.
	minBoltPageSize = 1 << 10
	maxBoltPageSize = 1 << 16
	// maxBoltDepth bounds a bucket's B+tree height and bucket nesting:
	// bbolt's pages hold at least two keys, so a real tree of 2^32 pages is
	// 32 levels deep; bbolt's cursor recursion stays shallow.
	maxBoltDepth = 48
	// maxSchemaValue bounds the schema record read.
	maxSchemaValue = 256
	// checkChunk is how much of the file the check reads at a time: a
	// syscall per chunk, not per page. No page straddles two, since page
	// sizes are powers of two no larger than it.
	checkChunk = maxBoltPageSize
	// checkSlots is how many chunks the check keeps (4 MiB at most).
	checkSlots = 64
)

// boltSchemaRecord is how our schema record sits in a leaf page: key, then
// value. Any version counts as ours.
var boltSchemaRecord = []byte("schema" + boltSchemaFamily)

// boltSchemaFamily is the part of boltSchema shared by every version.
const boltSchemaFamily = "accelkit/progcache/bolt/"

var nativeEndian = binary.NativeEndian

// boltVerdict is what checkBoltFile makes of a file.
type boltVerdict int

const (
	// boltUsable: structure sound, this schema.
	boltUsable boltVerdict = iota
	// boltFresh: 0 bytes, or a sound bbolt database with no buckets (what
	// a crash between bbolt's creation of a file and our first commit
	// leaves): initialised in place.
	boltFresh
	// boltDamaged: ours, unusable (damaged, or another schema version):
	// set aside and rebuilt.
	boltDamaged
	// boltForeign: not provably ours: refused with ErrNotCache.
	boltForeign
)

type boltCheck struct {
	verdict boltVerdict
	reason  string       // what was found, for the error or the log
	entries []*boltEntry // a usable file's entries, with sizes and access times
}

type boltMeta struct {
	magic, version, pageSize uint32
	root, freelist, pgid     uint64
	txid                     uint64
	valid                    bool
}

func parseBoltMeta(page []byte) boltMeta {
	if len(page) < boltPageHeader+boltMetaSize {
		return boltMeta{}
	}
	m := page[boltPageHeader:]
	bm := boltMeta{
		magic:    nativeEndian.Uint32(m[0:]),
		version:  nativeEndian.Uint32(m[4:]),
		pageSize: nativeEndian.Uint32(m[8:]),
		root:     nativeEndian.Uint64(m[16:]),
		freelist: nativeEndian.Uint64(m[32:]),
		pgid:     nativeEndian.Uint64(m[40:]),
		txid:     nativeEndian.Uint64(m[48:]),
	}
	h := fnv.New64a()
	h.Write(m[:56])
	bm.valid = bm.magic == boltMagic && bm.version == boltVersion && nativeEndian.Uint64(m[56:]) == h.Sum64()
	return bm
}

// readAtMost reads up to n bytes at off; a short read at the end of the
// file is not an error.
func readAtMost(f io.ReaderAt, off int64, n int) []byte {
	b := make([]byte, n)
	k, _ := f.ReadAt(b, off)
	return b[:k]
}

// checkBoltFile decides what the file of size bytes behind f is; see the
// comment at the top of this file.
func checkBoltFile(f io.ReaderAt, size int64) boltCheck {
	if size == 0 {
		return boltCheck{verdict: boltFresh, reason: "empty file"}
	}
	head := readAtMost(f, 0, 4096)
	m0 := parseBoltMeta(head)
	magic := m0.magic == boltMagic
	// bbolt takes the page size from page 0's meta, else probes for page
	// 1's at 1 KiB << i (getPageSizeFromSecondMeta).
	ps := int64(0)
	if m0.valid {
		ps = int64(m0.pageSize)
	}
	guess := int64(m0.pageSize)
	for i := 0; i <= 14 && ps == 0; i++ {
		pos := int64(1024) << i
		if pos >= size-1024 {
			break
		}
		m := parseBoltMeta(readAtMost(f, pos, boltPageHeader+boltMetaSize))
		if m.magic == boltMagic {
			magic = true
			if !validPageSize(guess) {
				guess = int64(m.pageSize)
			}
		}
		if m.valid {
			ps = int64(m.pageSize)
		}
	}
	if !magic {
		n := min(len(head), 16)
		return boltCheck{verdict: boltForeign, reason: fmt.Sprintf("is not a bbolt file (first bytes %+q)", head[:n])}
	}
	if ps == 0 {
		return damagedOrForeign(f, size, guess, "no valid meta page")
	}
	if !validPageSize(ps) {
		return damagedOrForeign(f, size, 4096, fmt.Sprintf("page size %d outside [%d, %d]", ps, minBoltPageSize, maxBoltPageSize))
	}
	if size < 2*ps {
		return damagedOrForeign(f, size, ps, fmt.Sprintf("truncated: %d bytes, shorter than the two meta pages", size))
	}
	m0 = parseBoltMeta(readAtMost(f, 0, boltPageHeader+boltMetaSize))
	m1 := parseBoltMeta(readAtMost(f, ps, boltPageHeader+boltMetaSize))
	// DB.meta: the higher transaction id if valid, else the other.
	a, b := m0, m1
	if m1.txid > m0.txid {
		a, b = m1, m0
	}
	m := a
	if !a.valid {
		m = b
	}
	if !m.valid {
		return damagedOrForeign(f, size, ps, "no valid meta page")
	}
	w := boltWalker{f: f, ps: ps, hwm: m.pgid, atimes: map[progcache.Key]int64{}}
	if err := w.check(m, size); err != "" {
		return damagedOrForeign(f, size, ps, err)
	}
	switch {
	case w.rootKeys == 0:
		return boltCheck{verdict: boltFresh, reason: "a bbolt database with no buckets"}
	case w.schema == boltSchema && w.buckets == 3:
		for _, e := range w.entries {
			e.atime = w.atimes[e.key]
		}
		return boltCheck{verdict: boltUsable, entries: w.entries}
	case w.schema == boltSchema:
		return boltCheck{verdict: boltDamaged, reason: "the progcache schema record without the entries and atime buckets"}
	case strings.HasPrefix(w.schema, boltSchemaFamily):
		return boltCheck{verdict: boltDamaged, reason: fmt.Sprintf("schema %q, this version reads %q", w.schema, boltSchema)}
	}
	return boltCheck{verdict: boltForeign, reason: "is a bbolt database of another application (no progcache schema)"}
}

func validPageSize(ps int64) bool {
	return ps >= minBoltPageSize && ps <= maxBoltPageSize && bits.OnesCount64(uint64(ps)) == 1
}

// damagedOrForeign decides whose a damaged bbolt file is: ours when a
// leaf page holds our schema record (see the top of this file).
func damagedOrForeign(f io.ReaderAt, size, ps int64, why string) boltCheck {
	if !validPageSize(ps) {
		ps = int64(os.Getpagesize())
	}
	if hasOurRecords(f, size, ps) {
		return boltCheck{verdict: boltDamaged, reason: why}
	}
	return boltCheck{verdict: boltForeign, reason: "is a bbolt database without the progcache schema, damaged (" + why + ")"}
}

// hasOurRecords reads the file once, looking in each page whose header
// says leaf for our schema record or for one of our entry records as bbolt
// stores it: the 32-byte key, then the record, whose header starts with
// the record magic and repeats that key.
func hasOurRecords(f io.ReaderAt, size, ps int64) bool {
	chunk := make([]byte, max(ps, 1<<20/ps*ps))
	for off := int64(0); off < size; off += int64(len(chunk)) {
		n, _ := f.ReadAt(chunk, off)
		for p := 0; p+boltPageHeader <= n; p += int(ps) {
			page := chunk[p:min(n, p+int(ps))]
			if nativeEndian.Uint16(page[8:]) == boltLeafFlag && (bytes.Contains(page, boltSchemaRecord) || hasEntryRecord(page)) {
				return true
			}
		}
		if n < len(chunk) {
			break
		}
	}
	return false
}

// hasEntryRecord reports whether page holds key || record(key) for some
// key: the record magic preceded by KeySize bytes that the record header
// repeats.
func hasEntryRecord(page []byte) bool {
	const keyAt = recordfmt.KeyAt // where the header holds the key
	const headerSize = keyAt + progcache.KeySize
	for i := progcache.KeySize; i+headerSize <= len(page); i++ {
		j := bytes.Index(page[i:len(page)-headerSize+1], []byte(recordfmt.Magic))
		if j < 0 {
			return false
		}
		i += j
		if bytes.Equal(page[i-progcache.KeySize:i], page[i+keyAt:i+keyAt+progcache.KeySize]) {
			return true
		}
	}
	return false
}

// boltWalker checks the tree of one meta page.
type boltWalker struct {
	f    io.ReaderAt
	ps   int64
	hwm  uint64
	held [checkSlots]int64  // chunk number + 1 held in each slot, 0 if none
	buf  [checkSlots][]byte // the chunks
	used bitset             // pages reachable from the meta: tree pages and the free list
	free bitset             // pages the free list holds

	rootKeys int    // keys in the root bucket
	buckets  int    // which of meta, entries, atime the root bucket holds
	schema   string // the meta bucket's schema record
	entries  []*boltEntry
	atimes   map[progcache.Key]int64
}

// boltItem is a page still to check: its id, its depth in its bucket's
// tree, the bucket's nesting depth, the key range its parent gives it, and
// which bucket it belongs to.
type boltItem struct {
	pgid          uint64
	depth, nested int
	lo, hi        []byte
	bucket        boltBucketRole
}

type boltBucketRole int

const (
	roleOther boltBucketRole = iota
	roleRoot
	roleMeta
	roleEntries
	roleATime
)

// record notes what the check gathers from a value (v holds it when the
// role needs its bytes): the schema record, and each entry's size and
// access time, so that opening needs no second pass through bbolt.
func (w *boltWalker) record(role boltBucketRole, k []byte, vsize uint64, v []byte) {
	switch {
	case role == roleMeta && string(k) == string(keySchema) && v != nil:
		w.schema = string(v)
	case role == roleEntries && len(k) == progcache.KeySize:
		w.entries = append(w.entries, &boltEntry{key: progcache.Key(k), size: int64(vsize)})
	case role == roleATime && len(k) == progcache.KeySize && len(v) == 8:
		w.atimes[progcache.Key(k)] = int64(binary.LittleEndian.Uint64(v))
	}
}

// wanted reports whether record needs the bytes of a value of vsize bytes.
func wanted(role boltBucketRole, vsize uint64) bool {
	return role == roleMeta && vsize <= maxSchemaValue || role == roleATime && vsize == 8
}

// check runs the checks on meta m; it returns what is wrong, or "".
func (w *boltWalker) check(m boltMeta, size int64) string {
	if int64(m.pageSize) != w.ps {
		return fmt.Sprintf("meta page size %d, file page size %d", m.pageSize, w.ps)
	}
	if w.hwm < 4 || w.hwm > uint64(size/w.ps) {
		return fmt.Sprintf("truncated or damaged: the meta page counts %d pages of %d bytes, the file holds %d bytes", w.hwm, w.ps, size)
	}
	if m.root < 2 || m.root >= w.hwm {
		return fmt.Sprintf("root bucket page %d outside [2, %d)", m.root, w.hwm)
	}
	if m.freelist == boltNoFreelist {
		// progcache never writes an unsynced free list; bbolt rebuilds one
		// on a goroutine without a recover.
		return "free list not synced"
	}
	if m.freelist < 2 || m.freelist >= w.hwm {
		return fmt.Sprintf("free list page %d outside [2, %d)", m.freelist, w.hwm)
	}
	w.used, w.free = newBitset(w.hwm), newBitset(w.hwm)
	w.used.set(0)
	w.used.set(1)
	if err := w.checkFreelist(m.freelist); err != "" {
		return err
	}
	stack := []boltItem{{pgid: m.root, bucket: roleRoot}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		var err string
		if stack, err = w.checkPage(it, stack); err != "" {
			return err
		}
	}
	return ""
}

// page returns the first page of page id, valid until the next call, or
// nil if the file ends before it does.
func (w *boltWalker) page(id uint64) []byte {
	off := int64(id) * w.ps
	n := off / checkChunk
	slot := n % checkSlots
	if w.held[slot] != n+1 {
		if w.buf[slot] == nil {
			w.buf[slot] = make([]byte, checkChunk)
		}
		k, _ := w.f.ReadAt(w.buf[slot][:checkChunk], n*checkChunk)
		w.buf[slot] = w.buf[slot][:k]
		w.held[slot] = n + 1
	}
	b, o := w.buf[slot], off-n*checkChunk
	if o+w.ps > int64(len(b)) {
		return nil
	}
	return b[o : o+w.ps]
}

// claim marks the span of page id (overflow extra pages) as used.
func (w *boltWalker) claim(id uint64, overflow uint32) string {
	if id < 2 || id >= w.hwm || uint64(overflow) >= w.hwm-id {
		return fmt.Sprintf("page %d (+%d overflow) outside [2, %d)", id, overflow, w.hwm)
	}
	for p := id; p <= id+uint64(overflow); p++ {
		if w.used.has(p) {
			return fmt.Sprintf("page %d reached twice", p)
		}
		if w.free.has(p) {
			return fmt.Sprintf("page %d both in use and free", p)
		}
		w.used.set(p)
	}
	return ""
}

func (w *boltWalker) checkFreelist(id uint64) string {
	first := w.page(id)
	if first == nil {
		return fmt.Sprintf("free list page %d truncated", id)
	}
	if got := nativeEndian.Uint64(first); got != id {
		return fmt.Sprintf("free list page %d says it is page %d", id, got)
	}
	if fl := nativeEndian.Uint16(first[8:]); fl != boltFreelistFlag {
		return fmt.Sprintf("free list page %d has type %#x", id, fl)
	}
	overflow := nativeEndian.Uint32(first[12:])
	if err := w.claim(id, overflow); err != "" {
		return "free list: " + err
	}
	span := (int64(overflow) + 1) * w.ps
	idx, count := uint64(0), uint64(nativeEndian.Uint16(first[10:]))
	if count == boltFreelistLarge {
		idx, count = 1, nativeEndian.Uint64(first[boltPageHeader:])
	}
	if count > w.hwm || boltPageHeader+(idx+count)*8 > uint64(span) {
		return fmt.Sprintf("free list page %d: %d ids do not fit its %d bytes", id, count, span)
	}
	if count == 0 {
		return ""
	}
	ids := first
	if need := int64(boltPageHeader + (idx+count)*8); need > int64(len(first)) {
		ids = readAtMost(w.f, int64(id)*w.ps, int(need))
		if int64(len(ids)) < need {
			return fmt.Sprintf("free list page %d truncated", id)
		}
	}
	ids = ids[boltPageHeader+idx*8 : boltPageHeader+(idx+count)*8]
	for i := 0; i < len(ids); i += 8 {
		p := nativeEndian.Uint64(ids[i:])
		if p < 2 || p >= w.hwm {
			return fmt.Sprintf("free list holds page %d outside [2, %d)", p, w.hwm)
		}
		if w.free.has(p) {
			return fmt.Sprintf("free list holds page %d twice", p)
		}
		if w.used.has(p) {
			return fmt.Sprintf("free list holds its own page %d", p)
		}
		w.free.set(p)
	}
	return ""
}

// span is a page and its overflow pages; first holds the first page, the
// rest is read on demand into new memory (first stays valid).
type span struct {
	w     *boltWalker
	off   int64 // file offset of the page
	size  int64 // (overflow + 1) x page size
	first []byte
}

// bytes returns n bytes at offset off of the span, or nil if they are not
// all inside it.
func (s *span) bytes(off, n uint64) []byte {
	if off > uint64(s.size) || n > uint64(s.size)-off {
		return nil
	}
	if off+n <= uint64(len(s.first)) {
		return s.first[off : off+n]
	}
	b := readAtMost(s.w.f, s.off+int64(off), int(n))
	if uint64(len(b)) < n {
		return nil
	}
	return b
}

// checkPage checks one tree page and pushes its children on stack.
func (w *boltWalker) checkPage(it boltItem, stack []boltItem) ([]boltItem, string) {
	if it.depth > maxBoltDepth || it.nested > maxBoltDepth {
		return stack, fmt.Sprintf("page %d: tree deeper than %d", it.pgid, maxBoltDepth)
	}
	if it.pgid < 2 || it.pgid >= w.hwm {
		return stack, fmt.Sprintf("page id %d outside [2, %d)", it.pgid, w.hwm)
	}
	first := w.page(it.pgid)
	if first == nil {
		return stack, fmt.Sprintf("page %d truncated", it.pgid)
	}
	if got := nativeEndian.Uint64(first); got != it.pgid {
		return stack, fmt.Sprintf("page %d says it is page %d", it.pgid, got)
	}
	flags := nativeEndian.Uint16(first[8:])
	count := uint64(nativeEndian.Uint16(first[10:]))
	overflow := nativeEndian.Uint32(first[12:])
	if err := w.claim(it.pgid, overflow); err != "" {
		return stack, err
	}
	s := &span{w: w, off: int64(it.pgid) * w.ps, size: (int64(overflow) + 1) * w.ps, first: first}
	switch flags {
	case boltBranchFlag:
		if count == 0 {
			return stack, fmt.Sprintf("branch page %d is empty", it.pgid)
		}
		return w.checkBranch(it, s, count, stack)
	case boltLeafFlag:
		return w.checkLeaf(it, s, count, stack)
	}
	return stack, fmt.Sprintf("page %d has type %#x, want branch or leaf", it.pgid, flags)
}

// key reads element i's key (at pos from the element header) from s.
func elemKey(s *span, i, pos, ksize uint64) []byte {
	if ksize == 0 {
		return nil
	}
	return s.bytes(boltPageHeader+i*boltElemSize+pos, ksize)
}

// inOrder checks key k (element i) against the previous key and the
// page's range.
func inOrder(k, prev, lo, hi []byte, i uint64) bool {
	if i > 0 && bytes.Compare(prev, k) >= 0 {
		return false
	}
	if lo != nil && bytes.Compare(k, lo) < 0 {
		return false
	}
	return hi == nil || bytes.Compare(k, hi) < 0
}

func (w *boltWalker) checkBranch(it boltItem, s *span, count uint64, stack []boltItem) ([]boltItem, string) {
	hdrs := s.bytes(boltPageHeader, count*boltElemSize)
	if hdrs == nil {
		return stack, fmt.Sprintf("branch page %d: %d elements do not fit", it.pgid, count)
	}
	keys := make([][]byte, count)
	for i := range count {
		h := hdrs[i*boltElemSize:]
		k := elemKey(s, i, uint64(nativeEndian.Uint32(h[0:])), uint64(nativeEndian.Uint32(h[4:])))
		if k == nil {
			return stack, fmt.Sprintf("branch page %d: key %d empty or outside the page", it.pgid, i)
		}
		var prev []byte
		if i > 0 {
			prev = keys[i-1]
		}
		if !inOrder(k, prev, it.lo, it.hi, i) {
			return stack, fmt.Sprintf("branch page %d: key %d out of order", it.pgid, i)
		}
		keys[i] = bytes.Clone(k)
	}
	for i := range count {
		hi := it.hi
		if i+1 < count {
			hi = keys[i+1]
		}
		child := nativeEndian.Uint64(hdrs[i*boltElemSize+8:])
		stack = append(stack, boltItem{pgid: child, depth: it.depth + 1, nested: it.nested, lo: keys[i], hi: hi, bucket: it.bucket})
	}
	return stack, ""
}

func (w *boltWalker) checkLeaf(it boltItem, s *span, count uint64, stack []boltItem) ([]boltItem, string) {
	hdrs := s.bytes(boltPageHeader, count*boltElemSize)
	if hdrs == nil {
		return stack, fmt.Sprintf("leaf page %d: %d elements do not fit", it.pgid, count)
	}
	var prev []byte
	for i := range count {
		h := hdrs[i*boltElemSize:]
		flags := nativeEndian.Uint32(h[0:])
		pos, ksize, vsize := uint64(nativeEndian.Uint32(h[4:])), uint64(nativeEndian.Uint32(h[8:])), uint64(nativeEndian.Uint32(h[12:]))
		at := boltPageHeader + i*boltElemSize + pos
		if ksize == 0 || at > uint64(s.size) || ksize+vsize > uint64(s.size)-at {
			return stack, fmt.Sprintf("leaf page %d: element %d empty or outside the page", it.pgid, i)
		}
		k := elemKey(s, i, pos, ksize)
		if k == nil || !inOrder(k, prev, it.lo, it.hi, i) {
			return stack, fmt.Sprintf("leaf page %d: key %d out of order or unreadable", it.pgid, i)
		}
		prev = k // lives as long as the page: no read in this loop reuses first
		if it.bucket == roleRoot {
			w.rootKeys++
		}
		switch flags {
		case 0:
			if it.bucket == roleRoot {
				return stack, fmt.Sprintf("leaf page %d: a value in the root bucket", it.pgid)
			}
			var v []byte
			if wanted(it.bucket, vsize) {
				v = s.bytes(at+ksize, vsize)
			}
			w.record(it.bucket, k, vsize, v)
		case boltBucketLeaf:
			var err string
			if stack, err = w.checkBucket(it, s, k, at+ksize, vsize, stack); err != "" {
				return stack, err
			}
		default:
			return stack, fmt.Sprintf("leaf page %d: element %d has flags %#x", it.pgid, i, flags)
		}
	}
	return stack, ""
}

// checkBucket checks the bucket value at offset off (vsize bytes) of s,
// named name, in bucket it.bucket.
func (w *boltWalker) checkBucket(it boltItem, s *span, name []byte, off, vsize uint64, stack []boltItem) ([]boltItem, string) {
	if vsize < boltBucketHeader {
		return stack, fmt.Sprintf("page %d: bucket %q header short", it.pgid, name)
	}
	role := roleOther
	if it.bucket == roleRoot {
		switch string(name) {
		case string(bucketMeta):
			role = roleMeta
			w.buckets++
		case string(bucketEntries):
			role = roleEntries
			w.buckets++
		case string(bucketATime):
			role = roleATime
			w.buckets++
		}
	}
	hdr := s.bytes(off, boltBucketHeader)
	if hdr == nil {
		return stack, fmt.Sprintf("page %d: bucket %q header unreadable", it.pgid, name)
	}
	if root := nativeEndian.Uint64(hdr); root != 0 {
		return append(stack, boltItem{pgid: root, nested: it.nested + 1, bucket: role}), ""
	}
	// An inline bucket: a leaf page inside the value. bbolt inlines a
	// bucket only while it is under a quarter page.
	if vsize < boltBucketHeader+boltPageHeader || vsize > uint64(w.ps) {
		return stack, fmt.Sprintf("page %d: inline bucket %q of %d bytes", it.pgid, name, vsize)
	}
	v := s.bytes(off, vsize)
	if v == nil {
		return stack, fmt.Sprintf("page %d: inline bucket %q unreadable", it.pgid, name)
	}
	p := v[boltBucketHeader:]
	if fl := nativeEndian.Uint16(p[8:]); fl != boltLeafFlag {
		return stack, fmt.Sprintf("page %d: inline bucket %q has page type %#x", it.pgid, name, fl)
	}
	count := uint64(nativeEndian.Uint16(p[10:]))
	if boltPageHeader+count*boltElemSize > uint64(len(p)) {
		return stack, fmt.Sprintf("page %d: inline bucket %q: %d elements do not fit", it.pgid, name, count)
	}
	var prev []byte
	for i := range count {
		h := p[boltPageHeader+i*boltElemSize:]
		flags := nativeEndian.Uint32(h[0:])
		pos, ksize, vs := uint64(nativeEndian.Uint32(h[4:])), uint64(nativeEndian.Uint32(h[8:])), uint64(nativeEndian.Uint32(h[12:]))
		at := boltPageHeader + i*boltElemSize + pos
		if flags != 0 || ksize == 0 || at > uint64(len(p)) || ksize+vs > uint64(len(p))-at {
			return stack, fmt.Sprintf("page %d: inline bucket %q: element %d damaged", it.pgid, name, i)
		}
		k := p[at : at+ksize]
		if !inOrder(k, prev, nil, nil, i) {
			return stack, fmt.Sprintf("page %d: inline bucket %q: key %d out of order", it.pgid, name, i)
		}
		prev = k
		var v []byte
		if wanted(role, vs) {
			v = p[at+ksize : at+ksize+vs]
		}
		w.record(role, k, vs, v)
	}
	return stack, ""
}

// bitset is a set of page ids below a bound.
type bitset []uint64

func newBitset(n uint64) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) has(i uint64) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) set(i uint64)      { b[i/64] |= 1 << (i % 64) }
