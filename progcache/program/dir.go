package program

import (
	"fmt"
	"os"
	"path/filepath"
)

// EnvCacheDir names the environment variable that moves the default cache:
// an absolute directory, used instead of DefaultDir's per-user location.
const EnvCacheDir = "ACCELKIT_PROGRAM_CACHE"

// DefaultMaxBytes caps the default cache. A durable cache that no one
// configured must not fill a home directory: 1 GiB holds thousands of
// typical cubins, and filestream prunes the least recently used entries
// beyond it.
const DefaultMaxBytes = 1 << 30

// DefaultDir returns the directory of the durable cache that New opens when
// Options.Cache is nil: $ACCELKIT_PROGRAM_CACHE when set, else
// "accelkit/programs" under os.UserCacheDir: $XDG_CACHE_HOME (or
// ~/.cache) on Linux and the other Unix systems, ~/Library/Caches on
// macOS, %LocalAppData% on Windows. It creates nothing. A relative
// $ACCELKIT_PROGRAM_CACHE is refused, since the cache would move with the
// working directory; so is a system with no user cache directory (no
// $HOME), with an error that says to set the variable.
func DefaultDir() (string, error) {
	if d, ok := os.LookupEnv(EnvCacheDir); ok {
		if !filepath.IsAbs(d) {
			return "", fmt.Errorf("program: %s=%q is not an absolute path: set it to the absolute directory of the program cache, or unset it for the default under the user cache directory", EnvCacheDir, d)
		}
		return filepath.Clean(d), nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("program: no default program cache directory: %w; set %s to an absolute directory, or give Options.Cache", err, EnvCacheDir)
	}
	return filepath.Join(base, "accelkit", "programs"), nil
}
