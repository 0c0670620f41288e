package filestream

// Cache verification and foreign things: Entries lists and checks
// every entry (the progcache command's ls and verify), and with verify set
// removes the corrupt ones and moves foreign things (links, pipes, stray
// files where the cache keeps its own) into aside/, never deleting what
// the cache did not write.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/internal/fsmode"
)

// Entries lists the entries, least recently used first, reading each to
// report its kind and name, and the foreign things in entries/. With
// verify set, corrupt entries are removed and counted (as Get would) and
// foreign things are moved to aside/; entries of another configuration are
// reported and kept. Without verify nothing changes.
func (c *Cache) Entries(ctx context.Context, verify bool) ([]progcache.EntryInfo, error) {
	var err error
	if verify {
		err = c.enterWrite(ctx, "verify with fixing")
	} else {
		err = c.enter(ctx)
	}
	if err != nil {
		return nil, err
	}
	defer c.life.RUnlock()
	all, err := c.listLocked(ctx)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(all, func(a, b fileEntry) int { return a.st.mtime.Compare(b.st.mtime) })
	out := make([]progcache.EntryInfo, 0, len(all))
	for _, e := range all {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		ei := progcache.EntryInfo{Key: e.key, Size: e.st.size, Used: e.st.mtime}
		if e.foreign != "" {
			ei.Foreign, ei.Path, ei.Err = true, filepath.Join("entries", filepath.FromSlash(e.rel())), e.foreign
			if verify {
				to, err := c.moveAsideLocked(e)
				if err != nil {
					return out, err
				}
				ei.MovedTo = to
			}
			out = append(out, ei)
			continue
		}
		f, err := c.entriesD.openEntry(e.shard, e.name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by a peer
		}
		var sk progcache.Key
		var v progcache.View
		if err == nil {
			// Entries is the check of every file: it never trusts an
			// earlier verification.
			sk, v, _, err = c.readRecord(ctx, e.key, &f, nil, true)
			f.close()
		}
		if err == nil && sk != e.key {
			err = corruptf("file %s holds an entry for key %s", e.name, sk)
		}
		switch {
		case err == nil:
			ei.Kind, ei.Name, ei.CodeLen = v.Kind(), v.Name(), len(v.Code())
		case errors.Is(err, progcache.ErrUnreadable), errors.Is(err, progcache.ErrNotCache):
			ei.Err, ei.Unreadable = err.Error(), true
		case errors.Is(err, progcache.ErrCorrupt):
			ei.Err = err.Error()
			if verify {
				if res, _ := c.removeEntryLocked(e.shard, e.name, f.st); res.outcome == removed {
					c.corrupt.Add(1)
				}
			}
		default:
			return out, err
		}
		out = append(out, ei)
	}
	return out, nil
}

// moveAsideLocked renames a foreign thing in entries/ into aside/, keeping it
// whole (a link is moved, not followed), and returns its new path.
func (c *Cache) moveAsideLocked(e fileEntry) (string, error) {
	aside, err := c.root.subdir("aside", true)
	if err != nil {
		return "", fmt.Errorf("filestream: set aside %s: %w", e.rel(), err)
	}
	defer aside.close()
	to := strings.ReplaceAll(e.rel(), "/", "-") + "." + strconv.FormatInt(time.Now().UnixNano(), 10)
	from, name := c.entriesD, e.shard
	if e.name != "" {
		sd, err := c.entriesD.subdir(e.shard, false)
		if err != nil {
			return "", fmt.Errorf("filestream: set aside %s: %w", e.rel(), err)
		}
		defer sd.close()
		from, name = sd, e.name
	}
	if err := from.rename(name, aside, to); err != nil {
		return "", fmt.Errorf("filestream: set aside %s: %w", e.rel(), err)
	}
	return filepath.Join(c.dir, "aside", to), nil
}

// foreignError says what was found where the cache keeps want.
func foreignError(path string, mode fs.FileMode, want string) error {
	return fmt.Errorf("filestream: %s is %s, where the cache keeps %s; it is left alone (progcache verify --fix moves it to aside/): %w", path, fsmode.Describe(mode), want, progcache.ErrNotCache)
}

// corruptf and unreadablef are this package's errors wrapping
// progcache.ErrCorrupt and ErrUnreadable.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("filestream: "+format+": %w", append(args, progcache.ErrCorrupt)...)
}

func unreadablef(format string, args ...any) error {
	return fmt.Errorf("filestream: "+format+": %w", append(args, progcache.ErrUnreadable)...)
}
