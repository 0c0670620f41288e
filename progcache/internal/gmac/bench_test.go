package gmac_test

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"testing"

	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/internal/gmac"
)

// BenchmarkTag times a tag over 4 KiB, 64 KiB and 1 MiB beside, in
// alternating rounds (cachetest.Versus), crypto/cipher's GCM sealing the
// same message as additional data: better-than-crypto-cipher-x is its
// time over ours. "copy" times AppendTag, the copy of the message and
// its tag in one pass, beside a copy() then crypto/cipher's tag.
func BenchmarkTag(b *testing.B) {
	if !gmac.Fast() {
		b.Skip("no fast GHASH here (needs amd64 with AVX2 and VPCLMULQDQ, outside FIPS mode): tags are crypto/cipher's")
	}
	key := make([]byte, 32)
	nonce := make([]byte, 12)
	k, _ := gmac.New(key)
	blk, _ := aes.NewCipher(key)
	g, _ := cipher.NewGCM(blk)
	for _, size := range []int{4 << 10, 64 << 10, 1 << 20} {
		msg := make([]byte, size)
		for i := range msg {
			msg[i] = byte(i * 7)
		}
		var sink [16]byte
		b.Run(fmt.Sprintf("tag/%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(2 * size))
			cachetest.Versus(b, batchOf(size), cachetest.Side{Name: "gmac", Run: func() {
				sink = k.Tag(nonce, msg)
			}}, cachetest.Side{Name: "crypto-cipher", Run: func() {
				g.Seal(sink[:0], nonce, nil, msg)
			}})
		})
		dst := make([]byte, 0, size+64)
		b.Run(fmt.Sprintf("copy/%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(2 * size))
			cachetest.Versus(b, batchOf(size), cachetest.Side{Name: "gmac", Run: func() {
				dst, sink = k.AppendTag(append(dst[:0], "header"...), 0, msg, nonce)
			}}, cachetest.Side{Name: "crypto-cipher", Run: func() {
				dst = append(append(dst[:0], "header"...), msg...)
				g.Seal(sink[:0], nonce, nil, dst)
			}})
		})
	}
}

// batchOf makes a round of Versus take some microseconds.
func batchOf(size int) int { return max(1, (64<<10)/size) }

// BenchmarkNew times New for an AES-256 key (the key schedule, H and its
// powers) beside, in alternating rounds, what crypto/cipher's GCM needs
// for a key: aes.NewCipher and cipher.NewGCM. A sealed record derives a
// key of its own, so this is a per-record cost.
func BenchmarkNew(b *testing.B) {
	key := make([]byte, 32)
	cachetest.Versus(b, 16, cachetest.Side{Name: "gmac", Run: func() {
		if _, err := gmac.New(key); err != nil {
			b.Fatal(err)
		}
	}}, cachetest.Side{Name: "crypto-cipher", Run: func() {
		blk, _ := aes.NewCipher(key)
		if _, err := cipher.NewGCM(blk); err != nil {
			b.Fatal(err)
		}
	}})
}
