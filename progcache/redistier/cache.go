package redistier

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/accelkit/accelkit/progcache"
	"github.com/redis/go-redis/v9"
)

var (
	_ progcache.Cache   = (*Cache)(nil)
	_ progcache.Viewer  = (*Cache)(nil)
	_ progcache.Grouped = (*Cache)(nil)
)

// Cache is a progcache.Cache on Redis, shared by every process and
// machine that opens the same namespace. It is safe for concurrent use.
//
// Entries are progcache records (progcache.EncodeRecord), sealed with the
// MAC key of Options.Record or, on a trusted network, a CRC-32C. A record
// that fails its check is a miss, counted in Corrupt, and deleted if it is
// still the value that was read; one sealed under another configuration
// is a miss counted in Unreadable and kept.
//
// Redis failing is never the caller's failure on a lookup: Get and View
// report a call that failed, timed out or was refused by the breaker as a
// miss (counted), and return an error only for the caller's own context
// and after Close. Put, Delete, Len, Clear, Prefetch, Acquire and Release
// return an error wrapping ErrUnavailable, so a caller such as a tiered
// cache can count the failure and go on.
//
// Close stops the heartbeats of the leases still held and releases them;
// it does not close the client, which stays the caller's. A hook added to
// the client (AddHook) must not keep a command past its return: Put
// reuses the record it passed to SET, and Get hands the bytes of a GET's
// reply to its caller.
//
// A Cache is safe for concurrent use by multiple goroutines.
type Cache struct {
	// Locking: mu guards closed and leases, so that Close and Acquire agree on
	// which leases Close must release; nothing talks to Redis under mu. The
	// counters and window are atomics, the breaker has its own lock, group
	// has its own and is never held with mu. Everything else is set in New
	// and only read.

	client  redis.UniversalClient
	opts    Options // defaults filled in
	ks      keyspace
	inline  bool // the client honours deadlines: call runs ops in place
	index   *index
	breaker *breaker
	window  atomic.Pointer[opWindow] // the calls' shared deadline (opctx.go)
	n       counters
	group   progcache.Group
	guarded error // what New could not put the reply guard on (guard.go)

	mu     sync.Mutex
	closed atomic.Bool // written under mu, read without it
	leases map[*Lease]struct{}
}

// New returns a Cache on client, which may be a single node, a Sentinel
// failover client or a Cluster client, with the caller's TLS and ACL
// settings; New sends it nothing. Options must carry a MAC key, or say
// that the network is trusted (TrustedNetworkNoMAC); an option out of
// range is an error wrapping progcache.ErrInvalidConfig that names it.
func New(client redis.UniversalClient, opts Options) (*Cache, error) {
	if client == nil {
		return nil, fmt.Errorf("redistier: nil client: want a redis.UniversalClient (redis.NewClient, NewFailoverClient, NewClusterClient or NewUniversalClient): %w", progcache.ErrInvalidConfig)
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	c := &Cache{
		client:  client,
		opts:    opts,
		ks:      newKeyspace(opts.Namespace),
		inline:  honoursDeadlines(client),
		breaker: newBreaker(opts.BreakerFailures, opts.BreakerCooldown),
		leases:  map[*Lease]struct{}{},
	}
	if opts.MaxBytes > 0 {
		c.index = &index{c: c}
	}
	c.guarded = guardClient(client, max(opts.MaxEntryBytes+guardSlack, MinReplyLimit))
	return c, nil
}

// Guarded reports whether every connection of the client reads replies
// through the reply guard, which refuses a reply that declares
// more than about max(Options.MaxEntryBytes, MinReplyLimit) bytes before
// go-redis allocates it: nil when New could hook the client before it
// opened a connection, else an error saying what reads unguarded (a client
// of a type New cannot hook, or connections opened before New). Unguarded,
// a hostile or broken server can make the process allocate what it
// declares, and a planted value over the entry cap costs a lookup its
// Timeout. For a ClusterClient it is nil: nodes it met before New (at its
// first command) cannot be seen without asking the server, so make the
// cache before the first command.
func (c *Cache) Guarded() error { return c.guarded }

// Namespace returns the cache's namespace (DefaultNamespace when Options
// named none).
func (c *Cache) Namespace() string { return c.opts.Namespace }

// Group returns the Group that progcache.GetOrCompile uses for this cache:
// it makes concurrent misses in this process compile once. Across
// processes, a lease (Acquire) does.
func (c *Cache) Group() *progcache.Group { return &c.group }

// enter checks the caller's context and that the cache is open.
func (c *Cache) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.closed.Load() {
		return fmt.Errorf("redistier: cache %q: %w", c.opts.Namespace, progcache.ErrClosed)
	}
	return nil
}

