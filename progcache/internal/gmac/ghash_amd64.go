//go:build !purego

package gmac

import (
	"encoding/binary"

	"golang.org/x/sys/cpu"
)

// table holds H^16 .. H^1 in the hash's form as the loop reads them: for
// j = 0..7, at 64j the powers H^(16-2j) and H^(15-2j) (one per 128-bit
// lane, the order in which a 32-byte load puts two blocks) and at 64j+32
// their Karatsuba halves (each power's two qwords xored, in both).
type table [512]byte

// hasFastGHASH reports AVX2 (with the OS saving its registers), PCLMULQDQ
// and VPCLMULQDQ (CPUID leaf 7, ECX bit 10; x/sys/cpu reports it only
// with AVX-512, which this code does not use).
func hasFastGHASH() bool {
	return cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ && cpuid7ecx()&(1<<10) != 0
}

// init makes t the table of hash key h (E_K(0), as bytes).
func (t *table) init(h *[16]byte) {
	// The register form of h is its bytes reversed: a 128-bit number
	// whose high qword is h[0:8] big-endian. Keeping H·x mod P in that
	// form (a shift left by one, reduced by the constant 0xc2<<120 | 1
	// the code multiplies by) saves the product's one-bit shift.
	hi, lo := binary.BigEndian.Uint64(h[:8]), binary.BigEndian.Uint64(h[8:])
	carry := hi >> 63
	hi, lo = hi<<1|lo>>63, lo<<1
	if carry != 0 {
		hi ^= 0xc2 << 56
		lo ^= 1
	}
	var p [16][16]byte
	binary.LittleEndian.PutUint64(p[0][:8], lo)
	binary.LittleEndian.PutUint64(p[0][8:], hi)
	// p[i] = H^(i+1), in four rounds of independent products:
	// H^2 = H·H; H^3..H^4 = H^1..H^2 · H^2; H^5..H^8 = H^1..H^4 · H^4;
	// H^9..H^16 = H^1..H^8 · H^8.
	mulBy(&p[1], &p[0], &p[0], 1)
	mulBy(&p[2], &p[0], &p[1], 2)
	mulBy(&p[4], &p[0], &p[3], 4)
	mulBy(&p[8], &p[0], &p[7], 8)
	for i := range 16 {
		k := i + 1
		j, lane := (16-k)/2, (16-k)%2 // H^k multiplies block 16-k of 16
		off := 64*j + 16*lane
		copy(t[off:off+16], p[i][:])
		x := binary.LittleEndian.Uint64(p[i][:8]) ^ binary.LittleEndian.Uint64(p[i][8:])
		binary.LittleEndian.PutUint64(t[off+32:], x)
		binary.LittleEndian.PutUint64(t[off+40:], x)
	}
}

// update hashes the whole blocks of p into acc (the register form),
// copying them to dst first when dst is not nil.
func (t *table) update(acc *[16]byte, dst, p []byte) {
	n := len(p) / 16
	if n == 0 {
		return
	}
	var d *byte
	if dst != nil {
		_ = dst[len(p)-1]
		d = &dst[0]
	}
	update(t, acc, d, &p[0], n)
}

// mulBy sets dst[i] to src[i]·b for i < n (n >= 1), the arrays'
// elements 16 bytes apart; dst must not overlap src or b.
//
//go:noescape
func mulBy(dst, src, b *[16]byte, n int)

// update hashes n blocks at src into acc, storing them at dst first
// unless dst is nil.
//
//go:noescape
func update(tab *table, acc *[16]byte, dst, src *byte, n int)

func cpuid7ecx() uint32
