package progcache

// Entry records.
//
// Persistent backends store each object as one self-checking record:
//
//	magic     4 bytes  "AKPC"
//	version   1 byte   recordVersion
//	check     1 byte   checkCRC32C | checkBlake2bMAC | checkHMACSHA256
//	key id    8 bytes  which MAC key sealed it (zero for CRC-32C)
//	key      32 bytes  the key the entry was stored under
//	kind      u16 length + bytes
//	name      u16 length + bytes
//	symbols   u32 count, then per entry u16 name length + bytes, u32 value length + bytes
//	metadata  same shape as symbols
//	code      u64 length + bytes
//	trailer   4-byte CRC-32C or 32-byte MAC over everything before it
//
// Integers are little-endian. Map entries are written sorted by name, so a
// record is a pure function of (key, object, options). The checksum is
// verified before any field is parsed, every length is checked against the
// bytes that remain before anything is allocated, and the stored key must
// equal the key asked for: a record copied under another key's name is a
// miss, not a wrong object.
//
// Corrupt and unreadable are kept apart. A record of another record
// version, sealed with another check kind, or sealed with another MAC key
// (its key id differs) was written by a process configured differently:
// it is unreadable here (ErrUnreadable), a miss that is left in place,
// since a peer with the right configuration can still use it. Only a record
// that fails the check its own header names, or is malformed, is corrupt
// (ErrCorrupt) and may be removed. The key id is the first 8 bytes of the
// MAC of a fixed label under the key: it tells keys apart without saying
// anything about them, and forging it only turns a tampered record into an
// unreadable one, which is a miss either way.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"slices"

	"github.com/accelkit/accelkit/progcache/internal/recordfmt"
	"golang.org/x/crypto/blake2b"
)

