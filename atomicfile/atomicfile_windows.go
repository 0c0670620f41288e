//go:build windows

package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// tempPending is a temporary file beside the destination, renamed over
// it with MoveFileEx (MOVEFILE_REPLACE_EXISTING): renameio does not build
// on Windows.
type tempPending struct {
	*os.File
	root      *os.Root
	tmp, name string
}

func newPending(root *os.Root, name string, perm os.FileMode, existing *fs.FileMode) (pending, error) {
	if existing != nil {
		perm = *existing // only the read-only bit means anything here
	}
	d, base := dir(root, name), filepath.Base(filepath.FromSlash(name))
	for range 10000 {
		tmp := filepath.Join(d, fmt.Sprintf(".%s%d", base, rand.Int64()))
		var f *os.File
		var err error
		if root != nil {
			f, err = root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		} else {
			f, err = os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		}
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		p := &tempPending{File: f, root: root, tmp: tmp, name: name}
		if err := f.Chmod(perm); err != nil {
			return nil, errors.Join(err, p.remove())
		}
		return p, nil
	}
	return nil, fmt.Errorf("no free temporary name beside %s", name)
}

func (p *tempPending) replace() error {
	if err := p.Sync(); err != nil {
		return err
	}
	if err := p.Close(); err != nil {
		return err
	}
	rename := os.Rename
	if p.root != nil {
		rename = p.root.Rename
	}
	return retry(func() error { return rename(p.tmp, p.name) })
}

func (p *tempPending) remove() error {
	p.Close() // closed already after a failed replace
	if p.root != nil {
		return p.root.Remove(p.tmp)
	}
	return os.Remove(p.tmp)
}

// syncDir does nothing: Windows cannot fsync a directory handle, and NTFS
// journals the rename.
func (p *tempPending) syncDir() error { return nil }

// errSharingViolation is ERROR_SHARING_VIOLATION, which package syscall
// does not name.
const errSharingViolation syscall.Errno = 32

// retry runs rename until it succeeds, fails otherwise than by another
// process holding the file, or two seconds have passed.
func retry(rename func() error) error {
	deadline := time.Now().Add(2 * time.Second)
	wait := time.Millisecond
	for {
		err := rename()
		var errno syscall.Errno
		if err == nil || !errors.As(err, &errno) || (errno != syscall.ERROR_ACCESS_DENIED && errno != errSharingViolation) ||
			time.Now().Add(wait).After(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}
