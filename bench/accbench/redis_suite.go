package accbench

// The redis suite: progcache/redistier on a redis-server it starts itself
// on a loopback port, each figure beside raw go-redis calls moving the
// same bytes on the same server, alternating in one loop, as redistier's
// bench_test.go (and progcache's BenchmarkTieredGetLocalHit) measure them.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/redistier"
	"github.com/accelkit/accelkit/progcache/redistier/redistest"
	"github.com/accelkit/accelkit/progcache/tiered"
)

// redisTimeout is the caches' Options.Timeout: long enough that a 1 MiB
// call on a loaded 2-core machine is never a timeout (a miss, which would
// stop the suite), as in redistier's benchmarks. The ratio does not
// depend on it.
const redisTimeout = 5 * time.Second

func redisSuite() Suite {
	return Suite{
		Name: "redis", Title: "progcache/redistier on a loopback redis-server: get hit, put, tiered get, prefetch, 32-goroutine gets, vs raw go-redis",
		Run: runRedis,
		// Under ACCELKIT_REQUIRE_REDIS (CI sets it where it installed
		// redis-server) the suite must run: a failure, a missing server
		// included, fails the program, as redistest's tests fail rather
		// than skip there.
		Invariant: redisRequired(),
	}
}

func redisRequired() bool { return os.Getenv(redistest.RequireEnv) != "" }

func runRedis(env *Env) (out Output, err error) {
	dir, err := os.MkdirTemp("", "accbench-redis-")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(dir)
	srv, err := redistest.Launch(dir)
	if errors.Is(err, redistest.ErrNotInstalled) {
		const hint = "redis-server not found in PATH: install it to run this suite (Debian/Ubuntu: apt-get install redis-server)"
		if !redisRequired() {
			return out, skip(hint)
		}
		return out, fmt.Errorf("%s; %s is set, so the suite must run", hint, redistest.RequireEnv)
	}
	if err != nil {
		return out, err
	}
	defer func() { err = errors.Join(err, srv.Close()) }()
	env.Step("redis-server %d on %s", srv.PID(), srv.Addr)
	r := &redisRun{env: env, ctx: env.Ctx, addr: srv.Addr}
	defer func() { err = errors.Join(err, r.close()) }()

	// The tiered caches are filled first and timed last: a filestream
	// local tier trusts a file without its checksum only once it has not
	// changed for 2 s (progcache's filestream_read.go), and the rows
	// before take longer than that, so the tiered gets are timed in the
	// steady state without a wait of their own.
	tiers, err := r.backfilled(dir)
	if err != nil {
		return out, err
	}
	backfilled := time.Now()
	sizes := []int{4 << 10, 64 << 10, 1 << 20}
	for _, size := range sizes {
		for _, mac := range []bool{true, false} {
			env.Step("get/put %s, %s", sizeName(size), sealName(mac))
			ms, err := r.getPut(size, mac)
			if err != nil {
				return out, err
			}
			out.Measurements = append(out.Measurements, ms...)
		}
	}
	env.Step("prefetch of 1,000 keys")
	m, err := r.prefetch()
	if err != nil {
		return out, err
	}
	out.Measurements = append(out.Measurements, m)
	env.Step("32-goroutine gets")
	m, err = r.parallelGet()
	if err != nil {
		return out, err
	}
	out.Measurements = append(out.Measurements, m)
	steady := !env.Quick // -quick does not wait for it: seconds, not figures
	if wait := 2100*time.Millisecond - time.Since(backfilled); wait > 0 && steady {
		time.Sleep(wait)
	}
	for _, t := range tiers {
		env.Step("tiered get, %s local", t.name)
		m, err := r.tieredGet(t)
		if err != nil {
			return out, err
		}
		out.Measurements = append(out.Measurements, m)
	}
	out.Notes = append(out.Notes,
		"Each figure alternates ours and its baseline in one loop, the side that goes first alternating, on the same loopback redis-server (started by the suite, no persistence). The get and put baselines are raw go-redis GETs and SETs of the same record bytes under a key of their own. A ratio is how many times better ours is: 0.83x is 1.2x the raw call's time.",
		"The get and put rows run on a ctx-deadline client: go-redis with ContextTimeoutEnabled, so redistier runs each call in place under its Timeout. The prefetch and 32-goroutine rows run on the default client: without it, redistier bounds each call from a goroutine of its own.",
		"Tiered gets are timed in batches of 64, on an entry the tiered cache read once from its redistier remote tier and so backfilled into the local tier.")
	if steady {
		out.Notes = append(out.Notes, "Tiered gets are timed 2 s or more after the backfill: the filestream steady state, in which a file that has not changed for 2 s is read without its checksum.")
	} else {
		out.Notes = append(out.Notes, "-quick: tiered gets are timed without waiting 2 s after the backfill, so a filestream local tier may still check each read's checksum.")
	}
	return out, nil
}

