//go:build !asan

package cuda

const asanBuild = false
