//go:build !purego

#include "textflag.h"

// GHASH on 256-bit carry-less multiply (VPCLMULQDQ, VEX.256): two blocks
// per instruction, sixteen blocks per reduction.
//
// A block is byte-reversed into a register (VPSHUFB), the domain in
// which the hash key is kept as H·x mod P (see ghash_amd64.go), so that a
// product needs no one-bit shift; a 256-bit product is folded to 128 bits
// by two multiplies by the reduced polynomial's high half, 0xc2<<56
// (Gueron and Kounavis, "Intel Carry-Less Multiplication Instruction and
// its Usage for Computing the GCM Mode", rev. 2.02, the form Go's
// gcm_amd64.s uses too). Products use Karatsuba: lo = a0·b0, hi = a1·b1,
// mid = (a0^a1)·(b0^b1) with (b0^b1) precomputed in the table.

// bswapMask reverses the bytes of each 128-bit lane.
DATA bswapMask<>+0(SB)/8, $0x08090a0b0c0d0e0f
DATA bswapMask<>+8(SB)/8, $0x0001020304050607
DATA bswapMask<>+16(SB)/8, $0x08090a0b0c0d0e0f
DATA bswapMask<>+24(SB)/8, $0x0001020304050607
GLOBL bswapMask<>(SB), RODATA|NOPTR, $32

// gcmPoly is the reduction constant: the low qword 1, the high 0xc2<<56.
DATA gcmPoly<>+0(SB)/8, $0x0000000000000001
DATA gcmPoly<>+8(SB)/8, $0xc200000000000000
GLOBL gcmPoly<>(SB), RODATA|NOPTR, $16

// MUL_REDUCE folds the unreduced product in lo (X8), hi (X9) and mid
// (X10, Karatsuba's middle term before its fix-up) to 128 bits in X8.
// X11 is scratch; X14 holds gcmPoly.
#define MUL_REDUCE \
	VPXOR      X8, X10, X10; \
	VPXOR      X9, X10, X10; \
	VPSLLDQ    $8, X10, X11; \
	VPSRLDQ    $8, X10, X10; \
	VPXOR      X11, X8, X8; \
	VPXOR      X10, X9, X9; \
	VPCLMULQDQ $0x01, X8, X14, X11; \
	VPSHUFD    $0x4e, X8, X8; \
	VPXOR      X11, X8, X8; \
	VPCLMULQDQ $0x01, X8, X14, X11; \
	VPSHUFD    $0x4e, X8, X8; \
	VPXOR      X11, X8, X8; \
	VPXOR      X9, X8, X8

// MUL1 sets X8 to X0·X12, X13 holding X12's Karatsuba half; X1, X9,
// X10 and X11 are scratch.
#define MUL1 \
	VPCLMULQDQ $0x00, X12, X0, X8; \
	VPCLMULQDQ $0x11, X12, X0, X9; \
	VPSHUFD    $0x4e, X0, X1; \
	VPXOR      X0, X1, X1; \
	VPCLMULQDQ $0x00, X13, X1, X10; \
	MUL_REDUCE

// PAIR multiplies the two blocks in register D (shuffled in place) by the
// table's powers at offset OFF and adds the products to Y8, Y9, Y10.
#define PAIR(D, OFF) \
	VPSHUFB    Y15, D, D; \
	VPSHUFD    $0x4e, D, Y11; \
	VPXOR      D, Y11, Y11; \
	VPCLMULQDQ $0x00, OFF(DI), D, Y12; \
	VPCLMULQDQ $0x11, OFF(DI), D, Y13; \
	VPCLMULQDQ $0x00, OFF+32(DI), Y11, Y11; \
	VPXOR      Y12, Y8, Y8; \
	VPXOR      Y13, Y9, Y9; \
	VPXOR      Y11, Y10, Y10

