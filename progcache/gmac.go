package progcache

// AES-GMAC records.
//
// HMAC-SHA-256 runs at about 1.5 GB/s here (SHA-NI), a third of a
// loopback Redis GET of the same 64 KiB. GMAC is GCM with an empty
// plaintext and the message as additional data (NIST SP 800-38D), a
// FIPS-approved MAC whose cost is GHASH, carry-less multiplies: about
// 7 GB/s in crypto/cipher's assembly (PCLMULQDQ, one block per multiply)
// and 14 GB/s in internal/gmac's (VPCLMULQDQ, two blocks per multiply,
// where the CPU has it), which also copies a record's code as it hashes
// it. Tags are GCM's bit for bit either way, and in FIPS 140-3 mode only
// crypto/cipher's validated GCM computes them.
//
// GCM needs a nonce that never repeats under a key: two tags under one
// nonce give the hash key away, and with it forgeries of any record. With
// random 96-bit nonces SP 800-38D §8.3 allows 2^32 messages per key, and
// a MAC key is shared by every process and machine of a fleet for the
// key's whole life, which no process can count. So a record carries a
// random 192-bit nonce and is sealed as in XAES-256-GCM
// (https://c2sp.org/XAES-256-GCM): the nonce's first 96 bits select a
// key of its own, derived from the cache key by the SP 800-108r1 counter
// KDF over CMAC-AES-256, and GCM under that key takes the last 96 bits as
// its nonce. A derived key then seals about one record however many the
// fleet writes, far inside §8.3's bound, and a full nonce repeats with
// probability about q^2/2^193 after q records (2^-33 at q = 2^80). No
// counter, no state shared between writers, and the cost is per record:
// two AES blocks, a key schedule and the hash key's powers, about 0.5 us
// against 4.6 us for the 64 KiB hash itself.
//
// The AES-256 key is itself derived from the cache's MAC key (16 to 64
// bytes) by the SP 800-108r1 counter KDF over HMAC-SHA-256 under a label
// of its own. That input begins with the counter, where a record begins
// with "AKPC" and the key id's input with its label, so no HMAC-SHA-256
// record MAC or key id made with the same MAC key, which are public, is
// the AES key.

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/accelkit/accelkit/progcache/internal/gmac"
)

const (
	// gmacNonceSize is the per-record nonce (XAES-256-GCM's): 12 bytes
	// for the key derivation, 12 for GCM.
	gmacNonceSize = 24
	// gmacTagSize is GCM's full tag.
	gmacTagSize = 16
	// gmacKDFLabel labels the AES key derived from a MAC key.
	gmacKDFLabel = "accelkit/progcache/record gmac aes-256 key"
)

// gmacKey is what one MAC key needs for GMAC and HMAC-SHA-256 records,
// computed once per key: the AES-256 block of the derived key and its
// CMAC subkey, and the key id of HMAC-SHA-256 and GMAC records.
//
// Locking: block, k1 and id are set before the gmacKey is shared; each
// slot of opened is an atomic pointer to an immutable openedKey.
type gmacKey struct {
	block cipher.Block // AES-256 under the derived key
	k1    [aes.BlockSize]byte
	id    [keyIDSize]byte
	// opened holds the GMAC keys that verified records lately, by the
	// first bytes of their nonces, so that reading a record again (a hot
	// entry) skips the derivation: two AES blocks, a key schedule, the
	// hash key's powers and two allocations, 0.5 µs. Sealing never looks
	// here, nor adds: each record it seals has a fresh nonce.
	opened [openedSlots]atomic.Pointer[openedKey]
}

// openedSlots is the size of a gmacKey's cache of derived keys: with a
// key of about 1.1 KiB, at most 140 KiB per MAC key.
const openedSlots = 128

// openedKey is a derived GMAC key and the nonce prefix it was derived
// from.
type openedKey struct {
	prefix [12]byte
	key    *gmac.Key
}

// macKeys holds the gmacKey of the MAC keys this process used, a few at
// most: a copy-on-write map, so a record's lookup takes no lock. It keeps
// the derived keys for the process's life, as a cache's options keep the
// MAC key; past maxMACKeys keys it is started over.
var (
	macKeys   atomic.Pointer[map[string]*gmacKey]
	macKeysMu sync.Mutex // serialises writers of macKeys
)

const maxMACKeys = 16

