package accbench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
)

// outDir is the -out directory. Every file accbench writes there goes
// through it: opened as an os.Root, so that no path (a symlinked traces/
// or peers/, say) leads a write out of the directory, and written
// atomically, so that a reader or a crash sees the old file or the new
// one, never a part: each file is written to a temporary file, fsynced,
// renamed over its name (replacing a symlink there, never writing through
// it), and its directory synced where the system allows. On a failure the
// destination is untouched and the temporary file removed.
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

// pendingOut is a temporary file that replaces its destination on commit
// (outdir_unix.go, outdir_windows.go).
type pendingOut interface {
	io.Writer
	commit() error // fsync, rename over the destination
	cleanup()      // close and remove, unless committed
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
	pending := make([]pendingOut, 0, len(files))
	defer func() {
		for _, p := range pending {
			p.cleanup()
		}
	}()
	for _, f := range files {
		p, err := o.newPending(f.name, f.perm)
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
	dirs := map[string]bool{}
	for i, p := range pending {
		if err := p.commit(); err != nil {
			errs = append(errs, fmt.Errorf("write %s: %w", path.Join(o.path, files[i].name), err))
			continue
		}
		dirs[path.Dir(files[i].name)] = true
	}
	for dir := range dirs {
		if err := o.syncDir(dir); err != nil {
			errs = append(errs, fmt.Errorf("%s: written, but syncing the directory failed, so a crash may lose it: %w", path.Join(o.path, dir), err))
		}
	}
	return errors.Join(errs...)
}
