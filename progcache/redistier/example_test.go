package redistier_test

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/filestream"
	"github.com/accelkit/accelkit/progcache/redistier"
	"github.com/accelkit/accelkit/progcache/tiered"
)

// Example is a fleet machine's program cache: a filestream cache on local disk
// in front of the fleet's Redis, which also hands out the leases that make
// the fleet compile each program once. The Redis client is a TLS client
// logged in as the cache's ACL user, honouring context deadlines, and
// every machine of the deployment shares the MAC key. It needs a Redis
// server, so it is compiled but not run by go test.
func Example() {
	macKey, err := hex.DecodeString(os.Getenv("PROGCACHE_MAC_KEY")) // 32 random bytes, hex
	if err != nil {
		log.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{
		Addr:                  "progcache-redis.internal:6380",
		Username:              "progcache",
		Password:              os.Getenv("PROGCACHE_REDIS_PASSWORD"),
		TLSConfig:             &tls.Config{MinVersion: tls.VersionTLS12},
		ContextTimeoutEnabled: true, // the cache's per-call timeout then costs nothing extra
	})
	defer client.Close()

	remote, err := redistier.New(client, redistier.Options{
		Namespace: "ci-fleet",
		Record:    progcache.RecordOptions{MACKey: macKey},
		TTL:       14 * 24 * time.Hour,
	})
	if err != nil {
		log.Fatal(err)
	}
	local, err := filestream.Open("/var/cache/myserver/programs", filestream.Options{
		MaxBytes: 4 << 30,
		Record:   progcache.RecordOptions{MACKey: macKey},
	})
	if err != nil {
		log.Fatal(err)
	}
	cache, err := tiered.New(local, remote, tiered.Options{Leaser: remote})
	if err != nil {
		log.Fatal(err)
	}
	defer cache.Close() // closes both tiers

	ctx := context.Background()
	key, err := progcache.MakeKey(progcache.KeyInput{
		Sources:  []progcache.Source{{Name: "saxpy.cu", Code: []byte(`extern "C" __global__ void saxpy() {}`)}},
		CodeType: "c++",
		Target:   "cubin",
		Options:  progcache.Options{Arch: "sm_90"},
	})
	if err != nil {
		log.Fatal(err)
	}
	// Local hit; else a remote hit, kept locally; else one machine of the
	// fleet compiles while the others wait for its entry.
	obj, err := progcache.GetOrCompile(ctx, cache, key, func(ctx context.Context) (progcache.Object, error) {
		return progcache.Object{Kind: "cubin", Code: []byte("...")}, nil // nvrtc here
	})
	if err != nil {
		log.Fatal(err) // the compile failed: Redis being down never fails it
	}
	log.Printf("%d bytes of %s; %+v", len(obj.Code), obj.Kind, cache.TierStats())
}

// ExampleCache_AcquireLease compiles a key once across machines without a
// tiered.Cache (which does this in GetOrCompile): the machine that
// takes the lease compiles and stores; the others wait for the entry (or
// for the lease, if its holder dies).
func ExampleCache_AcquireLease() {
	var cache *redistier.Cache // from redistier.New
	var key progcache.Key
	compile := func() progcache.Object { return progcache.Object{Kind: "cubin", Code: []byte("...")} }

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		if obj, ok, _ := cache.Get(ctx, key); ok {
			_ = obj // another machine compiled it
			return
		}
		lease, err := cache.AcquireLease(ctx, key)
		if err != nil {
			// Redis cannot be asked: compile without it.
			_ = compile()
			return
		}
		if lease == nil {
			time.Sleep(100 * time.Millisecond) // someone else compiles
			continue
		}
		// A peer may have stored it between the Get and the Acquire.
		if _, ok, _ := cache.Get(ctx, key); !ok {
			_ = cache.Put(ctx, key, compile())
		}
		_ = lease.Release(ctx)
		return
	}
}
