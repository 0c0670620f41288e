package progcache

// Entry records.
//
// Persistent backends store each object as one self-checking record:
//
//	magic     4 bytes  "AKPC"
//	version   1 byte   2, or 3 for AES-GMAC records
//	check     1 byte   version 2: checkCRC32C | checkBlake2bMAC | checkHMACSHA256
//	                   version 3: checkGMAC
//	key id    8 bytes  which MAC key sealed it (zero for CRC-32C)
//	key      32 bytes  the key the entry was stored under
//	nonce    24 bytes  AES-GMAC records only: random (gmac.go)
//	kind      u16 length + bytes
//	name      u16 length + bytes
//	symbols   u32 count, then per entry u16 name length + bytes, u32 value length + bytes
//	metadata  same shape as symbols
//	code      u64 length + bytes
//	trailer   4-byte CRC-32C, 16-byte GMAC tag or 32-byte MAC over
//	          everything before it
//
// Integers are little-endian. Map entries are written sorted by name, so a
// record is a pure function of (key, object, options), and of its nonce
// for AES-GMAC. AES-GMAC records have a version of their own, 3, so that
// a build that reads only version 2 takes them for unreadable (kept, a
// miss), not for corrupt: it checks the version before the check kind,
// and an unknown check kind in a version it reads is damage. The checksum is
// verified before any field is parsed, every length is checked against the
// bytes that remain before anything is allocated, and the stored key must
// equal the key asked for: a record copied under another key's name is a
// miss, not a wrong object.
//
// A cache with a MAC key reads records sealed by any MAC it accepts under
// that key, whichever it seals with: AES-GMAC and HMAC-SHA-256 (so a
// cache that holds HMAC-SHA-256 records, the default before AES-GMAC,
// keeps reading them), and keyed blake2b-256 when Digest asks for it.
// Each record is verified with the MAC its header names.
//
// Corrupt and unreadable are kept apart. A record of another record
// version, sealed with a check kind this cache does not read, or sealed
// with another MAC key (its key id differs) was written by a process
// configured differently:
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
	"strconv"

	"github.com/accelkit/accelkit/progcache/internal/recordfmt"
	"golang.org/x/crypto/blake2b"
)