// Get returns the object stored under k, the caller's to keep and
// modify (its Code is the reply's own memory, not shared). A miss, a
// corrupt or unreadable entry, and a lookup that Redis could not serve are
// all (Object{}, false, nil), each counted; the error is the caller's
// context error or ErrClosed.
func (c *Cache) Get(ctx context.Context, k progcache.Key) (progcache.Object, bool, error) {
	b, err := c.lookup(ctx, k)
	if err != nil || b == nil {
		return progcache.Object{}, false, err
	}
	stored, obj, err := progcache.DecodeRecord(b, c.opts.Record)
	if !c.accept(ctx, k, b, stored, err) {
		return progcache.Object{}, false, nil
	}
	// Code aliases the reply, which is already memory of the caller's own
	// (replyBytes): no copy, as a raw GET makes none.
	return obj, true, nil
}

// replyBytes returns the value of a GET's reply as bytes, without a
// copy. go-redis (v9.23.0, proto.Reader.readStringReply) reads each bulk
// reply into a fresh allocation and hands it over as a string's bytes;
// with client-side caching, a hit parses a fresh copy of the cached reply
// and a miss parses a copy of what it caches. Once cmd is dropped nothing
// else refers to those bytes, so they may be handed to the caller to keep
// and to modify. (TestGetReturnsOwnMemory would catch a go-redis that
// shared them.) A copy here cost about a quarter of a 64 KiB GET on
// loopback: the allocation of a large object, and the copy.
func replyBytes(cmd *redis.StringCmd) ([]byte, error) {
	return cmd.Bytes()
}

// getEntry queues, on p, the read of an entry's value: GETRANGE of its
// first MaxEntryBytes+1 bytes rather than GET, so that a value over the
// cap (planted: a Put never stores one) costs the server, the wire and
// the Timeout no more than an entry does, and is known by its length.
// Redis copies a GET's whole value into its reply buffers before the
// first byte goes out: 256 MiB took longer than the Timeout, on every
// lookup.
func (c *Cache) getEntry(ctx context.Context, p redis.Cmdable, key string) *redis.StringCmd {
	return p.GetRange(ctx, key, 0, c.opts.MaxEntryBytes)
}

// entryBytes returns what getEntry read, as replyBytes does, with
// redis.Nil for a missing key: GETRANGE answers "" for one, and no record
// is empty.
func entryBytes(cmd *redis.StringCmd) ([]byte, error) {
	b, err := replyBytes(cmd)
	if err == nil && len(b) == 0 {
		return nil, redis.Nil
	}
	return b, err
}

// View looks k up as Get does and, on a hit, lends the stored object to
// fn without copying it (progcache.Viewer). The View is valid only until
// fn returns.
func (c *Cache) View(ctx context.Context, k progcache.Key, fn func(progcache.View) error) (bool, error) {
	b, err := c.lookup(ctx, k)
	if err != nil || b == nil {
		return false, err
	}
	stored, v, err := progcache.ViewRecord(b, c.opts.Record)
	if !c.accept(ctx, k, b, stored, err) {
		return false, nil
	}
	return true, fn(v)
}

// lookup fetches k's record. A missing key, a value that cannot be an
// entry and a call that failed are (nil, nil), counted as misses; the
// error is the caller's context error or ErrClosed.
func (c *Cache) lookup(ctx context.Context, k progcache.Key) ([]byte, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	key := c.ks.entry(k)
	type reply struct {
		b   []byte
		bad unusable
	}
	r, err := callValue(ctx, c, "get", func(ctx context.Context) (reply, error) {
		var b []byte
		var err error
		if c.index != nil {
			b, err = c.index.getTouch(ctx, key, member(k))
		} else {
			b, err = entryBytes(c.getEntry(ctx, c.client, key))
		}
		if bad := c.classify(b, err); bad != usable {
			// An answer, if one that cannot be an entry: not a failure
			// of the server, for the breaker or the counters.
			return reply{bad: bad}, nil
		}
		return reply{b: b}, err
	})
	switch {
	case err == nil && r.bad != usable:
		c.n.misses.Add(1)
		c.dropUnusable(ctx, k, r.bad)
		return nil, nil
	case err == nil:
		return r.b, nil
	case ctx.Err() != nil:
		return nil, err
	}
	// Absent, or Redis could not say (counted by call): a miss either way.
	c.n.misses.Add(1)
	return nil, nil
}

// unusable says why a GET's answer cannot be an entry.
type unusable int

