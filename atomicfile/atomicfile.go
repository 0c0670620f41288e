package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNotRegular is wrapped by the error for a destination that exists and
// is not a regular file (a symbolic link, a directory, a device).
var ErrNotRegular = errors.New("destination is not a regular file")

// pending is the system's temporary file (atomicfile_unix.go,
// atomicfile_windows.go).
type pending interface {
	io.Writer
	// replace fsyncs and closes the file and renames it over its
	// destination.
	replace() error
	// remove closes and removes the file.
	remove() error
	// syncDir fsyncs the destination's directory, where the system can.
	syncDir() error
}

// File is the new content of a destination, written to a temporary file
// until Commit renames it into place. A File is used by one goroutine.
type File struct {
	p    pending
	name string // the destination, as the caller gave it, for errors
	done bool   // committed or cleaned up
}

// Create starts replacing path (or creating it): what is written to the
// File goes to a temporary file beside path, and Commit puts it in place.
// perm is a new file's permissions, less the umask; an existing file keeps
// its own. A path that exists and is not a regular file is refused with an
// error wrapping ErrNotRegular. Call Cleanup when Commit is not reached.
func Create(path string, perm os.FileMode) (*File, error) {
	return create(nil, path, perm)
}

// CreateIn is Create for name inside root: the name is slash-separated and
// relative to root, and no name (no "..", no symbolic link on the way)
// leads out of it.
func CreateIn(root *os.Root, name string, perm os.FileMode) (*File, error) {
	if root == nil {
		return nil, errors.New("atomicfile: CreateIn with a nil root: want an open *os.Root")
	}
	return create(root, name, perm)
}

func create(root *os.Root, name string, perm os.FileMode) (*File, error) {
	existing, err := destPerm(root, name)
	if err != nil {
		return nil, err
	}
	p, err := newPending(root, name, perm, existing)
	if err != nil {
		return nil, fmt.Errorf("atomicfile: create a temporary file beside %s: %w", name, err)
	}
	return &File{p: p, name: name}, nil
}

// destPerm returns the permissions of the regular file at name, or nil
// when there is none; it refuses anything else there.
func destPerm(root *os.Root, name string) (*fs.FileMode, error) {
	var fi fs.FileInfo
	var err error
	if root != nil {
		fi, err = root.Lstat(name)
	} else {
		fi, err = os.Lstat(name)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("atomicfile: %w", err)
	}
	m := fi.Mode()
	switch {
	case m.IsRegular():
		perm := m.Perm()
		return &perm, nil
	case m&fs.ModeSymlink != 0:
		var target string
		if root != nil {
			target, err = root.Readlink(name)
		} else {
			target, err = os.Readlink(name)
		}
		if err != nil {
			target = "?"
		}
		return nil, fmt.Errorf("atomicfile: %s is a symbolic link (to %s), which is neither written through nor replaced: give the path of a regular file, or of none: %w", name, target, ErrNotRegular)
	case m.IsDir():
		return nil, fmt.Errorf("atomicfile: %s is a directory: give the path of a regular file, or of none: %w", name, ErrNotRegular)
	}
	return nil, fmt.Errorf("atomicfile: %s is not a regular file (mode %v): give the path of a regular file, or of none: %w", name, m.Type(), ErrNotRegular)
}

// Write writes to the temporary file.
func (f *File) Write(b []byte) (int, error) {
	if f.done {
		return 0, fmt.Errorf("atomicfile: write %s after Commit or Cleanup", f.name)
	}
	return f.p.Write(b)
}

// Commit fsyncs the temporary file, renames it over the destination and
// fsyncs the directory. When the rename fails the destination is
// untouched and the temporary file removed. When only the directory sync
// fails, the destination holds the new content but the error says a crash
// may lose it.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("atomicfile: commit %s after Commit or Cleanup", f.name)
	}
	if err := f.p.replace(); err != nil {
		return errors.Join(fmt.Errorf("atomicfile: replace %s (left unchanged): %w", f.name, err), f.Cleanup())
	}
	f.done = true
	if err := f.p.syncDir(); err != nil {
		return fmt.Errorf("atomicfile: %s is written, but syncing its directory failed, so a crash may lose it: %w", f.name, err)
	}
	return nil
}

// Cleanup removes the temporary file unless Commit has put it in place; it
// is a no-op after Commit, so it can be deferred.
func (f *File) Cleanup() error {
	if f.done {
		return nil
	}
	f.done = true
	if err := f.p.remove(); err != nil {
		return fmt.Errorf("atomicfile: remove the temporary file beside %s: %w", f.name, err)
	}
	return nil
}

// WriteFile replaces path (or creates it) with what write writes, through
// a buffered writer, by the package's policy: Create, write, Commit, and
// on any failure Cleanup, leaving path as it was.
func WriteFile(path string, perm os.FileMode, write func(io.Writer) error) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	return f.fill(write)
}

// WriteFileIn is WriteFile for name inside root (see CreateIn).
func WriteFileIn(root *os.Root, name string, perm os.FileMode, write func(io.Writer) error) error {
	f, err := CreateIn(root, name, perm)
	if err != nil {
		return err
	}
	return f.fill(write)
}

func (f *File) fill(write func(io.Writer) error) (err error) {
	defer func() {
		if cerr := f.Cleanup(); cerr != nil && err != nil {
			err = errors.Join(err, cerr)
		}
	}()
	w := bufio.NewWriterSize(f, 64<<10)
	if err := write(w); err != nil {
		return fmt.Errorf("atomicfile: write %s (left unchanged): %w", f.name, err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("atomicfile: write %s (left unchanged): %w", f.name, err)
	}
	return f.Commit()
}

// dir is the directory of name, a path or (in a root) a slash-separated
// name.
func dir(root *os.Root, name string) string {
	if root != nil {
		return filepath.Dir(filepath.FromSlash(name))
	}
	return filepath.Dir(name)
}
