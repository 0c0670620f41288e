package redistier_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/redistier"
	"github.com/accelkit/accelkit/progcache/redistier/redistest"
	"github.com/redis/go-redis/v9"
)

// TestSentinelFailover runs the cache on a Sentinel failover client: a
// master with one replica under a Sentinel. The master is SIGKILLed;
// while the Sentinel fails over, lookups fail open (misses, no errors);
// once it has promoted the replica, the entries written before are hits
// and writes go through again, with no change on the cache's side.
func TestSentinelFailover(t *testing.T) {
	t.Parallel() // mostly waiting: for a failover, a cluster, a lease to expire
	master := redistest.Start(t)
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
	sentinel := redistest.StartSentinel(t, master, "progcache")
	eventually(t, 20*time.Second, "the Sentinel knows the replica", func() bool {
		out, err := sentinel.CLI("sentinel", "replicas", "progcache")
		return err == nil && strings.Contains(out, strconv.Itoa(replica.Port))
	})

	// The Sentinel lists a replica as soon as the master reports it, which
	// can be before its first sync ends; WAIT below needs it online.
	eventually(t, 20*time.Second, "the replica is online", func() bool {
		out, err := master.CLI("info", "replication")
		return err == nil && strings.Contains(out, "state=online")
	})

	client := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "progcache", SentinelAddrs: []string{sentinel.Addr}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	c := openCache(t, client, redistier.Options{Timeout: 500 * time.Millisecond, BreakerCooldown: 100 * time.Millisecond})
	for i := range 10 {
		if err := c.Put(bg, cachetest.KeyN(i), cachetest.ObjectN(i, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	// The replica has them before the master dies.
	if n, err := master.Client(t).Wait(bg, 1, 5*time.Second).Result(); n != 1 || err != nil {
		t.Fatalf("WAIT for the replica = %d, %v", n, err)
	}

	master.Kill()
	if _, ok, err := c.Get(bg, cachetest.KeyN(1)); ok || err != nil {
		t.Fatalf("Get with the master dead and no failover yet = %v, %v; want a miss", ok, err)
	}
	start := time.Now()
	eventually(t, 30*time.Second, "the cache reads from the promoted replica", func() bool {
		_, ok, err := c.Get(bg, cachetest.KeyN(1))
		if err != nil {
			t.Fatalf("Get during the failover: %v", err)
		}
		return ok
	})
	t.Logf("hits again %v after the master was killed (Sentinel down-after 500 ms)", time.Since(start).Round(time.Millisecond))
	if role, err := replica.CLI("role"); err != nil || !strings.HasPrefix(role, "master") {
		t.Errorf("the replica's role after the failover: %q, %v; want master", role, err)
	}
	for i := range 10 {
		if obj, ok, err := c.Get(bg, cachetest.KeyN(i)); !ok || err != nil || !obj.Equal(cachetest.ObjectN(i, 1000)) {
			t.Errorf("entry %d after the failover: %v, %v", i, ok, err)
		}
	}
	eventually(t, 10*time.Second, "a Put goes through after the failover", func() bool {
		return c.Put(bg, cachetest.KeyN(10), cachetest.ObjectN(10, 1000)) == nil
	})
	if s := c.RedisStats(); s.Errors == 0 {
		t.Errorf("no failed call counted across the failover: %+v", s)
	}
}
