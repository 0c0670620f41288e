package progcache

// Digests. SHA-256 is the default for keys (and the hash of keyed-hash
// record MACs; AES-GMAC, gmac.go, is the default record MAC): the standard
// library runs it on the CPU's SHA instructions (SHA-NI on x86, the ARMv8
// crypto extensions on Arm), where it measured 2.9x faster than x/crypto's
// blake2b-256 (56 KiB: 36 us against 101 us), and it is FIPS 140-3
// approved, so one default serves every process. blake2b-256 stays as an
// option for callers whose CPUs lack SHA instructions or whose keys must
// match a blake2b-keyed peer.

import (
	"crypto/fips140"
	"crypto/sha256"
	"fmt"
	"hash"
	"strconv"

	"golang.org/x/crypto/blake2b"
)

// DigestKind says which hash function makes a key or a record MAC. The zero
// value means the default, DigestSHA256.
type DigestKind uint8

const (
	// DigestBlake2b256 is blake2b with a 32-byte output (and keyed
	// blake2b-256 for record MACs). It is not FIPS 140-3 approved: asking
	// for it while the process runs in FIPS mode (GODEBUG=fips140=on or
	// only) is an error.
	DigestBlake2b256 DigestKind = 1
	// DigestSHA256 is SHA-256 (and HMAC-SHA-256 for record MACs), the
	// default.
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

// resolve returns the digest d selects (the zero value selects SHA-256).
// It refuses an unknown kind, and blake2b-256 in FIPS 140-3 mode, which
// would otherwise have to be replaced silently by another hash. field
// names the option for the error, which wraps kind.
func (d DigestKind) resolve(field string, kind error) (DigestKind, error) {
	switch d {
	case 0, DigestSHA256:
		return DigestSHA256, nil
	case DigestBlake2b256:
		if fips140.Enabled() {
			return 0, fmt.Errorf("progcache: %s is %v, which is not FIPS 140-3 approved, and this process runs in FIPS mode (GODEBUG=fips140): use DigestSHA256, the default: %w", field, d, kind)
		}
		return d, nil
	}
	return 0, fmt.Errorf("progcache: %s is %v: want DigestSHA256 (the default, also the zero value) or DigestBlake2b256: %w", field, d, kind)
}

func newHash(d DigestKind) hash.Hash {
	if d == DigestBlake2b256 {
		h, _ := blake2b.New256(nil) // cannot fail without a key
		return h
	}
	return sha256.New()
}