const (
	recordMagic   = recordfmt.Magic
	recordVersion = 2

	checkCRC32C     = 1
	checkBlake2bMAC = 2
	checkHMACSHA256 = 3

	keyIDSize = recordfmt.KeyIDSize

	// RecordHeaderSize is the length of a record's fixed header (magic,
	// version, check kind, MAC key id and key), which CheckRecordHeader
	// reads.
	RecordHeaderSize = recordfmt.KeyAt + KeySize

	// MaxKindLen bounds Object.Kind: a short format name.
	MaxKindLen = 255
	// MaxStringLen bounds Object.Name and symbol and metadata names (u16
	// length fields).
	MaxStringLen = 1<<16 - 1
	// MaxMapEntries bounds the symbol and metadata maps, so a corrupt count
	// cannot make a decoder loop for long.
	MaxMapEntries = 1 << 16
	// MaxMACKeyLen is the longest MAC key (blake2b's limit).
	MaxMACKeyLen = 64
	// MinMACKeyLen is the shortest MAC key accepted: 16 bytes, the size
	// below which blake2b's authors advise against keyed use.
	MinMACKeyLen = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// RecordOptions select how records are checked. The zero value uses
// CRC-32C, which detects corruption; a MACKey also rejects records written
// without the same key.
type RecordOptions struct {
	// MACKey, when set (16 to 64 bytes), seals records with a MAC instead
	// of CRC-32C.
	MACKey []byte
	// Digest is the MAC's hash: zero or DigestSHA256 for HMAC-SHA-256 (the
	// default), or DigestBlake2b256 for keyed blake2b-256. Records sealed
	// with the other kind are unreadable here (kept, a miss).
	Digest DigestKind
}

// Validate checks the options: a MACKey, when set, must be MinMACKeyLen
// to MaxMACKeyLen bytes long, and Digest must be a known kind (not
// blake2b-256 in FIPS 140-3 mode). The caches call it when they are
// opened; EncodeRecord and DecodeRecord call it too.
func (o RecordOptions) Validate() error {
	if o.MACKey != nil && (len(o.MACKey) < MinMACKeyLen || len(o.MACKey) > MaxMACKeyLen) {
		return fmt.Errorf("progcache: RecordOptions.MACKey of %d bytes: want none, or %d to %d bytes: %w", len(o.MACKey), MinMACKeyLen, MaxMACKeyLen, ErrInvalidConfig)
	}
	_, err := o.Digest.resolve("RecordOptions.Digest", ErrInvalidConfig)
	return err
}

func (o RecordOptions) check() byte {
	switch {
	case o.MACKey == nil:
		return checkCRC32C
	case o.Digest == DigestBlake2b256:
		return checkBlake2bMAC
	}
	return checkHMACSHA256
}

func (o RecordOptions) trailerSize() int {
	if o.MACKey == nil {
		return crc32.Size
	}
	return 32
}

// newMAC returns the keyed hash of o's MAC, or nil for CRC-32C.
func (o RecordOptions) newMAC() hash.Hash {
	switch o.check() {
	case checkHMACSHA256:
		return hmac.New(sha256.New, o.MACKey)
	case checkBlake2bMAC:
		h, _ := blake2b.New256(o.MACKey) // key length validated
		return h
	}
	return nil
}

// keyIDLabel is what the key id is the MAC of.
const keyIDLabel = "accelkit/progcache/record key id"

// keyID names the MAC key a record was sealed with, computing it with mac
// (from newMAC, which it leaves reset for a record's MAC); zero for
// CRC-32C (nil mac).
func keyID(mac hash.Hash) [keyIDSize]byte {
	var id [keyIDSize]byte
	if mac != nil {
		var sum [64]byte
		mac.Write([]byte(keyIDLabel))
		copy(id[:], mac.Sum(sum[:0]))
		mac.Reset()
	}
	return id
}

// sumChunk is how much code appendCode copies before it feeds the copy
// to the checksum or MAC: the copied bytes are then still in the core's
// L1 cache when the check reads them, so a large record goes through
// memory once instead of twice (a 1 MiB CRC-32C record encodes in about
// 60% of the time of a copy followed by a checksum pass; a MAC, being
// slower than memory, gains a few per cent).
const sumChunk = 16 << 10

// recordCheck is the running check of a record: its MAC when mac is set,
// else its CRC-32C.
type recordCheck struct {
	mac hash.Hash
	crc uint32
}

func (c *recordCheck) write(p []byte) {
	if c.mac != nil {
		c.mac.Write(p)
	} else {
		c.crc = crc32.Update(c.crc, castagnoli, p)
	}
}

// appendSum appends the trailer: the MAC, or the CRC-32C little-endian.
func (c *recordCheck) appendSum(b []byte) []byte {
	if c.mac != nil {
		return c.mac.Sum(b)
	}
	return binary.LittleEndian.AppendUint32(b, c.crc)
}

// appendCode appends code to b a chunk at a time, adding each chunk to c
// once it is copied.
func (c *recordCheck) appendCode(b, code []byte) []byte {
	for len(code) > 0 {
		n := min(len(code), sumChunk)
		b = append(b, code[:n]...)
		c.write(b[len(b)-n:])
		code = code[n:]
	}
	return b
}

// RecordSize returns the encoded length of obj's record under o.
func RecordSize(obj Object, o RecordOptions) int64 {
	n := int64(RecordHeaderSize + 2 + len(obj.Kind) + 2 + len(obj.Name) + 4 + 4 + 8 + len(obj.Code) + o.trailerSize())
	for k, v := range obj.Symbols {
		n += int64(2 + len(k) + 4 + len(v))
	}
	for k, v := range obj.Metadata {
		n += int64(2 + len(k) + 4 + len(v))
	}
	return n
}

// EncodeRecord returns the record of obj stored under k, in a buffer of
// its own (AppendRecord(nil, k, obj, o)). It fails with ErrInvalidInput
// when a field is over its bound.
func EncodeRecord(k Key, obj Object, o RecordOptions) ([]byte, error) {
	b, err := AppendRecord(nil, k, obj, o)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// AppendRecord appends the record of obj stored under k to dst and
// returns the extended slice: the same bytes EncodeRecord returns, for a
// caller that reuses its buffers (a pool of them, say) instead of
// allocating a record per write. It grows dst at most once, to
// RecordSize more bytes. It fails with ErrInvalidInput when a field is
// over its bound, or with ErrInvalidConfig for bad options, and then
// returns dst unchanged.
func AppendRecord(dst []byte, k Key, obj Object, o RecordOptions) ([]byte, error) {
	if err := checkEncodable(obj, o); err != nil {
		return dst, err
	}
	start := len(dst)
	b := slices.Grow(dst, int(RecordSize(obj, o)))
	c := recordCheck{mac: o.newMAC()}
	id := keyID(c.mac)
	b = append(b, recordMagic...)
	b = append(b, recordVersion, o.check())
	b = append(b, id[:]...)
	b = append(b, k[:]...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(obj.Kind)))
	b = append(b, obj.Kind...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(obj.Name)))
	b = append(b, obj.Name...)
	b = appendMap(b, obj.Symbols)
	b = appendMap(b, obj.Metadata)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(obj.Code)))
	c.write(b[start:])
	b = c.appendCode(b, obj.Code)
	return c.appendSum(b), nil
}

