package tiered

import "github.com/accelkit/accelkit/progcache"

// SetLeaseWaiting sets c's test hook, called when a GetOrCompile finds a
// key's lease held and starts waiting, for the external tests
// (cache_test.go). Set it before c is shared.
func SetLeaseWaiting(c *Cache, f func(progcache.Key)) { c.hooks.leaseWaiting = f }
