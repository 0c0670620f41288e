package bolt

// bbolt's on-disk format, as far as checkBoltFile reads it: page and
// element headers, meta pages, and the byte order bbolt writes in.

import (
	"encoding/binary"
	"hash/fnv"
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
)

var nativeEndian = binary.NativeEndian

// boltMeta is what the check reads of a meta page; valid is set when its
// magic, version and checksum are bbolt's.
type boltMeta struct {
	magic, version, pageSize uint32
	root, freelist, pgid     uint64
	txid                     uint64
	valid                    bool
}

// parseBoltMeta reads the meta page that starts page.
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