const (
	usable    unusable = iota
	oversized          // over MaxEntryBytes: refused by the reply guard, or read
	wrongType          // not a string (WRONGTYPE)
)

// classify judges what a GET of an entry returned: a value over
// MaxEntryBytes (refused by the reply guard before it was read, or read
// on a connection the guard does not cover) or a value of another type
// (WRONGTYPE) is unusable.
func (c *Cache) classify(b []byte, err error) unusable {
	switch {
	case errors.Is(err, ErrReplyTooLarge), err == nil && int64(len(b)) > c.opts.MaxEntryBytes:
		return oversized
	case err != nil && redis.HasErrorPrefix(err, "WRONGTYPE"):
		return wrongType
	}
	return usable
}

// dropUnusableScript deletes KEYS[1] if it holds something no writer of
// entries stores there: a value of another type than string, or a string
// over ARGV[1] bytes. A legitimate Put that replaced it since it was read
// is a string within the cap, and stays. UNLINK, not DEL: such a value
// may be hundreds of MiB, and DEL would free it before replying, stalling
// the server and this call past its timeout.
var dropUnusableScript = redis.NewScript(`
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return 0 end
if t ~= 'string' or redis.call('STRLEN', KEYS[1]) > tonumber(ARGV[1]) then
	return redis.call('UNLINK', KEYS[1])
end
return 0`)

// dropUnusable counts a value under k's name that cannot be an entry as
// corrupt (and oversized), and deletes it if it still cannot be one. A
// failure is counted by call and otherwise ignored.
func (c *Cache) dropUnusable(ctx context.Context, k progcache.Key, why unusable) {
	c.n.corrupt.Add(1)
	if why == oversized {
		c.n.oversized.Add(1)
	}
	c.deleteIf(ctx, k, "delete unusable entry", dropUnusableScript, c.opts.MaxEntryBytes)
}

// deleteIf runs script, a compare-and-delete of k's entry, and when it
// deleted the entry counts it and drops k from the index. A failure is
// counted by call and otherwise ignored.
func (c *Cache) deleteIf(ctx context.Context, k progcache.Key, what string, script *redis.Script, args ...any) {
	n, err := callValue(ctx, c, what, func(ctx context.Context) (int64, error) {
		return script.Run(ctx, c.client, []string{c.ks.entry(k)}, args...).Int64()
	})
	if err != nil || n == 0 {
		return
	}
	c.n.corruptDeleted.Add(1)
	if c.index != nil {
		c.index.forget(ctx, member(k))
	}
}

// accept judges the record b fetched for k, which decoded to stored with
// err (judge), and counts a hit or a miss.
func (c *Cache) accept(ctx context.Context, k progcache.Key, b []byte, stored progcache.Key, err error) bool {
	if c.judge(ctx, k, b, stored, err) {
		c.n.hits.Add(1)
		return true
	}
	c.n.misses.Add(1)
	return false
}

// judge reports whether the record b fetched for k, which decoded to
// stored with err, is usable. One that is not is counted as unreadable
// (kept) or corrupt (deleted, when it is still the value read). A record
// stored under another key's name is corrupt: it was copied or planted
// there.
func (c *Cache) judge(ctx context.Context, k progcache.Key, b []byte, stored progcache.Key, err error) bool {
	switch {
	case err == nil && stored == k:
		return true
	case errors.Is(err, progcache.ErrUnreadable):
		c.n.unreadable.Add(1)
	default:
		c.n.corrupt.Add(1)
		c.deleteCorrupt(ctx, k, b)
	}
	return false
}

