// Package gmac computes AES-GMAC tags (NIST SP 800-38D: GCM with the
// message as additional data and no plaintext) for progcache's sealed
// records.
//
// The tag is GCM's, bit for bit: tag = GHASH_H(M, pad, [len(M)]_64,
// [0]_64) xor E_K(J0), with H = E_K(0^128) and J0 = nonce || 0^31 || 1.
// On amd64 with AVX2 and VPCLMULQDQ the hash runs here, two blocks per
// carry-less multiply and sixteen blocks per reduction, about twice the
// speed of crypto/cipher's GCM, whose assembly multiplies one block at a
// time; it can also copy the message while it hashes it, so a writer
// that builds a record pays for one pass over its bytes, not two.
// Elsewhere, and in FIPS 140-3 mode (GODEBUG=fips140=on), where only the
// standard library's validated module may compute it, crypto/cipher's
// GCM does all of it.
package gmac

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/fips140"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"slices"
	"sync/atomic"
	"unsafe"
)

const (
	// NonceSize is GCM's standard nonce, the only one accepted here.
	NonceSize = 12
	// TagSize is GCM's full tag.
	TagSize = 16
)

// Key is an AES key ready to compute GMAC tags: the block cipher and,
// with the fast hash, the powers of the hash key. It is safe for
// concurrent use.
//
// Locking: block, gcm and tab are set by New and never written again.
// j0 is the buffer in which the tag's mask E_K(J0) is made (a buffer
// handed to cipher.Block, an interface, would otherwise escape: one
// allocation per tag); the call that sets j0Busy from false owns it until
// it clears it, and a call that finds it owned uses a buffer of its own.
type Key struct {
	block  cipher.Block
	gcm    cipher.AEAD // nil with the fast hash, when tab holds H^1..H^16 in its form
	tab    table
	j0Busy atomic.Bool
	j0     [16]byte
}

// New returns the Key of an AES-128, AES-192 or AES-256 key (16, 24 or
// 32 bytes).
func New(key []byte) (*Key, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	k := &Key{block: block}
	if fast {
		// H = E_K(0), made in k.j0 (on the heap already) as Tag makes
		// its mask.
		block.Encrypt(k.j0[:], k.j0[:])
		h := k.j0
		k.j0 = [16]byte{}
		k.tab.init(&h)
		return k, nil
	}
	if k.gcm, err = cipher.NewGCM(block); err != nil {
		return nil, err
	}
	return k, nil
}

// fast is whether this process hashes here (see the package comment).
var fast = hasFastGHASH() && !fips140.Enabled()

// Fast reports whether tags are computed by this package's hash rather
// than crypto/cipher's GCM.
func Fast() bool { return fast }

// errNonce is the panic of a nonce that is not NonceSize bytes: a
// programming error, as crypto/cipher treats it.
var errNonce = errors.New("gmac: nonce must be 12 bytes")

// Tag returns the GMAC of data under nonce (NonceSize bytes).
func (k *Key) Tag(nonce, data []byte) [TagSize]byte {
	if len(nonce) != NonceSize {
		panic(errNonce)
	}
	if k.gcm != nil {
		return k.stdTag(nonce, data)
	}
	var s state
	s.write(&k.tab, nil, data)
	return s.sum(k, nonce)
}

// stdTag is Tag computed by crypto/cipher's GCM.
func (k *Key) stdTag(nonce, data []byte) [TagSize]byte {
	tag := new([TagSize]byte) // Seal's dst escapes; a pointer keeps Tag's own result on the stack
	k.gcm.Seal(tag[:0], nonce, nil, data)
	return *tag
}

// Verify reports whether tag is the GMAC of data under nonce, comparing
// in constant time.
func (k *Key) Verify(nonce, data, tag []byte) bool {
	if len(tag) != TagSize {
		return false
	}
	if k.gcm != nil {
		if len(nonce) != NonceSize {
			panic(errNonce)
		}
		_, err := k.gcm.Open(nil, nonce, tag, data) // no plaintext: nothing to allocate
		return err == nil
	}
	want := k.Tag(nonce, data)
	return subtle.ConstantTimeCompare(want[:], tag) == 1
}

// AppendTag appends src to dst and returns the extended slice with the
// GMAC, under nonce, of dst[from:] followed by src: the tag of the bytes
// from from to the new end. With the fast hash the copy and the hash are
// one pass over src. src may overlap dst, as with append. It panics if
// from is not within dst.
func (k *Key) AppendTag(dst []byte, from int, src []byte, nonce []byte) ([]byte, [TagSize]byte) {
	if from < 0 || from > len(dst) {
		panic("gmac: AppendTag: from is outside dst")
	}
	if k.gcm != nil {
		dst = append(dst, src...)
		return dst, k.Tag(nonce, dst[from:])
	}
	if len(nonce) != NonceSize {
		panic(errNonce)
	}
	n := len(dst)
	dst = slices.Grow(dst, len(src))[:n+len(src)]
	var s state
	s.write(&k.tab, nil, dst[from:n])
	if overlap(dst[n:], src) {
		// src overlaps the bytes it goes to, as append allows: copy as
		// append does (a forward copy in chunks would read bytes it had
		// overwritten when src starts below them), then hash the copy.
		copy(dst[n:], src)
		s.write(&k.tab, nil, dst[n:])
	} else {
		s.write(&k.tab, dst[n:], src)
	}
	return dst, s.sum(k, nonce)
}

// overlap reports whether a and b share memory.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// state is a running GHASH: the hash of the whole blocks written so far,
// in the register form, a partial block, and the bytes written.
type state struct {
	acc  [16]byte
	part [16]byte
	np   int
	n    uint64
}

// write hashes p, first copying it to dst when dst is not nil (dst is
// then len(p) bytes that do not overlap p).
func (s *state) write(t *table, dst, p []byte) {
	s.n += uint64(len(p))
	if s.np > 0 {
		c := copy(s.part[s.np:], p)
		if dst != nil {
			copy(dst, p[:c])
			dst = dst[c:]
		}
		p = p[c:]
		if s.np += c; s.np < 16 {
			return
		}
		t.update(&s.acc, nil, s.part[:])
		s.np = 0
	}
	if whole := len(p) &^ 15; whole > 0 {
		t.update(&s.acc, dst, p[:whole])
		p = p[whole:]
		if dst != nil {
			dst = dst[whole:]
		}
	}
	if len(p) > 0 {
		s.np = copy(s.part[:], p)
		if dst != nil {
			copy(dst, p)
		}
	}
}

// sum finishes the hash (the zero-padded partial block, then the length
// block: the message's bits as additional data, none as ciphertext) and
// returns the tag under nonce.
func (s *state) sum(k *Key, nonce []byte) [TagSize]byte {
	var last [32]byte
	b := last[:16]
	if s.np > 0 {
		copy(last[:], s.part[:s.np])
		b = last[:]
		binary.BigEndian.PutUint64(last[16:], s.n*8)
	} else {
		binary.BigEndian.PutUint64(last[:], s.n*8)
	}
	k.tab.update(&s.acc, nil, b)
	j0 := &k.j0
	if !k.j0Busy.CompareAndSwap(false, true) {
		j0 = new([16]byte)
	}
	*j0 = [16]byte{}
	copy(j0[:], nonce)
	j0[15] = 1
	k.block.Encrypt(j0[:], j0[:])
	var tag [TagSize]byte
	for i := range tag {
		tag[i] = s.acc[15-i] ^ j0[i] // the register form is byte-reversed
	}
	if j0 == &k.j0 {
		k.j0Busy.Store(false)
	}
	return tag
}
