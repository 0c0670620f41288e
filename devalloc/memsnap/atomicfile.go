package memsnap

import (
	"bufio"
	"io"
	"os"
)

// wrapWriter is a seam for tests: it wraps the temporary file's writer, so
// that a test can make a write fail partway.
var wrapWriter = func(w io.Writer) io.Writer { return w }

// pendingFile is a temporary file that replaces its destination on commit
// (atomicfile_unix.go, atomicfile_windows.go).
type pendingFile interface {
	io.Writer
	// commit fsyncs the file and renames it over the destination.
	commit() error
	// cleanup closes and removes the file unless it was committed.
	cleanup()
}

// writeFileAtomic writes path through a temporary file in its directory:
// written in full, fsynced, renamed over path and (where the system
// allows) the directory synced, so a reader or a crash sees the old file
// or the new one, never a part. A symlink at path is replaced, not written
// through. A file being replaced keeps its permissions; a new one gets
// perm (less the umask). On a failure before the rename path is untouched
// and the temporary file removed.
func writeFileAtomic(path string, perm os.FileMode, write func(io.Writer) error) error {
	p, err := newPendingFile(path, perm)
	if err != nil {
		return err
	}
	defer p.cleanup()
	w := bufio.NewWriterSize(wrapWriter(p), 64<<10)
	if err := write(w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return p.commit()
}
