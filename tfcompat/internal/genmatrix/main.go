// Command genmatrix writes tfcompat/docs/compat-matrix.md from the embedded
// matrix; run it through go generate in the tfcompat directory.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/accelkit/accelkit/tfcompat"
)

func main() {
	out := flag.String("out", "docs/compat-matrix.md", "file to write")
	flag.Parse()
	m, err := tfcompat.Matrix()
	if err != nil {
		fmt.Fprintln(os.Stderr, "genmatrix:", err)
		os.Exit(1)
	}
	if err := writeFileAtomic(*out, tfcompat.RenderMatrixMarkdown(m), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genmatrix:", err)
		os.Exit(1)
	}
}

// writeFileAtomic replaces path with data by accelkit's policy for output
// files, the atomicfile module's (which tfcompat does not require: it
// promises its users the standard library only, and a requirement, even of
// this generator, would add atomicfile and renameio to every consumer's
// go.sum): a temporary file in path's directory, created exclusively,
// written, fsynced and renamed over path, then the directory fsynced; an
// existing path keeps its permission bits, a new one gets perm less the
// umask; anything but a regular file at path (a symbolic link included) is
// refused and left alone; on Windows the rename is retried for up to two
// seconds while another process holds path. On a failure before the
// rename, path is untouched and the temporary file removed.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	var existing *os.FileMode
	switch fi, err := os.Lstat(path); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (%v), and is neither written through nor replaced: give the path of a regular file, or of none", path, fi.Mode().Type())
	default:
		p := fi.Mode().Perm()
		existing = &p
	}
	dir := filepath.Dir(path)
	var f *os.File
	for range 10000 {
		f, err = os.OpenFile(filepath.Join(dir, fmt.Sprintf(".%s.tmp-%d", filepath.Base(path), rand.Int64())), os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			f.Close() // closed already when the rename failed
			if rerr := os.Remove(f.Name()); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
	}()
	if existing != nil {
		// The existing bits exactly, which the umask may not allow.
		if err := f.Chmod(*existing); err != nil {
			return err
		}
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s (left unchanged): %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s (left unchanged): %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s (left unchanged): %w", path, err)
	}
	if err := renameRetry(f.Name(), path); err != nil {
		return fmt.Errorf("replace %s (left unchanged): %w", path, err)
	}
	renamed = true
	if runtime.GOOS == "windows" {
		return nil // a directory cannot be fsynced there; NTFS journals the rename
	}
	d, err := os.Open(dir)
	if err == nil {
		err = errors.Join(d.Sync(), d.Close())
	}
	if err != nil {
		return fmt.Errorf("%s is written, but syncing its directory failed, so a crash may lose it: %w", path, err)
	}
	return nil
}

// renameRetry is os.Rename, retried on Windows for up to two seconds on
// ERROR_ACCESS_DENIED (5) and ERROR_SHARING_VIOLATION (32), which another
// process holding the destination open causes, as the go command's
// robustio does.
func renameRetry(from, to string) error {
	deadline := time.Now().Add(2 * time.Second)
	wait := time.Millisecond
	for {
		err := os.Rename(from, to)
		var errno syscall.Errno
		if err == nil || runtime.GOOS != "windows" || !errors.As(err, &errno) || (errno != 5 && errno != 32) ||
			time.Now().Add(wait).After(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}
