package progcache

import (
	"crypto/fips140"
	"crypto/sha256"
	"hash"
	"strconv"

	"golang.org/x/crypto/blake2b"
)

// DigestKind says which hash function made a key or a record MAC.
type DigestKind uint8

const (
	// DigestBlake2b256 is blake2b with a 32-byte output (the default, as in
	// cuda.core).
	DigestBlake2b256 DigestKind = 1
	// DigestSHA256 is SHA-256 (and HMAC-SHA-256 for MACs), used in FIPS mode
	// because blake2b is not FIPS-approved.
	DigestSHA256 DigestKind = 2
)

func (d DigestKind) String() string {
	switch d {
	case DigestBlake2b256:
		return "blake2b-256"
	case DigestSHA256:
		return "sha-256"
	}
	return "digest(" + strconv.Itoa(int(d)) + ")"
}

// digestFor picks the digest kind: SHA-256 when asked or when the Go
// cryptographic module runs in FIPS 140-3 mode (GODEBUG=fips140=on).
func digestFor(fips bool) DigestKind {
	if fips || fips140.Enabled() {
		return DigestSHA256
	}
	return DigestBlake2b256
}

func newHash(d DigestKind) hash.Hash {
	if d == DigestSHA256 {
		return sha256.New()
	}
	h, _ := blake2b.New256(nil) // cannot fail without a key
	return h
}
