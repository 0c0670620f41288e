package progcache

// SetGroupWaiting sets g's test hook, called when a caller starts waiting
// for another's compile, for the external tests (compile_backends_test.go).
func SetGroupWaiting(g *Group, f func(Key)) { g.waiting = f }