// gmacKeyOf returns key's gmacKey, from macKeys when it is there.
func gmacKeyOf(key []byte) *gmacKey {
	if m := macKeys.Load(); m != nil {
		if g := (*m)[string(key)]; g != nil {
			return g
		}
	}
	g := newGMACKey(key)
	macKeysMu.Lock()
	defer macKeysMu.Unlock()
	var m map[string]*gmacKey
	if old := macKeys.Load(); old != nil && len(*old) < maxMACKeys {
		m = make(map[string]*gmacKey, len(*old)+1)
		for k, v := range *old {
			m[k] = v
		}
	} else {
		m = make(map[string]*gmacKey, 1)
	}
	m[string(key)] = g
	macKeys.Store(&m)
	return g
}

func newGMACKey(key []byte) *gmacKey {
	var g gmacKey
	mac := hmac.New(sha256.New, key)
	g.id = keyID(mac)
	// SP 800-108r1 §4.1, counter mode, one block: [1]_32 || Label ||
	// 0x00 || Context (none) || [L]_32 with L = 256 bits.
	var in []byte
	in = binary.BigEndian.AppendUint32(in, 1)
	in = append(in, gmacKDFLabel...)
	in = append(in, 0)
	in = binary.BigEndian.AppendUint32(in, 256)
	mac.Write(in)
	aesKey := mac.Sum(nil)
	g.block, _ = aes.NewCipher(aesKey) // 32 bytes: AES-256
	clear(aesKey)
	// CMAC's first subkey (SP 800-38B §6.1): L = AES(0), K1 = L·x.
	var l [aes.BlockSize]byte
	g.block.Encrypt(l[:], l[:])
	g.k1 = cmacDouble(l)
	return &g
}

// cmacDouble multiplies b by x in GF(2^128) as CMAC does (SP 800-38B).
func cmacDouble(b [aes.BlockSize]byte) [aes.BlockSize]byte {
	var d [aes.BlockSize]byte
	msb := b[0] >> 7
	for i := range aes.BlockSize - 1 {
		d[i] = b[i]<<1 | b[i+1]>>7
	}
	d[aes.BlockSize-1] = b[aes.BlockSize-1]<<1 ^ 0x87*msb
	return d
}

// deriveKey returns the AES-256 key that seals the record with this
// nonce: XAES-256-GCM's key derivation, the SP 800-108r1 counter KDF over
// CMAC-AES-256 with label 'X' and the nonce's first 12 bytes as context.
// Each message is one block long and complete, so its CMAC is one AES
// block of the message xor K1.
func (g *gmacKey) deriveKey(nonce []byte) [32]byte {
	var m [aes.BlockSize]byte
	m[2] = 'X'
	copy(m[4:], nonce[:12])
	var key [32]byte
	for i := range 2 {
		m[1] = byte(i + 1)
		var x [aes.BlockSize]byte
		for j := range x {
			x[j] = m[j] ^ g.k1[j]
		}
		g.block.Encrypt(key[i*aes.BlockSize:], x[:])
	}
	return key
}

// derive returns the GMAC key that seals the record with this nonce
// (deriveKey), and the nonce's GCM half.
func (g *gmacKey) derive(nonce []byte) (*gmac.Key, []byte) {
	key := g.deriveKey(nonce)
	k, _ := gmac.New(key[:]) // 32 bytes: AES-256
	clear(key[:])
	return k, nonce[12:]
}

// appendSealed appends code to b and returns the extended slice with the
// GMAC, under nonce, of b[from:] and code: the copy and the hash are one
// pass over code where internal/gmac has its fast hash.
func (g *gmacKey) appendSealed(b []byte, from int, code, nonce []byte) ([]byte, [gmacTagSize]byte) {
	k, n := g.derive(nonce)
	return k.AppendTag(b, from, code, n)
}

// verify reports whether tag is the GMAC of data under nonce; the
// comparison takes constant time. The derived key comes from g.opened
// when a record with the same nonce prefix was verified lately: the
// derivation is a function of the MAC key and the prefix alone, so the
// cached key is the one derive would make. The slot is picked by the
// nonce's bytes, which a writer chooses; one that picks them to collide
// only makes the derivation run again.
func (g *gmacKey) verify(nonce, data, tag []byte) bool {
	prefix := [12]byte(nonce[:12])
	slot := &g.opened[binary.LittleEndian.Uint32(prefix[:4])%openedSlots]
	var k *gmac.Key
	if o := slot.Load(); o != nil && o.prefix == prefix {
		k = o.key
	} else {
		k, _ = g.derive(nonce)
		slot.Store(&openedKey{prefix: prefix, key: k})
	}
	return k.Verify(nonce[12:], data, tag)
}

// readNonce fills a record's nonce from the system's CSPRNG; tests
// replace it to pin a record's bytes.
var readNonce = func(p []byte) { rand.Read(p) }
