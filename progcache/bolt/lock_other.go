//go:build solaris || aix || android || plan9

package bolt

import (
	"os"
	"time"
)

// Here bbolt locks with fcntl record locks, which a process holds once per
// file, not per descriptor: Open checks the file before bolt.Open
// without a lock of its own, and renames a damaged file only after closing
// it and finding that the path still names it.

const boltOpenFlags = 0

const boltRenameWhileOpen = false

func lockBoltFile(*os.File, bool, time.Duration) error { return nil }

func handToBolt(*os.File) {}
