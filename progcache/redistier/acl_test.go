package redistier_test

import (
	"strings"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/redistier"
	"github.com/accelkit/accelkit/progcache/redistier/redistest"
	"github.com/redis/go-redis/v9"
)

// aclRules is the ACL of the README's least-privilege user, for namespace
// "acl": its keys only, and only the commands the cache sends (scripts'
// commands included: Redis checks those too).
var aclRules = []string{"on", ">fleet-secret", "resetkeys", "~progcache:acl:*", "resetchannels", "-@all",
	"+get", "+getrange", "+set", "+del", "+unlink", "+scan", "+evalsha", "+eval",
	"+pexpire", "+pttl", "+type", "+strlen", "+zadd", "+zscore", "+zpopmin", "+zrem", "+hget", "+hset", "+hdel", "+incr", "+incrby", "+decrby",
	"+ping", "+hello", "+auth"}

// TestACLUser runs every operation as a user restricted to aclRules: the
// README's list of commands is what the cache needs, and enough.
func TestACLUser(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	if err := admin.Do(bg, append([]any{"acl", "setuser", "fleet"}, toAny(aclRules)...)...).Err(); err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "fleet", Password: "fleet-secret"})
	t.Cleanup(func() { client.Close() })
	for _, maxBytes := range []int64{0, 1 << 20} {
		c := openCache(t, client, redistier.Options{Namespace: "acl", MaxBytes: maxBytes, LeaseTTL: 300 * time.Millisecond, Timeout: 100 * time.Millisecond})
		if err := c.Put(bg, cachetest.KeyN(1), cachetest.ObjectN(1, 100)); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := c.Get(bg, cachetest.KeyN(1)); !ok || err != nil {
			t.Fatalf("Get as the ACL user: %v, %v", ok, err)
		}
		if err := admin.Set(bg, entryKey("acl", cachetest.KeyN(2)), "garbage", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := c.Get(bg, cachetest.KeyN(2)); ok {
			t.Fatal("garbage was a hit")
		}
		if n, err := c.Prefetch(bg, []progcache.Key{cachetest.KeyN(1)}, func(progcache.Key, progcache.Object) error { return nil }); n != 1 || err != nil {
			t.Fatalf("Prefetch as the ACL user: %d, %v", n, err)
		}
		l, err := c.AcquireLease(bg, cachetest.KeyN(1))
		if l == nil || err != nil {
			t.Fatalf("Acquire as the ACL user: %v, %v", l, err)
		}
		time.Sleep(250 * time.Millisecond) // two heartbeats
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Len(bg); n != 1 || err != nil {
			t.Fatalf("Len as the ACL user: %d, %v", n, err)
		}
		if err := c.Delete(bg, cachetest.KeyN(1)); err != nil {
			t.Fatal(err)
		}
		if err := c.Clear(bg); err != nil {
			t.Fatal(err)
		}
		s := c.RedisStats()
		if s.Errors != 0 || s.HeartbeatFailures != 0 || s.LeasesLost != 0 || s.CorruptDeleted != 1 {
			t.Errorf("MaxBytes %d as the ACL user: %+v; want no errors", maxBytes, s)
		}
		c.Close()
	}
	// The user cannot reach another namespace.
	other := openCache(t, client, redistier.Options{Namespace: "other"})
	if err := other.Put(bg, cachetest.KeyN(1), cachetest.ObjectN(1, 1)); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("Put outside the user's key pattern = %v, want a NOPERM refusal", err)
	}
}

func toAny(s []string) []any {
	a := make([]any, len(s))
	for i, v := range s {
		a[i] = v
	}
	return a
}
