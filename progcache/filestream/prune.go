package filestream

// Cache eviction: pruning to a byte target, and the identity-checked
// removal that pruning, Clear, Delete of a corrupt entry, lock breaking and
// verification share. A victim is renamed into trash/ and its identity
// (device, inode, size, mtime) compared with the one chosen; if a peer
// replaced the entry in between, the newer file is linked back to its name
// (unless an even newer one is there) instead of being deleted, and if a
// peer removed it first, its bytes are gone all the same and count as
// freed.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/accelkit/accelkit/progcache"
)

// Prune evicts least recently used entries until entries plus temp and
// trash files fit in maxBytes (0: only sweep), and returns how many
// entries it evicted. It is what Put runs when the cap is passed; the CLI
// runs it with --max-size.
func (c *Cache) Prune(ctx context.Context, maxBytes int64) (int, error) {
	if maxBytes < 0 {
		return 0, fmt.Errorf("filestream: prune to %d bytes: want 0 or more: %w", maxBytes, progcache.ErrInvalidConfig)
	}
	if err := c.enterWrite(ctx, "prune"); err != nil {
		return 0, err
	}
	defer c.life.RUnlock()
	return c.pruneLocked(ctx, maxBytes, "")
}

// pruneLocked is Prune; keep is the entryRel of an entry that must not be
// chosen (the entry the calling Put just committed). The caller holds
// life.
func (c *Cache) pruneLocked(ctx context.Context, maxBytes int64, keep string) (int, error) {
	c.pruneMu.Lock()
	defer c.pruneMu.Unlock()
	es, err := c.scanLocked(true)
	if err != nil {
		return 0, err
	}
	total := c.bytes.Load()
	if maxBytes == 0 || total <= maxBytes {
		return 0, nil
	}
	es = slices.DeleteFunc(es, func(e fileEntry) bool { return e.foreign != "" })
	slices.SortFunc(es, func(a, b fileEntry) int { return a.st.mtime.Compare(b.st.mtime) })
	evicted := 0
	for _, e := range es {
		if total <= maxBytes {
			break
		}
		if e.rel() == keep {
			continue
		}
		if err := ctx.Err(); err != nil {
			return evicted, err
		}
		if c.hooks.beforeVictimRename != nil {
			c.hooks.beforeVictimRename(c.path(e.key))
		}
		c.verified.forget(e.key)
		res, _ := c.removeEntryLocked(e.shard, e.name, e.st)
		switch res.outcome {
		case removed:
			evicted++
			c.evictions.Add(1)
			c.count.Add(-1)
			total -= e.st.size
		case gone:
			// A peer removed it first: its bytes are freed all the same.
			c.count.Add(-1)
			total -= e.st.size
		case replaced:
			// A peer's newer entry took the name back: that is what
			// occupies the space now.
			total += res.size - e.st.size
		}
	}
	c.bytes.Store(total)
	return evicted, nil
}

type outcome int

const (
	removed  outcome = iota // the chosen file was removed
	gone                    // it was already gone (a peer removed it)
	replaced                // a peer's newer file holds the name; it was kept
	kept                    // it could not be moved (an error); nothing changed
)

type removal struct {
	outcome outcome
	size    int64 // for replaced: the newer file's size
}

var trashSeq atomic.Uint64

// removeEntryLocked removes entries/shard/name if it is still the file
// chosen. The caller holds life.
func (c *Cache) removeEntryLocked(shard, name string, chosen fileStat) (removal, error) {
	sd, err := c.entriesD.subdir(shard, false)
	if errors.Is(err, fs.ErrNotExist) {
		return removal{outcome: gone}, nil
	}
	if err != nil {
		return removal{outcome: kept}, err
	}
	defer sd.close()
	return c.removeIfSameLocked(sd, name, chosen)
}

// removeIfSameLocked removes name in d only if it is still the file chosen
// (same identity, size and mtime). It renames the file into trash/ first,
// so the comparison and the removal see one file; a mismatch means a peer
// replaced it after it was chosen, and that newer file is linked back to
// its name unless an even newer one has taken the name already. The
// caller holds life.
func (c *Cache) removeIfSameLocked(d *cacheDir, name string, chosen fileStat) (removal, error) {
	t := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(trashSeq.Add(1), 10) + "-" + name
	if err := d.rename(name, c.trashD, t); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return removal{outcome: gone}, nil
		}
		return removal{outcome: kept}, err
	}
	st, err := c.trashD.lstat(t)
	// A trash file left by a failed remove is swept by the next scan once
	// older than trashLease.
	if err == nil && st.same(chosen) {
		_ = c.trashD.remove(t)
		return removal{outcome: removed}, nil
	}
	// Not the file chosen: a peer committed a newer one. Put it back
	// unless a newer one still has taken the name (the link fails then).
	res := removal{outcome: gone}
	if err == nil && c.trashD.link(t, d, name) == nil {
		res = removal{outcome: replaced, size: st.size}
	}
	_ = c.trashD.remove(t)
	return res, nil
}
