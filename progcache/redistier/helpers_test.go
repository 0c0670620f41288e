package redistier_test

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/redistier"
	"github.com/redis/go-redis/v9"
)

// testMAC is the MAC key of the test caches.
var testMAC = bytes.Repeat([]byte{0x5c}, 32)

// namespaces gives each test cache a namespace of its own on a shared
// server.
var namespaces atomic.Int64

func freshNamespace(t testing.TB) string {
	return fmt.Sprintf("t%d", namespaces.Add(1))
}

// openCache returns a cache on client with opts, sealed with testMAC
// unless opts say otherwise and in a fresh namespace unless opts name
// one, closed when the test ends.
func openCache(t testing.TB, client redis.UniversalClient, opts redistier.Options) *redistier.Cache {
	t.Helper()
	if opts.Record.MACKey == nil && !opts.TrustedNetworkNoMAC {
		opts.Record.MACKey = testMAC
	}
	if opts.Namespace == "" {
		opts.Namespace = freshNamespace(t)
	}
	c, err := redistier.New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// entryKey is the Redis key of k's entry in namespace ns (the layout of
// keyspace.go), for tests that change entries behind the cache's back.
func entryKey(ns string, k progcache.Key) string {
	return fmt.Sprintf("progcache:%s:e:%s", ns, k)
}

// leaseKey is the Redis key of k's lease in namespace ns.
func leaseKey(ns string, k progcache.Key) string {
	return fmt.Sprintf("progcache:%s:l:%s", ns, k)
}

// eventually polls cond every few milliseconds until it holds, failing
// the test with what after limit: a bounded wait for something that
// happens in the background, not a timing assertion.
func eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var bg = context.Background()

// clientOf returns a client of addr, closed when the test ends. With
// honours it applies context deadlines to its sockets
// (ContextTimeoutEnabled), so the cache runs each call in place; without,
// it is go-redis's default, and the cache's own timeout goroutine bounds
// each call.
func clientOf(t testing.TB, addr string, honours bool) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: honours})
	t.Cleanup(func() { c.Close() })
	return c
}
