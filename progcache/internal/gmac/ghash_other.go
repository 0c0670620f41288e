//go:build !amd64 || purego

package gmac

// table is empty here: without the fast hash, crypto/cipher's GCM
// computes every tag and New never makes one.
type table struct{}

func hasFastGHASH() bool { return false }

func (*table) init(*[16]byte) { panic("gmac: no fast GHASH on this platform") }

func (*table) update(acc *[16]byte, dst, p []byte) {
	panic("gmac: no fast GHASH on this platform")
}
