package bolt

// Damage met while open. Every bbolt transaction runs in boltHandle.run
// (handle.go), which turns a panic or a memory fault (a file truncated
// behind bbolt's back is SIGBUS) into a *boltDamage; the operation then
// sets the file aside and moves the cache to a fresh file (repairLocked):
// Get misses, Put is retried on the fresh file, Delete, Clear and Prune
// succeed on it, Totals and Entries report the damage with an error
// wrapping progcache.ErrCorrupt. Read-only, or through a symbolic link,
// the file is not moved and the cache is broken: every later operation
// returns that error. A file locked by another process is never treated as
// damaged: Open fails with ErrLocked and leaves it untouched.
//
// A bucket where this package keeps a value (an entry or its access time
// under an entry's key, the counters in the meta bucket) is damage too, but
// of one key: bbolt refuses to Put or Delete a value over it
// (ErrIncompatibleValue), which would fail every later Put and Prune. Every
// value this package writes or deletes goes through putValue and
// deleteValue, which delete such a bucket and go on; a read finds no value
// there (a miss, or zero counters).
//
// What this cannot make safe: the check covers the file as it was opened,
// under bbolt's advisory lock. A process that ignores the lock and rewrites
// pages of an open file so that a branch page points back up its tree can
// still send bbolt's cursor round the cycle until the goroutine's stack
// overflows, which is a fatal error, not a panic. Truncations and other
// overwrites are met as faults and panics and handled as above; a handle
// dropped because a panic left bbolt's locks held keeps its memory map
// until the process exits.

import (
	"errors"
	"fmt"

	"github.com/accelkit/accelkit/progcache"
	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// putValue puts k = v in b, deleting a bucket found under k first (see the
// top of this file).
func putValue(b *bbolt.Bucket, k, v []byte) error {
	err := b.Put(k, v)
	if errors.Is(err, berrors.ErrIncompatibleValue) {
		if err := b.DeleteBucket(k); err != nil {
			return err
		}
		return b.Put(k, v)
	}
	return err
}

// deleteValue deletes k from b, value or bucket (see the top of this
// file).
func deleteValue(b *bbolt.Bucket, k []byte) error {
	err := b.Delete(k)
	if errors.Is(err, berrors.ErrIncompatibleValue) {
		return b.DeleteBucket(k)
	}
	return err
}

// errNoHandle: the file was closed (Close, or damage that broke the cache)
// while an operation waited for it.
var errNoHandle = errors.New("bolt: file not open")

// view runs fn in a read transaction on the open file and says which
// generation of it that was. It takes dbMu, not mu.
func (c *Cache) view(fn func(*bbolt.Tx) error) (uint64, error) {
	c.dbMu.RLock()
	defer c.dbMu.RUnlock()
	if c.h == nil {
		return 0, errNoHandle
	}
	return c.h.gen, c.h.run(false, fn)
}

// viewShared looks key up in the entries bucket through the shared read
// transaction (shared.go) of the open file and says which generation of it
// that was. It takes dbMu, not mu.
func (c *Cache) viewShared(key []byte, into func(v []byte)) (gen uint64, found bool, err error) {
	c.dbMu.RLock()
	defer c.dbMu.RUnlock()
	if c.h == nil {
		return 0, false, errNoHandle
	}
	found, err = c.h.getShared(key, into)
	return c.h.gen, found, err
}

// updateLocked runs fn in a write transaction, then compacts the file if
// its free pages call for it (compact.go); mu is held. Its results are
// those of settleLocked.
func (c *Cache) updateLocked(fn func(*bbolt.Tx) error) (rebuilt bool, err error) {
	c.dbMu.RLock()
	h := c.h
	if h == nil {
		err = errNoHandle
	} else {
		err = h.run(true, fn)
	}
	c.dbMu.RUnlock()
	if err == nil {
		c.maybeCompactLocked()
		return false, nil
	}
	return c.settleLocked(c.gen, err)
}

// boltRebuilt reports damage that was repaired: the file was set aside and
// the cache works on a new, empty file.
type boltRebuilt struct {
	path, aside string
	cause       error
}

func (e *boltRebuilt) Error() string {
	return fmt.Sprintf("bolt: file %s was damaged (%v); set aside as %s and rebuilt empty", e.path, e.cause, e.aside)
}

func (e *boltRebuilt) Unwrap() error { return e.cause }

// settleLocked sorts out a transaction's error err on generation gen; mu
// is held. A closed handle gives ErrClosed or the broken error; damage is
// repaired (repairLocked): rebuilt is then true and err says what happened
// (wrapping ErrCorrupt), or the cache is broken and err says why. Other
// errors are returned as they are.
func (c *Cache) settleLocked(gen uint64, err error) (rebuilt bool, _ error) {
	var dmg *boltDamage
	switch {
	case errors.Is(err, errNoHandle):
		if c.closed {
			return false, fmt.Errorf("bolt: file %s: %w", c.path, progcache.ErrClosed)
		}
		if c.broken != nil {
			return false, c.broken
		}
		return false, err
	case errors.As(err, &dmg):
		err = c.repairLocked(gen, err)
		var rb *boltRebuilt
		return errors.As(err, &rb), err
	}
	return false, err
}

// repairLocked handles damage (cause) met on generation gen; mu is held.
// It waits for the transactions in flight to end (dbMu), sets the file
// aside and opens a new one in its place, unless it may not move the file
// (read-only, a symbolic link) or cannot: then the cache is broken.
func (c *Cache) repairLocked(gen uint64, cause error) error {
	if c.closed {
		return fmt.Errorf("bolt: file %s: %w", c.path, progcache.ErrClosed)
	}
	if c.broken != nil {
		return c.broken
	}
	if gen != c.gen {
		// Another operation met the damage first and moved to a new file.
		return &boltRebuilt{path: c.path, aside: c.setAside, cause: cause}
	}
	c.dbMu.Lock()
	defer c.dbMu.Unlock()
	h := c.h
	c.h = nil
	c.flushed = c.stats // the new file counts from here
	c.stats.Corrupt++
	c.lru.Purge()
	clear(c.pending)
	why := ""
	switch {
	case c.opts.ReadOnly:
		why = "opened read-only"
	case h.viaLink:
		why = "reached through a symbolic link"
	}
	if why != "" {
		h.close()
		c.broken = fmt.Errorf("bolt: file %s is damaged (%w); %s, so it is not set aside: %w", c.path, cause, why, progcache.ErrCorrupt)
		return c.broken
	}
	aside, err := setAside(c.path, h.info, h.close)
	if err != nil {
		c.broken = fmt.Errorf("bolt: file %s is damaged (%w) and could not be set aside: %w", c.path, cause, errors.Join(err, progcache.ErrCorrupt))
		return c.broken
	}
	c.opts.Logger.Warn("bolt: file set aside and rebuilt", "path", c.path, "moved_to", aside, "reason", cause.Error())
	c.setAside = aside
	nh, es, err := c.openFileLocked(gen + 1)
	if err != nil {
		c.broken = fmt.Errorf("bolt: file %s was damaged (%w) and set aside as %s, but no new file could be opened: %w", c.path, cause, aside, errors.Join(err, progcache.ErrCorrupt))
		return c.broken
	}
	c.h, c.gen = nh, nh.gen
	c.indexLocked(es)
	return &boltRebuilt{path: c.path, aside: c.setAside, cause: cause}
}