// checkEncodable checks o, and obj's fields against the record's bounds.
func checkEncodable(obj Object, o RecordOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if len(obj.Kind) > MaxKindLen {
		return fmt.Errorf("progcache: object kind of %d bytes: at most %d: %w", len(obj.Kind), MaxKindLen, ErrInvalidInput)
	}
	if len(obj.Name) > MaxStringLen {
		return fmt.Errorf("progcache: object name of %d bytes: at most %d: %w", len(obj.Name), MaxStringLen, ErrInvalidInput)
	}
	for _, s := range [...]struct {
		what string
		m    map[string]string
	}{{"symbols", obj.Symbols}, {"metadata", obj.Metadata}} {
		if len(s.m) > MaxMapEntries {
			return fmt.Errorf("progcache: %d %s entries: at most %d: %w", len(s.m), s.what, MaxMapEntries, ErrInvalidInput)
		}
		for name, v := range s.m {
			if len(name) > MaxStringLen || int64(len(v)) > 1<<32-1 {
				return fmt.Errorf("progcache: %s entry %.40q is over the length bounds: %w", s.what, name, ErrInvalidInput)
			}
		}
	}
	return nil
}

func appendMap(b []byte, m map[string]string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m)))
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(k)))
		b = append(b, k...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(m[k])))
		b = append(b, m[k]...)
	}
	return b
}

// DecodeRecord checks and parses a record. It returns the stored key and
// the object. A record written under another configuration (record
// version, check kind or MAC key) fails with an error wrapping
// ErrUnreadable; any other failure wraps ErrCorrupt; both say what was
// wrong. The object's Code aliases b. DecodeRecord never panics, whatever b
// holds.
func DecodeRecord(b []byte, o RecordOptions) (Key, Object, error) {
	k, v, err := parseRecord(b, o, true)
	if err != nil {
		return k, Object{}, err
	}
	return k, v.object(false), nil
}

// ViewRecord checks a record as DecodeRecord does and returns the stored
// key and a View of the object that aliases b, without allocating for a
// CRC-32C record: for a backend's View. It never panics, whatever b holds.
func ViewRecord(b []byte, o RecordOptions) (Key, View, error) {
	return parseRecord(b, o, true)
}

// ViewVerifiedRecord is ViewRecord without the checksum or MAC, for a
// backend that verified these very bytes before: progcache/filestream
// skips the sum of a file whose identity is unchanged since it verified
// it. The structure is still checked, so it never panics whatever b
// holds, but damage inside the fields goes unnoticed: use ViewRecord for
// bytes not known to be verified.
func ViewVerifiedRecord(b []byte, o RecordOptions) (Key, View, error) {
	return parseRecord(b, o, false)
}

// parseRecord checks a record's structure, and its checksum or MAC when
// verify is set, and returns the stored key and a View whose fields alias
// b. It allocates nothing for a CRC-32C record (a MAC record computes its
// key id). Map names must be strictly increasing, as EncodeRecord writes
// them, which also rules out a repeated name without building a map.
func parseRecord(b []byte, o RecordOptions, verify bool) (Key, View, error) {
	var k Key
	if err := o.Validate(); err != nil {
		return k, View{}, err
	}
	ts := o.trailerSize()
	mac := o.newMAC() // one keyed hash for the key id and the MAC
	if len(b) < RecordHeaderSize+ts {
		if err := checkHeader(b, o, mac); err != nil && len(b) >= RecordHeaderSize {
			return k, View{}, err
		}
		return k, View{}, corruptf("record of %d bytes is shorter than the smallest record", len(b))
	}
	if err := checkHeader(b[:RecordHeaderSize], o, mac); err != nil {
		return k, View{}, err
	}
	body, trailer := b[:len(b)-ts], b[len(b)-ts:]
	if verify {
		if mac != nil {
			var sum [64]byte
			mac.Write(body)
			if !hmac.Equal(mac.Sum(sum[:0]), trailer) {
				return k, View{}, corruptf("MAC mismatch: the entry was altered after it was sealed")
			}
		} else if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(trailer) {
			return k, View{}, corruptf("checksum mismatch")
		}
	}
	copy(k[:], body[recordfmt.KeyAt:RecordHeaderSize])
	r := reader{b: body[RecordHeaderSize:]}
	var v View
	v.kind = r.next(int(r.u16()))
	v.name = r.next(int(r.u16()))
	v.syms = r.mapSection()
	v.meta = r.mapSection()
	n := r.u64()
	if r.err == nil && n != uint64(len(r.b)) {
		return k, View{}, corruptf("code length %d does not match the %d bytes left", n, len(r.b))
	}
	v.code = r.next(int(n))
	if r.err != nil {
		return k, View{}, r.err
	}
	if len(v.kind) > MaxKindLen {
		return k, View{}, corruptf("kind of %d bytes is over %d", len(v.kind), MaxKindLen)
	}
	return k, v, nil
}

