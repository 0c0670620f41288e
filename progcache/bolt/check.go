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
//   - inline buckets: a leaf page inside the value, with no nested buckets;
//   - keys no longer than bbolt's MaxKeySize (a key is read, so its size
//     from the file must be bounded);
//   - every page below the high-water mark reachable or free, as bbolt's
//     Tx.Check requires: a meta counting more pages than the file ever
//     held (a sparse file grown behind bbolt) is damage.
//
// Its memory and reads are bounded by what the file really holds, not by
// the sizes its metas or page headers claim: the walk keeps the spans it
// visited and the free ids it read (each read from the file and found
// valid), and finds overlaps by sorting them at the end; the free list is
// read a chunk at a time. A file that fails is judged whose it is from its
// metas and at most ownerScanBytes of it (owner.go).
//
// It looks at page headers, element headers and keys, not at values
// (except bucket headers and the schema record). It reads the file in
// checkChunk pieces, keeping the last checkSlots of them (a small cache:
// bbolt allocates pages roughly in order), and reads a key that lies past
// its page's first page on its own: see BenchmarkBoltOpenCheck for the
// figures on a 100 MB cache.
//
// Whose file it is, when the check fails, is decided in owner.go; the
// walk is walk.go, bbolt's format format.go.

import (
	"fmt"
	"io"
	"math/bits"
	"strings"

	"github.com/accelkit/accelkit/progcache"
)

// The check's bounds.
const (
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
	// ownerScanBytes bounds what the owner check (owner.go) reads of a
	// file that fails the structural check: half of it from the start of
	// the file, half from the end, never the whole of a large or sparse
	// file.
	ownerScanBytes = 32 << 20
)

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

// checkBoltFile decides what the file of size bytes behind f is; see the
// comment at the top of this file.
func checkBoltFile(f io.ReaderAt, size int64) boltCheck {
	if size == 0 {
		return boltCheck{verdict: boltFresh, reason: "an empty file"}
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

// readAtMost reads up to n bytes at off; a short read at the end of the
// file is not an error.
func readAtMost(f io.ReaderAt, off int64, n int) []byte {
	b := make([]byte, n)
	k, _ := f.ReadAt(b, off)
	return b[:k]
}

func validPageSize(ps int64) bool {
	return ps >= minBoltPageSize && ps <= maxBoltPageSize && bits.OnesCount64(uint64(ps)) == 1
}