// redisRun holds what the suite opened on the server, closed at its end.
type redisRun struct {
	env     *Env
	ctx     context.Context
	addr    string
	closers []func() error
	ns      int // namespaces handed out
}

func (r *redisRun) close() error {
	var errs []error
	for i := len(r.closers) - 1; i >= 0; i-- {
		errs = append(errs, r.closers[i]())
	}
	return errors.Join(errs...)
}

// client returns a client of the server, closed at the end of the suite:
// with ctxDeadline, one that applies context deadlines to its sockets
// (ContextTimeoutEnabled).
func (r *redisRun) client(ctxDeadline bool) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.addr, ContextTimeoutEnabled: ctxDeadline})
	r.closers = append(r.closers, c.Close)
	return c
}

// cache returns a redistier cache on client in a namespace of its own,
// sealed with AES-GMAC (the default MAC of a keyed cache, named here so
// the rows' label holds) or, without mac, a CRC-32C (TrustedNetworkNoMAC),
// closed at the end of the suite.
func (r *redisRun) cache(client redis.UniversalClient, mac bool) (*redistier.Cache, redistier.Options, error) {
	r.ns++
	opts := redistier.Options{Namespace: fmt.Sprintf("accbench%d", r.ns), TrustedNetworkNoMAC: !mac, Timeout: redisTimeout}
	if mac {
		opts.Record.MACKey = make([]byte, 32)
		opts.Record.MAC = progcache.MACGMAC
		rand.Read(opts.Record.MACKey)
	}
	c, err := redistier.New(client, opts)
	if err != nil {
		return nil, opts, err
	}
	r.closers = append(r.closers, c.Close)
	return c, opts, nil
}

func sealName(mac bool) string {
	if mac {
		return "GMAC"
	}
	return "CRC"
}

// redisObject returns an object of size code bytes and its key.
func redisObject(n, size int) (progcache.Key, progcache.Object) {
	var k progcache.Key
	copy(k[:], fmt.Sprintf("accbench-redis-%08d", n))
	code := make([]byte, size)
	rand.Read(code)
	return k, progcache.Object{Kind: "cubin", Name: fmt.Sprintf("obj%d", n), Code: code}
}

// iters scales an iteration count to the run: a tenth with -quick, at
// least one.
func (r *redisRun) iters(full int) int {
	if r.env.Quick {
		return max(1, full/10)
	}
	return full
}

// getPut measures Cache.Put and a remote Cache.Get hit of one object
// beside a raw SET and GET of its record bytes, on clients with
// ContextTimeoutEnabled, each pair in one loop, the side that goes first
// alternating.
func (r *redisRun) getPut(size int, mac bool) ([]Measurement, error) {
	c, opts, err := r.cache(r.client(true), mac)
	if err != nil {
		return nil, err
	}
	raw := r.client(true)
	k, obj := redisObject(size, size)
	record, err := progcache.EncodeRecord(k, obj, opts.Record)
	if err != nil {
		return nil, err
	}
	rawKey := "accbench:raw:" + opts.Namespace
	n := r.iters(map[int]int{4 << 10: 1000, 64 << 10: 1000, 1 << 20: 60}[size])
	put := func() error { return c.Put(r.ctx, k, obj) }
	rawSet := func() error { return raw.Set(r.ctx, rawKey, record, 0).Err() }
	get := func() error {
		got, ok, err := c.Get(r.ctx, k)
		if err == nil && (!ok || len(got.Code) != size) {
			err = fmt.Errorf("redis get of a stored %s entry: hit %v with %d code bytes; stats %+v", sizeName(size), ok, len(got.Code), c.RedisStats())
		}
		return err
	}
	rawGet := func() error {
		v, err := raw.Get(r.ctx, rawKey).Bytes()
		if err == nil && len(v) != len(record) {
			err = fmt.Errorf("raw GET returned %d bytes, want %d", len(v), len(record))
		}
		return err
	}
	putUS, setUS, err := alternate(n, put, rawSet)
	if err != nil {
		return nil, fmt.Errorf("put %s %s: %w", sizeName(size), sealName(mac), err)
	}
	getUS, rawGetUS, err := alternate(n, get, rawGet)
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", sizeName(size), sealName(mac), err)
	}
	what := fmt.Sprintf("%s, %s", sizeName(size), sealName(mac))
	g := Measurement{Case: "get hit " + what, Unit: "us/op", Ours: getUS, Base: rawGetUS, BaseName: "raw GET"}
	p := Measurement{Case: "put " + what, Unit: "us/op", Ours: putUS, Base: setUS, BaseName: "raw SET"}
	if size == 64<<10 {
		g.Goal, p.Goal = goalRedis64K, goalRedis64K
	}
	return []Measurement{g, p}, nil
}

