package bolt

// The structural walk of checkBoltFile: every page reachable from the root
// bucket, nested buckets included, checked iteratively with each page
// visited at most once (see check.go for the list of checks), gathering
// each entry's size and access time on the way so that opening needs no
// second pass through bbolt.

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/accelkit/accelkit/progcache"
)

// boltWalker checks the tree of one meta page.
type boltWalker struct {
	f    io.ReaderAt
	ps   int64
	hwm  uint64
	held [checkSlots]int64  // chunk number + 1 held in each slot, 0 if none
	buf  [checkSlots][]byte // the chunks
	// What the walk found, in memory that grows with the pages it read,
	// never with the page count the meta claims (a sparse file can claim
	// 2^50): the first page of every span visited (each visited once; a
	// bitset while the meta claims at most visitedBitsetPages, which
	// costs at most 32 MiB and is several times faster than the map a
	// larger claim falls back to), the spans reachable from the meta
	// (tree pages, the free list, the meta pages), and the ids the free
	// list holds. Overlaps and the pages neither reachable nor free are
	// found at the end (account).
	visited     map[uint64]struct{}
	visitedBits []uint64
	spans       []pageSpan
	free        []uint64

	rootKeys int    // keys in the root bucket
	buckets  int    // which of meta, entries, atime the root bucket holds
	schema   string // the meta bucket's schema record
	entries  []*boltEntry
	atimes   map[progcache.Key]int64
}

// visitedBitsetPages is the largest page count a meta may claim for the
// walk to mark visited pages in a bitset (32 MiB at most: 1 TiB of 4 KiB
// pages); past it a map holds only the pages actually visited.
const visitedBitsetPages = 1 << 28

// pageSpan is a page and its overflow pages: ids [start, start+n).
type pageSpan struct{ start, n uint64 }

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
	if w.hwm <= visitedBitsetPages {
		w.visitedBits = make([]uint64, (w.hwm+63)/64)
	} else {
		w.visited = map[uint64]struct{}{}
	}
	w.spans = []pageSpan{{0, 2}} // the meta pages
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
	return w.account()
}

// account checks that no page is reachable twice or both reachable and
// free (bbolt panics freeing it again, or hands it out while in use), and
// that every page below the high-water mark is one or the other, as bbolt's
// Tx.Check requires ("unreachable unfreed"): a meta counting pages the file
// never held (a sparse file grown behind bbolt) fails here.
func (w *boltWalker) account() string {
	slices.SortFunc(w.spans, func(a, b pageSpan) int { return cmp.Compare(a.start, b.start) })
	slices.Sort(w.free)
	total := uint64(len(w.free))
	for i, sp := range w.spans {
		if i > 0 && sp.start < w.spans[i-1].start+w.spans[i-1].n {
			return fmt.Sprintf("page %d reached twice", sp.start)
		}
		total += sp.n
	}
	for i := 1; i < len(w.free); i++ {
		if w.free[i] == w.free[i-1] {
			return fmt.Sprintf("free list holds page %d twice", w.free[i])
		}
	}
	// Both sorted: walk them together.
	j := 0
	for _, p := range w.free {
		for j < len(w.spans) && w.spans[j].start+w.spans[j].n <= p {
			j++
		}
		if j < len(w.spans) && w.spans[j].start <= p {
			return fmt.Sprintf("page %d both in use and free", p)
		}
	}
	if total != w.hwm {
		return fmt.Sprintf("the meta page counts %d pages, %d of them reachable or free: the rest are neither (a file grown or overwritten behind bbolt)", w.hwm, total)
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
	if w.visitedBits != nil {
		word, bit := id/64, uint64(1)<<(id%64)
		if w.visitedBits[word]&bit != 0 {
			return fmt.Sprintf("page %d reached twice", id)
		}
		w.visitedBits[word] |= bit
	} else {
		if _, ok := w.visited[id]; ok {
			return fmt.Sprintf("page %d reached twice", id)
		}
		w.visited[id] = struct{}{}
	}
	w.spans = append(w.spans, pageSpan{id, uint64(overflow) + 1})
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
	// Read the ids a chunk at a time: w.free grows only with ids read
	// from the file and found valid, whatever count claims.
	off := int64(id)*w.ps + boltPageHeader + int64(idx)*8
	buf := make([]byte, checkChunk)
	for left := count; left > 0; {
		n := min(left, uint64(len(buf)/8))
		b := buf[:n*8]
		if k, _ := w.f.ReadAt(b, off); k < len(b) {
			return fmt.Sprintf("free list page %d truncated", id)
		}
		for i := 0; i < len(b); i += 8 {
			p := nativeEndian.Uint64(b[i:])
			if p < 2 || p >= w.hwm {
				return fmt.Sprintf("free list holds page %d outside [2, %d)", p, w.hwm)
			}
			w.free = append(w.free, p)
		}
		off += int64(n * 8)
		left -= n
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

// maxBoltKey is bbolt's MaxKeySize: a longer key is damage, and is never
// read (its size comes from the file).
const maxBoltKey = 32768

// elemKey reads element i's key (at pos from the element header) from s.
func elemKey(s *span, i, pos, ksize uint64) []byte {
	if ksize == 0 || ksize > maxBoltKey {
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
		if ksize == 0 || ksize > maxBoltKey || at > uint64(s.size) || ksize+vsize > uint64(s.size)-at {
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
