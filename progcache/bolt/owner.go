package bolt

// Whose file is it. A file is ours when bbolt's magic is in a meta page and
// the progcache schema is present: the meta bucket's schema record when the
// structure checks out; when it does not, bytes in a page whose header says
// leaf that only this package writes there, found by reading the file
// once: the schema record as bbolt lays out a leaf element (the key
// "schema" and the value "accelkit/progcache/bolt/..." next to each
// other), or an entry record stored under its key (32 bytes of key, then a
// record that starts with the record magic and repeats the same key). The
// second matters for truncation: bbolt rewrites the root page, where the
// schema record lives, on every commit, often at the end of the file. The
// search reads at most ownerScanBytes: the first half of that from the
// start of the file and the rest from its end (a cache's entry pages
// fill the file, so its start holds them; its root page is often last),
// so a large or sparse file is judged in bounded time. Only such a file is
// ever set aside; anything else is refused with progcache.ErrNotCache and
// left alone.

import (
	"bytes"
	"io"
	"os"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/internal/recordfmt"
)

// boltSchemaRecord is how our schema record sits in a leaf page: key, then
// value. Any version counts as ours.
var boltSchemaRecord = []byte("schema" + boltSchemaFamily)

// boltSchemaFamily is the part of boltSchema shared by every version.
const boltSchemaFamily = "accelkit/progcache/bolt/"

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
	// [0, head) and [tail, size), page-aligned, ownerScanBytes in all.
	head := min(size, ownerScanBytes/2)
	tail := max(head, (size-ownerScanBytes/2)/ps*ps)
	scan := func(from, to int64) bool {
		for off := from; off < to; off += int64(len(chunk)) {
			n, _ := f.ReadAt(chunk[:min(int64(len(chunk)), to-off)], off)
			for p := 0; p+boltPageHeader <= n; p += int(ps) {
				page := chunk[p:min(n, p+int(ps))]
				if nativeEndian.Uint16(page[8:]) == boltLeafFlag && (bytes.Contains(page, boltSchemaRecord) || hasEntryRecord(page)) {
					return true
				}
			}
			if n == 0 {
				break
			}
		}
		return false
	}
	return scan(0, head) || scan(tail, size)
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
