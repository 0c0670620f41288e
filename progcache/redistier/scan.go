package redistier

// Len and Clear: walking a namespace on every master.
//
// Entries carry no hash tag, so in a Redis Cluster (or a Ring) they are
// spread over every master. Len and Clear visit each master with SCAN
// MATCH on the namespace prefix, never KEYS, which would block a server
// for the whole walk: SCAN returns a few hundred keys per call, each call
// its own Redis call under Options.Timeout and the breaker. SCAN may
// return a key twice while the server resizes its table, so Len counts
// distinct keys.

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// scanCount is the COUNT hint of each SCAN: keys looked at per call, large
// enough that a walk of a million keys takes a few thousand calls, small
// enough that one call stays well under a millisecond on the server.
const scanCount = 1000

// forEachMaster calls fn on every master (Cluster), every shard (Ring), or
// the client itself (a single node or Sentinel failover client; or a
// client of another type, taken as one node), concurrently.
func (c *Cache) forEachMaster(ctx context.Context, fn func(ctx context.Context, node redis.UniversalClient) error) error {
	each := func(ctx context.Context, node *redis.Client) error { return fn(ctx, node) }
	var err error
	switch cl := c.client.(type) {
	case *redis.ClusterClient:
		err = cl.ForEachMaster(ctx, each)
	case *redis.Ring:
		err = cl.ForEachShard(ctx, each)
	default:
		return fn(ctx, c.client)
	}
	return c.unavailable("list masters", err)
}

// unavailable wraps an error that did not come through call (go-redis's
// own cluster-state lookups) in ErrUnavailable, unless it is already
// wrapped or is nil.
func (c *Cache) unavailable(what string, err error) error {
	if err == nil || isOurs(err) {
		return err
	}
	return fmt.Errorf("redistier: %s: %w: %w", what, ErrUnavailable, err)
}

// scan calls fn with each batch of keys matching pattern on node.
func (c *Cache) scan(ctx context.Context, node redis.UniversalClient, pattern string, fn func(ctx context.Context, keys []string) error) error {
	var cursor uint64
	for {
		type page struct {
			keys []string
			next uint64
		}
		p, err := callValue(ctx, c, "scan", func(ctx context.Context) (page, error) {
			keys, next, err := node.Scan(ctx, cursor, pattern, scanCount).Result()
			return page{keys, next}, err
		})
		if err != nil {
			return err
		}
		keys, next := p.keys, p.next
		if len(keys) > 0 {
			if err := fn(ctx, keys); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// Len counts the namespace's entries on every master with SCAN: a walk of
// the namespace, for administration and tests, not for a hot path. It
// returns an error wrapping ErrUnavailable when a master could not be
// walked.
func (c *Cache) Len(ctx context.Context) (int, error) {
	if err := c.enter(ctx); err != nil {
		return 0, err
	}
	var total atomic.Int64
	err := c.forEachMaster(ctx, func(ctx context.Context, node redis.UniversalClient) error {
		seen := map[string]struct{}{}
		err := c.scan(ctx, node, c.ks.entryPattern(), func(_ context.Context, keys []string) error {
			for _, k := range keys {
				seen[k] = struct{}{}
			}
			return nil
		})
		total.Add(int64(len(seen)))
		return err
	})
	if err != nil {
		return 0, err
	}
	return int(total.Load()), nil
}

// Clear deletes the namespace's entries (and the MaxBytes index) on every
// master, with SCAN and UNLINK; leases stay with their holders. Entries
// put while it runs may survive it. It returns an error wrapping
// ErrUnavailable when a master could not be cleared.
func (c *Cache) Clear(ctx context.Context) error {
	if err := c.enter(ctx); err != nil {
		return err
	}
	return c.forEachMaster(ctx, func(ctx context.Context, node redis.UniversalClient) error {
		return c.scan(ctx, node, c.ks.dataPattern(), func(ctx context.Context, keys []string) error {
			// One UNLINK per key: on a cluster node, keys of one batch
			// lie in different slots, which one multi-key command may not
			// span.
			return c.call(ctx, "clear", func(ctx context.Context) error {
				pipe := node.Pipeline()
				for _, k := range keys {
					pipe.Unlink(ctx, k)
				}
				_, err := pipe.Exec(ctx)
				return err
			})
		})
	})
}
