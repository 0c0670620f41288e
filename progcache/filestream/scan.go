package filestream

// Listing and sweeping a Cache directory: what is in entries/ (every
// committed entry, and every foreign thing where the cache keeps its own),
// the running byte and entry counts a rescan restores, and the sweeps of
// expired temp, trash, lock and counter files. Nothing here follows a link.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

// fileEntry is one thing found in entries/ by a listing: a committed entry
// (foreign empty) or something foreign where the cache keeps its own.
type fileEntry struct {
	key         progcache.Key
	shard, name string // name is "" for a foreign thing in place of a shard
	st          fileStat
	foreign     string // what is wrong, for a foreign thing
}

func (e fileEntry) rel() string {
	if e.name == "" {
		return e.shard
	}
	return e.shard + "/" + e.name
}

// isShardName reports whether n names a shard: two lowercase hex digits.
func isShardName(n string) bool {
	return len(n) == 2 && strings.Trim(n, "0123456789abcdef") == ""
}

// listLocked lists entries/: every committed entry, and every foreign thing
// where the cache keeps shard directories or entry files (a non-directory
// or link at a shard's name, a non-regular file or a file not named by a
// key of its shard). It follows no link. The caller holds life.
func (c *Cache) listLocked(ctx context.Context) ([]fileEntry, error) {
	shards, err := c.entriesD.names()
	if err != nil {
		return nil, fmt.Errorf("filestream: scan %s: %w", c.entries, err)
	}
	slices.Sort(shards)
	var out []fileEntry
	for _, sh := range shards {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		st, err := c.entriesD.lstat(sh)
		if err != nil {
			continue // removed by a peer
		}
		if !isShardName(sh) || !st.mode.IsDir() {
			out = append(out, fileEntry{shard: sh, st: st, foreign: foreignError(c.entriesD.join(sh), st.mode, "a shard directory named by two hex digits").Error()})
			continue
		}
		sd, err := c.entriesD.subdir(sh, false)
		if err != nil {
			continue // replaced or removed by a peer since the lstat
		}
		names, err := sd.names()
		if err != nil {
			sd.close()
			continue
		}
		for _, n := range names {
			st, err := sd.lstat(n)
			if err != nil {
				continue
			}
			e := fileEntry{shard: sh, name: n, st: st}
			k, kerr := progcache.ParseKey(n)
			switch {
			case !st.mode.IsRegular():
				e.foreign = foreignError(sd.join(n), st.mode, "a regular entry file").Error()
			case kerr != nil || k.String() != n || !strings.HasPrefix(n, sh):
				e.foreign = fmt.Sprintf("filestream: %s is not named by a key of shard %s: not a cache entry", sd.join(n), sh)
			default:
				e.key = k
			}
			out = append(out, e)
		}
		sd.close()
	}
	return out, nil
}

// scanLocked recomputes the byte and entry counts (entries plus temp and
// trash files) and, when sweep is set, sweeps temp files older than the
// lease, trash files older than trashLease, stale locks and counter-file
// leftovers. It returns the entries found. The caller holds life, or is
// Open.
func (c *Cache) scanLocked(sweep bool) ([]fileEntry, error) {
	es, err := c.listLocked(context.Background())
	if err != nil {
		return nil, err
	}
	var total, n int64
	for _, e := range es {
		if e.foreign == "" {
			total += e.st.size
			n++
		}
	}
	total += c.sweepDirLocked(c.tmpD, sweep, c.opts.TempLease, func(string) bool { return true })
	total += c.sweepDirLocked(c.trashD, sweep, trashLease, func(string) bool { return true })
	if sweep {
		c.sweepDirLocked(c.statsD, true, c.opts.TempLease, func(n string) bool { return strings.HasPrefix(n, ".") })
		c.sweepLockFilesLocked()
	}
	c.bytes.Store(total)
	c.count.Store(n)
	return es, nil
}

// sweepDirLocked removes the regular files of d older than lease whose names
// match (when sweep is set) and returns the bytes of the regular files
// left. Anything else in d (a link, a directory) is not the cache's: it is
// neither counted nor removed.
func (c *Cache) sweepDirLocked(d *cacheDir, sweep bool, lease time.Duration, match func(string) bool) int64 {
	if d == nil {
		return 0
	}
	names, _ := d.names()
	var total int64
	deadline := time.Now().Add(-lease)
	for _, n := range names {
		st, err := d.lstat(n)
		if err != nil || !st.mode.IsRegular() {
			continue
		}
		if sweep && match(n) && st.mtime.Before(deadline) {
			if d.remove(n) == nil {
				continue
			}
		}
		total += st.size
	}
	return total
}
