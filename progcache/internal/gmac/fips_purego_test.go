//go:build purego

package gmac

// fipsCapable: Go's FIPS 140-3 mode refuses to start a purego build.
const fipsCapable = false
