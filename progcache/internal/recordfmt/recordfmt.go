// Package recordfmt is the fixed header of progcache's entry records (see
// progcache's record.go for the whole layout), shared by the record codec
// and by the bolt package's damage check, which recognises records of
// this package in the raw pages of a damaged file.
package recordfmt

const (
	// Magic opens every record.
	Magic = "AKPC"
	// KeyIDSize is the length of the MAC key id that follows the magic,
	// the version byte and the check-kind byte.
	KeyIDSize = 8
	// KeyAt is where the header holds the key the record was stored under
	// (progcache.KeySize bytes), which ends the header.
	KeyAt = 4 + 1 + 1 + KeyIDSize // magic, version, check kind, key id
)