// func mulBy(dst, src *[16]byte, b *[16]byte, n int)
// Requires: AVX, PCLMULQDQ
TEXT ·mulBy(SB), NOSPLIT, $0-32
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    b+16(FP), AX
	MOVQ    n+24(FP), CX
	VMOVDQU gcmPoly<>+0(SB), X14
	VMOVDQU (AX), X12
	VPSHUFD $0x4e, X12, X13
	VPXOR   X12, X13, X13     // b's Karatsuba half

mulLoop:
	// The iterations are independent, so they overlap in the core.
	VMOVDQU    (SI), X0
	MUL1
	VMOVDQU X8, (DI)
	LEAQ    16(SI), SI
	LEAQ    16(DI), DI
	DECQ    CX
	JNE     mulLoop
	VZEROUPPER
	RET

// func update(tab *table, acc *[16]byte, dst *byte, src *byte, n int)
// Requires: AVX, AVX2, PCLMULQDQ, VPCLMULQDQ
TEXT ·update(SB), NOSPLIT, $0-40
	MOVQ    tab+0(FP), DI
	MOVQ    acc+8(FP), CX
	MOVQ    dst+16(FP), BX
	MOVQ    src+24(FP), SI
	MOVQ    n+32(FP), DX
	VMOVDQU bswapMask<>+0(SB), Y15
	VMOVDQU gcmPoly<>+0(SB), X14
	VMOVDQU (CX), X8          // the running hash; VEX.128 clears lane 1

loop16:
	CMPQ    DX, $16
	JB      singles
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VMOVDQU 128(SI), Y4
	VMOVDQU 160(SI), Y5
	VMOVDQU 192(SI), Y6
	VMOVDQU 224(SI), Y7
	TESTQ   BX, BX
	JEQ     hash16
	VMOVDQU Y0, 0(BX)
	VMOVDQU Y1, 32(BX)
	VMOVDQU Y2, 64(BX)
	VMOVDQU Y3, 96(BX)
	VMOVDQU Y4, 128(BX)
	VMOVDQU Y5, 160(BX)
	VMOVDQU Y6, 192(BX)
	VMOVDQU Y7, 224(BX)
	ADDQ    $256, BX

hash16:
	// The first block takes the running hash; the first pair's products
	// start the sums.
	VPSHUFB    Y15, Y0, Y0
	VPXOR      Y8, Y0, Y0
	VPSHUFD    $0x4e, Y0, Y11
	VPXOR      Y0, Y11, Y11
	VPCLMULQDQ $0x00, 0(DI), Y0, Y8
	VPCLMULQDQ $0x11, 0(DI), Y0, Y9
	VPCLMULQDQ $0x00, 32(DI), Y11, Y10
	PAIR(Y1, 64)
	PAIR(Y2, 128)
	PAIR(Y3, 192)
	PAIR(Y4, 256)
	PAIR(Y5, 320)
	PAIR(Y6, 384)
	PAIR(Y7, 448)
	// Add the lanes, then reduce.
	VEXTRACTI128 $1, Y8, X11
	VPXOR        X11, X8, X8
	VEXTRACTI128 $1, Y9, X11
	VPXOR        X11, X9, X9
	VEXTRACTI128 $1, Y10, X11
	VPXOR        X11, X10, X10
	MUL_REDUCE
	ADDQ $256, SI
	SUBQ $16, DX
	JMP  loop16

singles:
	TESTQ   DX, DX
	JEQ     done
	VMOVDQU 464(DI), X12      // P_1
	VMOVDQU 496(DI), X13      // its Karatsuba half

singleLoop:
	VMOVDQU (SI), X0
	TESTQ   BX, BX
	JEQ     hash1
	VMOVDQU X0, (BX)
	ADDQ    $16, BX

hash1:
	VPSHUFB    X15, X0, X0
	VPXOR      X8, X0, X0
	MUL1
	ADDQ $16, SI
	DECQ DX
	JNE  singleLoop

done:
	VMOVDQU X8, (CX)
	VZEROUPPER
	RET

// func cpuid7ecx() uint32
TEXT ·cpuid7ecx(SB), NOSPLIT, $0-4
	MOVL $7, AX
	MOVL $0, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET
