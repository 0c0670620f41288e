package accbench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"

	"github.com/accelkit/accelkit/atomicfile"
)

// outDir is the -out directory. Every file accbench writes there goes
// through it: opened as an os.Root, so that no path (a symlinked traces/
// or peers/, say) leads a write out of the directory, and written by the
// atomicfile module's policy, so that a reader or a crash sees the old
// file or the new one, never a part: each file is written to a temporary
// file beside it, fsynced, renamed over its name and its directory synced
// (where the system allows); an existing file keeps its mode; a symlink
// or anything but a regular file at a name is refused, neither written
// through nor replaced. On a failure the destination is untouched and the
// temporary file removed.
type outDir struct {
	root *os.Root
	path string
}

// outFile is one file to write: a slash-separated name inside the
// directory, its permissions, and what goes in it.
type outFile struct {
	name  string
	perm  os.FileMode
	write func(io.Writer) error
}

// wrapWriter is a seam for tests: it wraps each temporary file's writer,
// so that a test can make a write fail partway.
var wrapWriter = func(w io.Writer) io.Writer { return w }

func openOutDir(dir string) (*outDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("-out %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("-out %s: %w", dir, err)
	}
	return &outDir{root: root, path: dir}, nil
}

func (o *outDir) Close() error { return o.root.Close() }

// mkdir creates a directory (and its parents) inside o.
func (o *outDir) mkdir(name string) error {
	if err := o.root.MkdirAll(name, 0o755); err != nil {
		return fmt.Errorf("-out %s: %w (accbench writes only inside -out and follows no link out of it)", o.path, err)
	}
	return nil
}

// writeFiles writes files atomically: each is written in full to its
// temporary file first, and only when every one has been written are they
// renamed into place, so a failure while writing changes none of them.
func (o *outDir) writeFiles(files ...outFile) error {
	pending := make([]*atomicfile.File, 0, len(files))
	defer func() {
		for _, p := range pending {
			_ = p.Cleanup() // a no-op once committed; the caller is failing otherwise
		}
	}()
	for _, f := range files {
		p, err := atomicfile.CreateIn(o.root, f.name, f.perm)
		if err != nil {
			return fmt.Errorf("write %s: %w", path.Join(o.path, f.name), err)
		}
		pending = append(pending, p)
		w := bufio.NewWriterSize(wrapWriter(p), 64<<10)
		err = f.write(w)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", path.Join(o.path, f.name), err)
		}
	}
	var errs []error
	for i, p := range pending {
		if err := p.Commit(); err != nil {
			errs = append(errs, fmt.Errorf("write %s: %w", path.Join(o.path, files[i].name), err))
		}
	}
	return errors.Join(errs...)
}
