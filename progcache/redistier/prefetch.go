package redistier

// Prefetch: many keys in few round trips, for a warm start.
//
// Each batch of PrefetchBatch keys goes as one pipeline of single-key
// reads (getEntry: GETRANGE), not one MGET: in a Redis Cluster an MGET may not span slots, and
// the cluster client splits a pipeline by node on its own, sending each
// master its keys in one round trip (the masters in parallel), whatever
// the slots. On a single node a pipeline of GETs costs about what an MGET
// does: one round trip, and the same bytes.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/tiered"
)

var _ tiered.Prefetcher = (*Cache)(nil)

// Prefetch looks keys up in batches of Options.PrefetchBatch, one round
// trip each, and calls fn, on the calling goroutine and in the order of
// keys, with each object found (the caller's to keep and modify, as Get
// returns it). A missing, corrupt or unreadable entry is skipped
// (counted; a corrupt one is deleted as Get deletes it), and so is a value
// that cannot be an entry (over MaxEntryBytes, or not a string): the other
// keys of its batch are still delivered. It returns the number of objects
// delivered, and stops at fn's first error, returned as is, or at the
// first batch that Redis could not serve (an error wrapping
// ErrUnavailable). Prefetch counts in Stats.Prefetched and
// PrefetchMisses, not in Hits and Misses.
func (c *Cache) Prefetch(ctx context.Context, keys []progcache.Key, fn func(progcache.Key, progcache.Object) error) (int, error) {
	if err := c.enter(ctx); err != nil {
		return 0, err
	}
	delivered := 0
	names := make([]string, 0, min(len(keys), c.opts.PrefetchBatch))
	for batch := range slices.Chunk(keys, c.opts.PrefetchBatch) {
		names = names[:0]
		for _, k := range batch {
			names = append(names, c.ks.entry(k))
		}
		vals, err := callValue(ctx, c, "prefetch", func(ctx context.Context) ([]*redis.StringCmd, error) {
			return c.getAll(ctx, names)
		})
		if err != nil {
			return delivered, fmt.Errorf("%w (after %d of %d keys)", err, delivered, len(keys))
		}
		for i, k := range batch {
			var b []byte
			var err error
			if vals == nil {
				// The reply guard refused a reply of the pipeline, which
				// ended its connection: go-redis then marks every command
				// of the pipeline failed, read or not. Only a server that
				// breaks the protocol (getEntry asks for at most an
				// entry's bytes) gets here: ask for each key on its own.
				b, err = c.lookupOne(ctx, names[i])
			} else {
				b, err = entryBytes(vals[i])
			}
			if bad := c.classify(b, err); bad != usable {
				c.n.prefetchMisses.Add(1)
				c.dropUnusable(ctx, k, bad)
				continue
			}
			if err != nil {
				c.n.prefetchMisses.Add(1)
				continue
			}
			stored, obj, err := progcache.DecodeRecord(b, c.opts.Record)
			if !c.judge(ctx, k, b, stored, err) {
				c.n.prefetchMisses.Add(1)
				continue
			}
			c.n.prefetched.Add(1) // obj.Code aliases the reply: the caller's (replyBytes)
			delivered++
			if err := fn(k, obj); err != nil {
				return delivered, err
			}
		}
	}
	return delivered, nil
}

// lookupOne reads key on its own (getEntry) for Prefetch. A failure is
// counted by call, and returned for classify; a refused or wrong-typed
// value is returned as its error, not counted as a failure.
func (c *Cache) lookupOne(ctx context.Context, key string) ([]byte, error) {
	type reply struct {
		b   []byte
		err error // a refused or wrong-typed value: an answer, for classify
	}
	r, err := callValue(ctx, c, "prefetch", func(ctx context.Context) (reply, error) {
		b, err := entryBytes(c.getEntry(ctx, c.client, key))
		if c.classify(b, err) != usable {
			return reply{b, err}, nil
		}
		return reply{b: b}, err
	})
	if err != nil {
		return nil, err
	}
	return r.b, r.err
}

// getAll reads names (getEntry) in one pipeline. Each command keeps its
// own result: redis.Nil for a missing key, a WRONGTYPE error for a value
// that is not a string. It returns (nil, nil) when the reply guard
// refused a reply, and otherwise the first error that says the server
// could not serve.
func (c *Cache) getAll(ctx context.Context, names []string) ([]*redis.StringCmd, error) {
	pipe := c.client.Pipeline()
	cmds := make([]*redis.StringCmd, len(names))
	for i, n := range names {
		cmds[i] = c.getEntry(ctx, pipe, n)
	}
	_, _ = pipe.Exec(ctx) // it returns the first error, redis.Nil included: look at each
	for _, cmd := range cmds {
		err := cmd.Err()
		switch {
		case errors.Is(err, ErrReplyTooLarge):
			return nil, nil
		case err != nil && !errors.Is(err, redis.Nil) && !redis.HasErrorPrefix(err, "WRONGTYPE"):
			return nil, err
		}
	}
	return cmds, nil
}