const (
	recordMagic   = recordfmt.Magic
	recordVersion = 2
	// gmacRecordVersion is the version of AES-GMAC records, which a build
	// reading only version 2 must not take for damage.
	gmacRecordVersion = 3

	checkCRC32C     = 1
	checkBlake2bMAC = 2
	checkHMACSHA256 = 3
	checkGMAC       = 4

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

// MACKind says which MAC seals new records under a MACKey. The zero
// value means the default: MACGMAC, unless Digest is set.
type MACKind uint8

const (
	// MACGMAC is AES-256-GMAC with a random 192-bit nonce per record
	// (XAES-256-GCM's key derivation: see the package README), about
	// four times as fast as HMAC-SHA-256 on CPUs with AES and carry-less
	// multiply instructions. FIPS 140-3 approved. The default.
	MACGMAC MACKind = 1
	// MACHash is the keyed hash of Digest: HMAC-SHA-256 (Digest zero or
	// DigestSHA256), or keyed blake2b-256 (DigestBlake2b256).
	MACHash MACKind = 2
)

func (m MACKind) String() string {
	switch m {
	case 0:
		return "default"
	case MACGMAC:
		return "aes-gmac"
	case MACHash:
		return "keyed hash"
	}
	return "mac(" + strconv.Itoa(int(m)) + ")"
}

// RecordOptions select how records are checked. The zero value uses
// CRC-32C, which detects corruption; a MACKey also rejects records written
// without the same key.
type RecordOptions struct {
	// MACKey, when set (16 to 64 bytes), seals records with a MAC instead
	// of CRC-32C.
	MACKey []byte
	// MAC selects the MAC that seals new records: zero for the default,
	// AES-GMAC (MACGMAC), or, when Digest is set, the keyed hash Digest
	// names (MACHash), as before AES-GMAC existed. Whichever it is, a
	// keyed cache also reads AES-GMAC and HMAC-SHA-256 records sealed
	// under its key, and keyed blake2b-256 ones when Digest is
	// DigestBlake2b256; records of other kinds are unreadable here (kept,
	// a miss).
	MAC MACKind
	// Digest is the hash of a keyed-hash MAC (MACHash): zero or
	// DigestSHA256 for HMAC-SHA-256, or DigestBlake2b256 for keyed
	// blake2b-256. Setting it with MAC zero selects MACHash.
	Digest DigestKind
}

// Validate checks the options: a MACKey, when set, must be MinMACKeyLen
// to MaxMACKeyLen bytes long, MAC must be a known kind and not MACGMAC
// with a Digest (GMAC hashes with none), and Digest must be a known kind
// (not blake2b-256 in FIPS 140-3 mode). The caches call it when they are
// opened; EncodeRecord and DecodeRecord call it too.
func (o RecordOptions) Validate() error {
	if o.MACKey != nil && (len(o.MACKey) < MinMACKeyLen || len(o.MACKey) > MaxMACKeyLen) {
		return fmt.Errorf("progcache: RecordOptions.MACKey of %d bytes: want none, or %d to %d bytes: %w", len(o.MACKey), MinMACKeyLen, MaxMACKeyLen, ErrInvalidConfig)
	}
	switch o.MAC {
	case 0, MACHash:
	case MACGMAC:
		if o.Digest != 0 {
			return fmt.Errorf("progcache: RecordOptions.MAC is %v with Digest %v: AES-GMAC uses no digest; leave Digest zero, or set MAC to MACHash for a keyed %v: %w", o.MAC, o.Digest, o.Digest, ErrInvalidConfig)
		}
	default:
		return fmt.Errorf("progcache: RecordOptions.MAC is %v: want zero (the default, AES-GMAC), MACGMAC or MACHash: %w", o.MAC, ErrInvalidConfig)
	}
	_, err := o.Digest.resolve("RecordOptions.Digest", ErrInvalidConfig)
	return err
}

// check is the check kind that seals o's new records.
func (o RecordOptions) check() byte {
	switch {
	case o.MACKey == nil:
		return checkCRC32C
	case o.MAC == MACGMAC || o.MAC == 0 && o.Digest == 0:
		return checkGMAC
	case o.Digest == DigestBlake2b256:
		return checkBlake2bMAC
	}
	return checkHMACSHA256
}

// reads reports whether a cache with options o reads records of check
// kind c (see RecordOptions.MAC).
func (o RecordOptions) reads(c byte) bool {
	switch c {
	case checkCRC32C:
		return o.MACKey == nil
	case checkGMAC, checkHMACSHA256:
		return o.MACKey != nil
	case checkBlake2bMAC:
		return o.MACKey != nil && o.Digest == DigestBlake2b256
	}
	return false
}

// trailerSize is the length of a record's check of kind c.
func trailerSize(c byte) int {
	switch c {
	case checkCRC32C:
		return crc32.Size
	case checkGMAC:
		return gmacTagSize
	}
	return 32
}

// nonceSize is the length of the nonce after the header of a record of
// check kind c.
func nonceSize(c byte) int {
	if c == checkGMAC {
		return gmacNonceSize
	}
	return 0
}

// versionOf is the record version of check kind c.
func versionOf(c byte) byte {
	if c == checkGMAC {
		return gmacRecordVersion
	}
	return recordVersion
}

// newHashMAC returns the keyed hash of hash-MAC check kind c under key.
func newHashMAC(c byte, key []byte) hash.Hash {
	if c == checkBlake2bMAC {
		h, _ := blake2b.New256(key) // key length validated
		return h
	}
	return hmac.New(sha256.New, key)
}

// keyIDOf is the key id that records of MAC kind c sealed with key
// carry: the HMAC-SHA-256 one for AES-GMAC and HMAC-SHA-256 records
// (computed once per key), the keyed blake2b-256 one for blake2b.
func keyIDOf(c byte, key []byte) [keyIDSize]byte {
	if c == checkBlake2bMAC {
		return keyID(newHashMAC(c, key))
	}
	return gmacKeyOf(key).id
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
	c := o.check()
	n := int64(RecordHeaderSize + nonceSize(c) + 2 + len(obj.Kind) + 2 + len(obj.Name) + 4 + 4 + 8 + len(obj.Code) + trailerSize(c))
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
	kind := o.check()
	var c recordCheck
	var g *gmacKey
	var id [keyIDSize]byte
	switch kind {
	case checkGMAC:
		g = gmacKeyOf(o.MACKey)
		id = g.id
	case checkHMACSHA256, checkBlake2bMAC:
		c.mac = newHashMAC(kind, o.MACKey)
		id = keyID(c.mac)
	}
	b = append(b, recordMagic...)
	b = append(b, versionOf(kind), kind)
	b = append(b, id[:]...)
	b = append(b, k[:]...)
	if g != nil {
		n := len(b)
		b = b[:n+gmacNonceSize]
		readNonce(b[n:])
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(len(obj.Kind)))
	b = append(b, obj.Kind...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(obj.Name)))
	b = append(b, obj.Name...)
	b = appendMap(b, obj.Symbols)
	b = appendMap(b, obj.Metadata)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(obj.Code)))
	if g != nil {
		at := start + RecordHeaderSize
		b, tag := g.appendSealed(b, start, obj.Code, b[at:at+gmacNonceSize])
		return append(b, tag[:]...), nil
	}
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
// b. It allocates nothing for a CRC-32C record, nor for an AES-GMAC one
// whose nonce it verified lately (gmacKey.verify); a keyed-hash check
// does. Map names must be strictly increasing, as EncodeRecord writes
// them, which also rules out a repeated name without building a map.
func parseRecord(b []byte, o RecordOptions, verify bool) (Key, View, error) {
	var k Key
	if err := o.Validate(); err != nil {
		return k, View{}, err
	}
	if len(b) < RecordHeaderSize {
		return k, View{}, corruptf("record of %d bytes is shorter than the smallest record", len(b))
	}
	kind, err := checkHeader(b[:RecordHeaderSize], o)
	if err != nil {
		return k, View{}, err
	}
	ts, ns := trailerSize(kind), nonceSize(kind)
	if len(b) < RecordHeaderSize+ns+ts {
		return k, View{}, corruptf("record of %d bytes is shorter than the smallest record", len(b))
	}
	body, trailer := b[:len(b)-ts], b[len(b)-ts:]
	nonce := body[RecordHeaderSize : RecordHeaderSize+ns]
	if verify {
		switch kind {
		case checkCRC32C:
			if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(trailer) {
				return k, View{}, corruptf("checksum mismatch")
			}
		case checkGMAC:
			if !gmacKeyOf(o.MACKey).verify(nonce, body, trailer) {
				return k, View{}, corruptf("MAC mismatch: the entry was altered after it was sealed")
			}
		default:
			var sum [64]byte
			mac := newHashMAC(kind, o.MACKey)
			mac.Write(body)
			if !hmac.Equal(mac.Sum(sum[:0]), trailer) {
				return k, View{}, corruptf("MAC mismatch: the entry was altered after it was sealed")
			}
		}
	}
	copy(k[:], body[recordfmt.KeyAt:RecordHeaderSize])
	r := reader{b: body[RecordHeaderSize+ns:]}
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
	_, err := checkHeader(h, o)
	return err
}