// alternate runs ours and base n times each, after an untimed warm-up
// pair (which dials the clients' connections), in one loop, the one that
// goes first alternating (the second of a pair would otherwise pay for
// the garbage of the first), and returns each one's median time in
// microseconds: a call preempted on a busy machine, or one that meets a
// collection, moves a mean by its whole delay, on whichever side it
// falls, and a median not at all (cachetest.Versus reports medians for
// the same reason).
func alternate(n int, ours, base func() error) (oursUS, baseUS float64, err error) {
	if err := errors.Join(ours(), base()); err != nil {
		return 0, 0, err
	}
	to, tb := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	timed := func(f func() error, ts *[]time.Duration) error {
		t0 := time.Now()
		err := f()
		*ts = append(*ts, time.Since(t0))
		return err
	}
	for i := range n {
		first, second, s1, s2 := ours, base, &to, &tb
		if i%2 == 1 {
			first, second, s1, s2 = base, ours, &tb, &to
		}
		if err := timed(first, s1); err != nil {
			return 0, 0, err
		}
		if err := timed(second, s2); err != nil {
			return 0, 0, err
		}
	}
	us := func(ts []time.Duration) float64 {
		slices.Sort(ts)
		return float64(ts[len(ts)/2].Nanoseconds()) / 1e3
	}
	return us(to), us(tb), nil
}

// tier is a Tiered cache with its local tier, and the key it backfilled.
type tier struct {
	name  string
	c     *tiered.Cache
	local progcache.Cache
	k     progcache.Key
	size  int
}

// backfilled returns a tiered cache per local tier (memory, filestream in
// dir) over a redistier remote tier, each with a 64 KiB entry put on the
// remote tier only and then read through the tiered cache once, so that
// the local tier holds it (backfilled).
func (r *redisRun) backfilled(dir string) ([]tier, error) {
	const size = 64 << 10
	var tiers []tier
	for i, nc := range builtinCaches() {
		if nc.Name != "memory" && nc.Name != "filestream" {
			continue
		}
		remote, _, err := r.cache(r.client(true), true)
		if err != nil {
			return nil, err
		}
		local, err := nc.Open(filepath.Join(dir, "local-"+nc.Name))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", nc.Name, err)
		}
		c, err := tiered.New(local, remote, tiered.Options{})
		if err != nil {
			return nil, errors.Join(err, local.Close())
		}
		r.closers = append(r.closers, c.Close) // and with it both tiers
		k, obj := redisObject(100+i, size)
		if err := remote.Put(r.ctx, k, obj); err != nil {
			return nil, err
		}
		if _, ok, err := c.Get(r.ctx, k); !ok || err != nil {
			return nil, fmt.Errorf("%w; remote stats %+v", notHit("tiered get of an entry on the remote tier", ok, err), remote.RedisStats())
		}
		if s := c.TierStats(); s.Backfills != 1 {
			return nil, fmt.Errorf("the remote hit was not backfilled into the %s tier: %+v", nc.Name, s)
		}
		tiers = append(tiers, tier{name: nc.Name, c: c, local: local, k: k, size: size})
	}
	return tiers, nil
}

// tieredGet measures Gets of t's backfilled entry through the tiered
// cache beside Gets from its local tier alone, in batches of 64
// alternating in one loop, each first every other round (as
// progcache's BenchmarkTieredGetLocalHit).
func (r *redisRun) tieredGet(t tier) (Measurement, error) {
	const batch = 64
	batches := r.iters(40)
	get := func(c progcache.Cache) func() error {
		return func() error {
			for range batch {
				got, ok, err := c.Get(r.ctx, t.k)
				if err == nil && (!ok || len(got.Code) != t.size) {
					err = fmt.Errorf("hit %v with %d code bytes", ok, len(got.Code))
				}
				if err != nil {
					return err
				}
			}
			return nil
		}
	}
	tieredUS, localUS, err := alternate(batches, get(t.c), get(t.local))
	if err != nil {
		return Measurement{}, fmt.Errorf("tiered get, %s local: %w", t.name, err)
	}
	if s := t.c.TierStats(); s.RemoteHits != 1 {
		return Measurement{}, fmt.Errorf("tiered gets after the backfill went to the remote tier: %+v", s)
	}
	return Measurement{
		Case: fmt.Sprintf("tiered get %s, %s local", sizeName(t.size), t.name), Unit: "us/op",
		Ours: tieredUS / batch, Base: localUS / batch, BaseName: t.name + " alone",
		Goal: goalTiered,
	}, nil
}

