package filestream

// Persistent counters of Cache sessions.
//
// Each Cache adds its session's counts as one new file in stats/ when
// it closes (no shared file, so no lock), named <pid>-<ns>-<seq>, and folds
// the files into one when there are more than statsFold. Folding claims
// each file by renaming it to a private dot-name first, so two folders never
// count a file twice; a crash mid-fold loses those counts, never doubles
// them, and its dot-name leftovers are swept after the temp lease. Only
// regular files with a counters name and a counters size are read or
// claimed: anything else in stats/ is not the cache's and is left alone.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/internal/counters"
)

const statsFold = 32

var statsSeq atomic.Uint64

func statsName(prefix string) string {
	return prefix + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 10) + "-" + strconv.FormatUint(statsSeq.Add(1), 10)
}

// isCountersName reports whether n is a committed counters file's name:
// three dash-separated decimal numbers.
func isCountersName(n string) bool {
	parts := strings.Split(n, "-")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// readCountersFileLocked reads one counters file; ok is false for anything
// that is not one.
func (c *Cache) readCountersFileLocked(name string) (counters.Set, bool) {
	b, err := c.statsD.readSmall(name, counters.Size)
	if err != nil {
		return counters.Set{}, false
	}
	return counters.Parse(b)
}

// writeCountersLocked commits s as a new counters file. The caller holds
// life.
func (c *Cache) writeCountersLocked(s counters.Set) error {
	tmp := statsName(".new-")
	f, err := c.statsD.create(tmp)
	if err != nil {
		return fmt.Errorf("filestream: save counters: %w", err)
	}
	_, err = f.Write(s.Append(nil))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = c.statsD.rename(tmp, c.statsD, statsName(""))
	}
	if err != nil {
		_ = c.statsD.remove(tmp) // a dot-name is never counted, and is swept past TempLease
		return fmt.Errorf("filestream: save counters: %w", err)
	}
	return nil
}

// saveCountersLocked writes this session's counters and folds the files when
// there are many. The caller holds life exclusively (Close).
func (c *Cache) saveCountersLocked() error {
	if s := counters.Of(c.sessionCounters()); s != (counters.Set{}) {
		if err := c.writeCountersLocked(s); err != nil {
			return err
		}
	}
	names, _ := c.statsD.names()
	var ours []string
	for _, n := range names {
		if isCountersName(n) {
			ours = append(ours, n)
		}
	}
	if len(ours) <= statsFold {
		return nil
	}
	var sum counters.Set
	var claimed []string
	for _, n := range ours {
		st, err := c.statsD.lstat(n)
		if err != nil || !st.mode.IsRegular() {
			continue
		}
		mine := statsName(".fold-")
		if c.statsD.rename(n, c.statsD, mine) != nil {
			continue // claimed by another folder
		}
		claimed = append(claimed, mine)
		if s, ok := c.readCountersFileLocked(mine); ok {
			sum.Add(s, counters.Set{})
		}
	}
	err := c.writeCountersLocked(sum)
	if err == nil {
		for _, p := range claimed {
			_ = c.statsD.remove(p) // a dot-name is never counted, and is swept past TempLease
		}
	}
	return err
}

// Totals returns the counters of every Cache session that closed on
// this directory plus this one's, and the entries and bytes of a fresh
// scan.
func (c *Cache) Totals(ctx context.Context) (progcache.Stats, error) {
	if err := c.enter(ctx); err != nil {
		return progcache.Stats{}, err
	}
	defer c.life.RUnlock()
	sum := counters.Of(c.sessionCounters())
	if c.statsD != nil {
		names, _ := c.statsD.names()
		for _, n := range names {
			if !isCountersName(n) {
				continue
			}
			if s, ok := c.readCountersFileLocked(n); ok {
				sum.Add(s, counters.Set{})
			}
		}
	}
	t := sum.Into(progcache.Stats{})
	if _, err := c.scanLocked(false); err != nil {
		return t, err
	}
	t.Entries, t.Bytes, t.MaxBytes = c.count.Load(), c.bytes.Load(), c.opts.MaxBytes
	return t, nil
}