// checkHeader is CheckRecordHeader; it returns the record's check kind.
func checkHeader(h []byte, o RecordOptions) (byte, error) {
	if len(h) < RecordHeaderSize {
		return 0, corruptf("record of %d bytes is shorter than its header", len(h))
	}
	if string(h[:4]) != recordMagic {
		return 0, corruptf("bad magic %q: not a progcache entry", h[:4])
	}
	kind := h[5]
	switch h[4] {
	case recordVersion:
		if kind < checkCRC32C || kind > checkHMACSHA256 {
			return 0, corruptf("unknown check kind %d in a version %d record", kind, recordVersion)
		}
	case gmacRecordVersion:
		if kind != checkGMAC {
			return 0, corruptf("unknown check kind %d in a version %d record", kind, gmacRecordVersion)
		}
	default:
		return 0, unreadablef("record version %d: this build reads versions %d and %d", h[4], recordVersion, gmacRecordVersion)
	}
	if !o.reads(kind) {
		return 0, unreadablef("record sealed with %s, this cache is configured for %s", checkName(kind), checkName(o.check()))
	}
	id := h[6 : 6+keyIDSize]
	if kind == checkCRC32C {
		if [keyIDSize]byte(id) != [keyIDSize]byte{} {
			return 0, corruptf("CRC-32C record carries a MAC key id")
		}
		return kind, nil
	}
	if want := keyIDOf(kind, o.MACKey); string(id) != string(want[:]) {
		return 0, unreadablef("record sealed with another MAC key (key id %x, this cache's is %x)", id, want)
	}
	return kind, nil
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
	case checkGMAC:
		return "an AES-GMAC MAC"
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