// prefetch measures a Prefetch of 1,000 stored 4 KiB entries beside 1,000
// Cache.Get calls of the same keys, alternating (as redistier's
// BenchmarkPrefetch, on a default client).
func (r *redisRun) prefetch() (Measurement, error) {
	c, _, err := r.cache(r.client(false), true)
	if err != nil {
		return Measurement{}, err
	}
	keys := make([]progcache.Key, 1000)
	for i := range keys {
		var obj progcache.Object
		keys[i], obj = redisObject(1000+i, 4<<10)
		if err := c.Put(r.ctx, keys[i], obj); err != nil {
			return Measurement{}, err
		}
	}
	pre := func() error {
		n, err := c.Prefetch(r.ctx, keys, func(progcache.Key, progcache.Object) error { return nil })
		if err == nil && n != len(keys) {
			err = fmt.Errorf("prefetch delivered %d of %d stored keys", n, len(keys))
		}
		return err
	}
	gets := func() error {
		for _, k := range keys {
			if _, ok, err := c.Get(r.ctx, k); !ok || err != nil {
				return notHit("get of a stored key", ok, err)
			}
		}
		return nil
	}
	preUS, getsUS, err := alternate(r.iters(3), pre, gets)
	if err != nil {
		return Measurement{}, fmt.Errorf("prefetch: %w", err)
	}
	return Measurement{
		Case: "prefetch 1,000 keys of 4 KiB, GMAC", Unit: "ms/op",
		Ours: preUS / 1e3, Base: getsUS / 1e3, BaseName: "1,000 Cache.Get",
	}, nil
}

// parallelGet measures the throughput of 32 goroutines making Cache.Get
// hits of a 64 KiB entry beside the same goroutines making raw GETs of
// its record bytes, in rounds of 16 calls per goroutine (2 with -quick),
// alternating (as redistier's BenchmarkParallelGet, on default clients).
func (r *redisRun) parallelGet() (Measurement, error) {
	const goroutines, size = 32, 64 << 10
	perG := 16
	if r.env.Quick {
		perG = 2
	}
	c, opts, err := r.cache(r.client(false), true)
	if err != nil {
		return Measurement{}, err
	}
	raw := r.client(false)
	k, obj := redisObject(2000, size)
	record, err := progcache.EncodeRecord(k, obj, opts.Record)
	if err != nil {
		return Measurement{}, err
	}
	rawKey := "accbench:raw:" + opts.Namespace
	if err := errors.Join(c.Put(r.ctx, k, obj), raw.Set(r.ctx, rawKey, record, 0).Err()); err != nil {
		return Measurement{}, err
	}
	round := func(get func() error) func() error {
		return func() error {
			errs := make([]error, goroutines) // one slot per goroutine: no shared write
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for range perG {
						if errs[g] = get(); errs[g] != nil {
							return
						}
					}
				})
			}
			wg.Wait()
			return errors.Join(errs...)
		}
	}
	ours := round(func() error {
		if _, ok, err := c.Get(r.ctx, k); !ok || err != nil {
			return notHit("get of a stored key", ok, err)
		}
		return nil
	})
	base := round(func() error { return raw.Get(r.ctx, rawKey).Err() })
	oursUS, baseUS, err := alternate(r.iters(5), ours, base)
	if err != nil {
		return Measurement{}, fmt.Errorf("32-goroutine gets: %w", err)
	}
	perRound := float64(goroutines * perG)
	return Measurement{
		Case: "get hit 64 KiB, GMAC, 32 goroutines", Unit: "ops/s", HigherBetter: true,
		Ours: perRound / oursUS * 1e6, Base: perRound / baseUS * 1e6, BaseName: "raw GETs",
	}, nil
}

// notHit is the error of a lookup that should have hit: its own error,
// or else the miss.
func notHit(what string, ok bool, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: hit %v, want a hit", what, ok)
}