// deleteIfEqual deletes KEYS[1] if its value's SHA-1 is ARGV[1], so a
// corrupt entry goes but one that a peer rewrote since it was read stays.
// SHA-1 stands for the value here, not against an adversary: whoever can
// write the key can delete it anyway.
var deleteIfEqual = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and redis.sha1hex(v) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0`)

// deleteCorrupt deletes k's entry if it still holds b. A failure is
// counted by call and otherwise ignored: the entry stays a miss.
func (c *Cache) deleteCorrupt(ctx context.Context, k progcache.Key, b []byte) {
	sum := sha1.Sum(b)
	c.deleteIf(ctx, k, "delete corrupt entry", deleteIfEqual, hex.EncodeToString(sum[:]))
}

// Put stores obj under k, replacing what was there, with Options.TTL. A
// record over MaxEntryBytes (or MaxBytes) is refused with an error
// wrapping progcache.ErrTooLarge and counted; a Put that Redis could not
// serve returns an error wrapping ErrUnavailable, counted in PutErrors.
func (c *Cache) Put(ctx context.Context, k progcache.Key, obj progcache.Object) error {
	if err := c.enter(ctx); err != nil {
		return err
	}
	size := progcache.RecordSize(obj, c.opts.Record)
	if size > c.opts.MaxEntryBytes {
		c.n.tooLarge.Add(1)
		return fmt.Errorf("redistier: put %s: record of %d bytes is over the %d-byte entry cap (Options.MaxEntryBytes, or MaxBytes when smaller): %w", k, size, c.opts.MaxEntryBytes, progcache.ErrTooLarge)
	}
	buf := recordBuffer(size)
	rec, err := progcache.AppendRecord((*buf)[:0], k, obj, c.opts.Record)
	if err != nil {
		releaseRecordBuffer(buf)
		return fmt.Errorf("redistier: put %s: %w", k, err)
	}
	*buf = rec
	key := c.ks.entry(k)
	err = c.call(ctx, "put", func(ctx context.Context) error {
		err := c.client.Set(ctx, key, rec, c.opts.TTL).Err()
		// go-redis has written rec out (or given up) and keeps no
		// reference to it. Released here, on whichever goroutine ran the
		// call, so an abandoned call (call.go) keeps it until it is done.
		// A call the breaker refused never runs: its buffer goes to the
		// garbage collector instead of back to the pool.
		releaseRecordBuffer(buf)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			c.n.putErrors.Add(1)
		}
		return err
	}
	c.n.puts.Add(1)
	if c.index != nil {
		c.index.admit(ctx, member(k), size)
	}
	return nil
}

// maxPooledRecord bounds the record buffers that Put reuses: a larger
// record is encoded into a buffer of its own, left to the garbage
// collector, so that a few huge entries (up to MaxEntryBytesLimit) do not
// stay pinned in the pool.
const maxPooledRecord = 4 << 20

// recordPool holds Put's record buffers (*[]byte, capacity at most
// maxPooledRecord). A fresh large allocation per Put cost more than the
// SET of a 64 KiB record itself on loopback (zeroing, page faults and
// garbage collection); a pooled buffer is warm in the cache besides.
var recordPool sync.Pool

// recordBuffer returns an empty buffer for a record of size bytes: a
// pooled one (AppendRecord grows it if it is too small, and the grown
// buffer is what goes back) unless size is over maxPooledRecord.
func recordBuffer(size int64) *[]byte {
	if size <= maxPooledRecord {
		if p, ok := recordPool.Get().(*[]byte); ok {
			return p
		}
	}
	b := make([]byte, 0, size)
	return &b
}

// releaseRecordBuffer returns p to the pool if it is small enough. The
// caller must not use p, or any slice of it, afterwards.
func releaseRecordBuffer(p *[]byte) {
	if cap(*p) <= maxPooledRecord {
		*p = (*p)[:0]
		recordPool.Put(p)
	}
}

// Delete removes k's entry; an absent key is not an error. A Delete that
// Redis could not serve returns an error wrapping ErrUnavailable.
func (c *Cache) Delete(ctx context.Context, k progcache.Key) error {
	if err := c.enter(ctx); err != nil {
		return err
	}
	key := c.ks.entry(k)
	err := c.call(ctx, "delete", func(ctx context.Context) error {
		return c.client.Del(ctx, key).Err()
	})
	if err != nil {
		return err
	}
	if c.index != nil {
		c.index.forget(ctx, member(k))
	}
	return nil
}

// Stats returns progcache's counters (see Stats for what they mean here);
// RedisStats returns them with the remote tier's own. Both keep answering
// after Close.
func (c *Cache) Stats() progcache.Stats { return c.RedisStats().Stats }

// RedisStats returns every counter of the cache and the breaker's state.
func (c *Cache) RedisStats() Stats {
	s := c.n.stats()
	s.MaxBytes = c.opts.MaxBytes
	s.Breaker, s.BreakerOpens = c.breaker.snapshot()
	return s
}

// Close stops the heartbeats of the leases still held and releases them
// (each within Options.Timeout; one Redis cannot take lapses after its
// LeaseTTL). Every later call returns an error wrapping
// progcache.ErrClosed; Stats keeps answering. Close does not close the
// client. It is idempotent and safe to call concurrently with every other
// method.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return nil
	}
	c.closed.Store(true)
	held := make([]*Lease, 0, len(c.leases))
	for l := range c.leases {
		held = append(held, l)
	}
	c.mu.Unlock()
	for _, l := range held {
		// A release that Redis cannot serve is counted; the lease then
		// lapses after its TTL, which is all a waiter needs.
		_ = l.release(context.Background())
	}
	return nil
}
