//go:build unix

package release

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir holds an exclusive lock on dir's lock file until the returned
// function is called: two rehearsals sharing a folder would empty each
// other's proxy mid-run.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("rehearsal folder %s is in use by another release command; wait for it or pass another folder with -dir", dir)
	}
	return func() { f.Close() }, nil
}
