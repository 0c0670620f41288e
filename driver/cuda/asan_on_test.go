//go:build asan

package cuda

// asanBuild: go test -asan instruments cgo arguments, which makes them
// escape, so allocation counts do not hold under it.
const asanBuild = true
