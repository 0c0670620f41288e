package tiered_test

import (
	"context"
	"fmt"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/tiered"
)

// Two machines, each with a local cache of its own, share a remote tier:
// here a Memory stands in for a network cache, and each tiered Cache gets a
// view of it that leaves it open when the Cache closes. What one machine
// compiles, the other finds in the remote tier and keeps locally.
func Example() {
	ctx := context.Background()
	shared, _ := progcache.NewMemory(progcache.MemoryOptions{})
	defer shared.Close()
	machine := func() *tiered.Cache {
		local, _ := progcache.NewMemory(progcache.MemoryOptions{MaxBytes: 256 << 20})
		c, err := tiered.New(local, keepOpen{shared}, tiered.Options{SyncRemotePut: true})
		if err != nil {
			panic(err)
		}
		return c
	}
	a, b := machine(), machine()
	defer a.Close()
	defer b.Close()

	var k progcache.Key // normally from MakeKey
	compiles := 0
	compile := func(ctx context.Context) (progcache.Object, error) {
		compiles++ // a real compile runs NVRTC or nvcc here
		return progcache.Object{Kind: "cubin", Code: []byte("object code")}, nil
	}
	for _, c := range []*tiered.Cache{a, b, b} {
		if _, err := progcache.GetOrCompile(ctx, c, k, compile); err != nil {
			panic(err)
		}
	}
	s := b.TierStats()
	fmt.Println("compiles:", compiles)
	fmt.Println("b: remote hits", s.RemoteHits, "backfills", s.Backfills, "local hits", s.LocalHits)
	// Output:
	// compiles: 1
	// b: remote hits 1 backfills 1 local hits 1
}

// keepOpen is a cache whose Close leaves the cache it wraps open: a
// remote tier that several tiered Caches share.
type keepOpen struct{ progcache.Cache }

func (keepOpen) Close() error { return nil }
