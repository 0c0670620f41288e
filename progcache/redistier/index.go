package redistier

// The MaxBytes index: a namespace byte budget that the cache enforces
// itself, in least-recently-used order.
//
// Redis's own maxmemory bounds a whole server; MaxBytes bounds one
// namespace, for a server shared with other data or deployments. Four
// keys in one slot (keyspace.go) hold, per entry, its record size and a
// use tick: a Put records both and, in the same script, pops the least
// recently used entries until the sum fits, returning them; the cache then
// deletes those entries (each in its own slot, so not from the script). A
// Get hit advances its entry's tick, pipelined with the GET.
//
// The index follows the entries without a transaction across them, so it
// is exact for one writer and close for many: a Put racing an eviction of
// the same key can leave an index member whose entry is gone (its bytes
// count until it is popped), and an entry that expired (TTL) or that
// Redis evicted keeps its member until then too. An eviction never pops
// the entry just put; when that is the only member left, the sum is
// reset to its size, which repairs any drift. Prefetch does not advance
// ticks: a prefetched entry is then used from the local tier.

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// index keeps a Cache within Options.MaxBytes.
//
// Locking: none of its own; it holds only the Cache, whose methods it
// calls, and Redis serialises the scripts.
type index struct {
	c *Cache
}

// admitScript records ARGV[1]'s size ARGV[2] and a new tick, then pops
// least recently used members while the sum is over ARGV[3], and returns
// them. KEYS: lru, sizes, bytes, tick.
var admitScript = redis.NewScript(`
local old = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local size = tonumber(ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], size)
local total = redis.call('INCRBY', KEYS[3], size - old)
redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[4]), ARGV[1])
local budget = tonumber(ARGV[3])
local victims = {}
while total > budget do
	local m = redis.call('ZPOPMIN', KEYS[1])
	if #m == 0 then break end
	if m[1] == ARGV[1] then
		redis.call('ZADD', KEYS[1], m[2], m[1])
		redis.call('SET', KEYS[3], size)
		break
	end
	local s = tonumber(redis.call('HGET', KEYS[2], m[1]) or '0')
	redis.call('HDEL', KEYS[2], m[1])
	total = redis.call('DECRBY', KEYS[3], s)
	victims[#victims + 1] = m[1]
end
return victims`)

// touchScript advances ARGV[1]'s tick if it is indexed. KEYS: lru, tick.
var touchScript = redis.NewScript(`
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
	redis.call('ZADD', KEYS[1], 'XX', redis.call('INCR', KEYS[2]), ARGV[1])
end
return 0`)

// forgetScript drops ARGV[1] from the index. KEYS: lru, sizes, bytes.
var forgetScript = redis.NewScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
local s = redis.call('HGET', KEYS[2], ARGV[1])
if s then
	redis.call('HDEL', KEYS[2], ARGV[1])
	redis.call('DECRBY', KEYS[3], s)
end
return 0`)

// getTouch reads key (getEntry) and advances m's tick in one pipeline. The tick is
// best effort: its failure is counted in Errors and does not fail the
// lookup. It runs inside Cache.call.
func (x *index) getTouch(ctx context.Context, key, m string) ([]byte, error) {
	ks := x.c.ks
	pipe := x.c.client.Pipeline()
	get := x.c.getEntry(ctx, pipe, key)
	touch := pipe.EvalSha(ctx, touchScript.Hash(), []string{ks.lru, ks.tick}, m)
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	if err := touch.Err(); err != nil {
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			// First use on this server (or after SCRIPT FLUSH): EVAL it,
			// which also caches it there for the next EVALSHA.
			err = touchScript.Run(ctx, x.c.client, []string{ks.lru, ks.tick}, m).Err()
		}
		if err != nil && get.Err() == nil {
			x.c.n.errors.Add(1)
		}
	}
	return entryBytes(get)
}

// admit records m's size after a Put and evicts what no longer fits,
// counting the evictions. A failure is counted by call; the entry is then
// stored but outside the budget until its next Put.
func (x *index) admit(ctx context.Context, m string, size int64) {
	c := x.c
	victims, err := callValue(ctx, c, "index put", func(ctx context.Context) ([]string, error) {
		return admitScript.Run(ctx, c.client, []string{c.ks.lru, c.ks.sizes, c.ks.bytes, c.ks.tick}, m, size, c.opts.MaxBytes).StringSlice()
	})
	if err != nil || len(victims) == 0 {
		return
	}
	// Delete the victims' entries: one DEL each, since they live in
	// different slots. A victim whose DEL fails stays stored, outside the
	// index: Redis's maxmemory or TTL, or a later Put, deals with it.
	err = c.call(ctx, "evict", func(ctx context.Context) error {
		pipe := c.client.Pipeline()
		for _, v := range victims {
			pipe.Del(ctx, c.ks.entryOfMember(v))
		}
		_, err := pipe.Exec(ctx)
		return err
	})
	if err == nil {
		c.n.evictions.Add(int64(len(victims)))
	}
}

// forget drops m from the index after its entry was deleted. A failure is
// counted by call; the member then goes when it is popped.
func (x *index) forget(ctx context.Context, m string) {
	c := x.c
	_ = c.call(ctx, "index delete", func(ctx context.Context) error {
		return forgetScript.Run(ctx, c.client, []string{c.ks.lru, c.ks.sizes, c.ks.bytes}, m).Err()
	})
}
