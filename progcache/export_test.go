package progcache

// SetGroupWaiting sets g's test hook, called when a caller starts waiting
// for another's compile, for the external tests (compile_backends_test.go).
func SetGroupWaiting(g *Group, f func(Key)) { g.waiting = f }

// SetTieredLeaseWaiting sets t's test hook, called when a GetOrCompile
// finds a key's lease held and starts waiting, for the external tests
// (tiered_test.go). Set it before t is shared.
func SetTieredLeaseWaiting(t *Tiered, f func(Key)) { t.hooks.leaseWaiting = f }