// CheckRecordHeader checks the fixed header (the first RecordHeaderSize
// bytes) of a record against o: magic, version, check kind and MAC key id.
// It tells a record this configuration cannot read (ErrUnreadable) from a
// damaged or foreign one (ErrCorrupt) without reading the rest, so that a
// backend need not read a large record it cannot use.
func CheckRecordHeader(h []byte, o RecordOptions) error {
	return checkHeader(h, o, o.newMAC())
}

// checkHeader is CheckRecordHeader with the keyed hash of o's MAC (nil
// for CRC-32C), which it leaves reset for the record's MAC.
func checkHeader(h []byte, o RecordOptions, mac hash.Hash) error {
	if len(h) < RecordHeaderSize {
		return corruptf("record of %d bytes is shorter than its header", len(h))
	}
	if string(h[:4]) != recordMagic {
		return corruptf("bad magic %q: not a progcache entry", h[:4])
	}
	if h[4] != recordVersion {
		return unreadablef("record version %d: this build reads version %d", h[4], recordVersion)
	}
	if h[5] < checkCRC32C || h[5] > checkHMACSHA256 {
		return corruptf("unknown check kind %d", h[5])
	}
	if h[5] != o.check() {
		return unreadablef("record sealed with %s, this cache is configured for %s", checkName(h[5]), checkName(o.check()))
	}
	id := keyID(mac)
	if string(h[6:6+keyIDSize]) != string(id[:]) {
		if o.MACKey == nil {
			return corruptf("CRC-32C record carries a MAC key id")
		}
		return unreadablef("record sealed with another MAC key (key id %x, this cache's is %x)", h[6:6+keyIDSize], id)
	}
	return nil
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("progcache: "+format+": %w", append(args, ErrCorrupt)...)
}

func unreadablef(format string, args ...any) error {
	return fmt.Errorf("progcache: "+format+": %w", append(args, ErrUnreadable)...)
}

func checkName(c byte) string {
	switch c {
	case checkCRC32C:
		return "CRC-32C (no MAC key)"
	case checkBlake2bMAC:
		return "a blake2b MAC"
	case checkHMACSHA256:
		return "an HMAC-SHA-256 MAC"
	}
	return fmt.Sprintf("check kind %d", c)
}

// reader parses little-endian fields, remembering the first error; every
// length is checked against the bytes left before it is used.
type reader struct {
	b   []byte
	err error
}

func (r *reader) next(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = corruptf("field of %d bytes runs past the end (%d left)", n, len(r.b))
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) u16() uint16 {
	if p := r.next(2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if p := r.next(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if p := r.next(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

// mapSection checks an encoded map (a u32 count, then per entry a u16 name
// length, the name, a u32 value length, the value; names strictly
// increasing) and returns it whole, count included, without decoding it.
func (r *reader) mapSection() []byte {
	start := r.b
	n := r.u32()
	if r.err != nil {
		return nil
	}
	// Each entry takes at least 6 bytes, which bounds n by what is left.
	if n > MaxMapEntries || uint64(n)*6 > uint64(len(r.b)) {
		r.err = corruptf("map of %d entries cannot fit in %d bytes", n, len(r.b))
		return nil
	}
	var prev []byte
	for i := range n {
		name := r.next(int(r.u16()))
		r.next(int(r.u32()))
		if r.err != nil {
			return nil
		}
		if i > 0 && string(name) <= string(prev) {
			if string(name) == string(prev) {
				r.err = corruptf("map name %.40q repeated", name)
			} else {
				r.err = corruptf("map name %.40q out of order: names are written sorted", name)
			}
			return nil
		}
		prev = name
	}
	return start[: len(start)-len(r.b) : len(start)-len(r.b)]
}
