package redistier_test

import (
	"testing"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/redistier"
	"github.com/accelkit/accelkit/progcache/redistier/redistest"
	"github.com/redis/go-redis/v9"
)

// TestCluster runs the cache on a 3-master Redis Cluster made with
// redis-cli --cluster create, through a cluster client that honours
// context deadlines (so calls run in place): the conformance suite, keys
// spread over every master, Len and Clear visiting all of them, Prefetch
// across slots, and leases.
func TestCluster(t *testing.T) {
	t.Parallel() // mostly waiting: for a failover, a cluster, a lease to expire
	cl := redistest.StartCluster(t, 3)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })

	t.Run("Conformance", func(t *testing.T) {
		cachetest.Run(t, conformanceBackend(client, 200))
	})

	t.Run("SpreadLenClear", func(t *testing.T) {
		c := openCache(t, client, redistier.Options{})
		const n = 300
		for i := range n {
			if err := c.Put(bg, cachetest.KeyN(i), cachetest.ObjectN(i, 100)); err != nil {
				t.Fatal(err)
			}
		}
		perMaster := func() []int {
			counts := make([]int, len(cl.Masters))
			for i, m := range cl.Masters {
				var cursor uint64
				for {
					keys, next, err := m.Client(t).Scan(bg, cursor, "progcache:"+c.Namespace()+":e:*", 1000).Result()
					if err != nil {
						t.Fatal(err)
					}
					counts[i] += len(keys)
					if cursor = next; cursor == 0 {
						break
					}
				}
			}
			return counts
		}
		counts := perMaster()
		total := 0
		for i, k := range counts {
			if k == 0 {
				t.Errorf("master %s holds none of the %d entries: want them spread over every master", cl.Masters[i].Addr, n)
			}
			total += k
		}
		t.Logf("%d entries over the masters: %v", n, counts)
		if got, err := c.Len(bg); got != n || total != n || err != nil {
			t.Fatalf("Len = %d, %v; the masters hold %d; want %d", got, err, total, n)
		}
		if err := c.Clear(bg); err != nil {
			t.Fatal(err)
		}
		for i, k := range perMaster() {
			if k != 0 {
				t.Errorf("master %s still holds %d entries after Clear", cl.Masters[i].Addr, k)
			}
		}
	})

	t.Run("Prefetch", func(t *testing.T) {
		prefetchCase(t, client, client, 150, 200, 20)
	})

	t.Run("Leases", func(t *testing.T) {
		opts := leaseOpts
		opts.Namespace = freshNamespace(t)
		a, b := openCache(t, client, opts), openCache(t, client, opts)
		for i := range 20 {
			l, err := a.AcquireLease(bg, cachetest.KeyN(i))
			if l == nil || err != nil {
				t.Fatalf("Acquire %d on the cluster: %v, %v", i, l, err)
			}
			if l2, err := b.AcquireLease(bg, cachetest.KeyN(i)); l2 != nil || err != nil {
				t.Fatalf("second Acquire %d on the cluster = %v, %v; want contended", i, l2, err)
			}
			if err := l.Release(bg); err != nil {
				t.Fatal(err)
			}
		}
	})

	// The README's ACL user, with the one command a cluster client adds:
	// CLUSTER SLOTS, for the slot map.
	t.Run("ACLUser", func(t *testing.T) {
		rules := append(append([]string{}, aclRules...), "+cluster|slots")
		for _, m := range cl.Masters {
			if err := m.Client(t).Do(bg, append([]any{"acl", "setuser", "fleet"}, toAny(rules)...)...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		aclClient := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), Username: "fleet", Password: "fleet-secret", ContextTimeoutEnabled: true})
		t.Cleanup(func() { aclClient.Close() })
		c := openCache(t, aclClient, redistier.Options{Namespace: "acl", MaxBytes: 1 << 20})
		for i := range 30 {
			if err := c.Put(bg, cachetest.KeyN(i), cachetest.ObjectN(i, 100)); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := c.Get(bg, cachetest.KeyN(i)); !ok || err != nil {
				t.Fatalf("Get as the ACL user on the cluster: %v, %v", ok, err)
			}
		}
		if n, err := c.Prefetch(bg, []progcache.Key{cachetest.KeyN(1), cachetest.KeyN(2)}, func(progcache.Key, progcache.Object) error { return nil }); n != 2 || err != nil {
			t.Fatalf("Prefetch as the ACL user on the cluster: %d, %v", n, err)
		}
		l, err := c.AcquireLease(bg, cachetest.KeyN(1))
		if l == nil || err != nil {
			t.Fatalf("Acquire as the ACL user on the cluster: %v, %v", l, err)
		}
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Len(bg); n != 30 || err != nil {
			t.Fatalf("Len as the ACL user on the cluster: %d, %v", n, err)
		}
		if err := c.Clear(bg); err != nil {
			t.Fatal(err)
		}
		if s := c.RedisStats(); s.Errors != 0 {
			t.Errorf("as the ACL user on the cluster: %+v; want no errors", s)
		}
	})
}
