package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// readInput reads the GraphDef at path, which must be a regular file (a
// symbolic link to one is followed: reading through it changes nothing) of
// at most limit bytes. The size is checked before reading, from Stat, and
// again while reading, so a file that grows meanwhile is refused too.
func readInput(path string, limit int) ([]byte, error) {
	// Stat the path before opening it: opening a FIFO blocks until a
	// writer comes, and reading /dev/zero never ends.
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkInput(path, fi, limit); err != nil {
		return nil, err
	}
	// Non-blocking, in case a FIFO took the path's place since the Stat:
	// the open then returns at once and the check below refuses it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The path may name another file now: check the one opened.
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := checkInput(path, fi, limit); err != nil {
		return nil, err
	}
	data, err := readBounded(f, fi.Size(), limit)
	if err != nil {
		return nil, fmt.Errorf("-in %s: %w", path, err)
	}
	return data, nil
}

func checkInput(path string, fi fs.FileInfo, limit int) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("-in %s is %s, not a regular file; give the path of a GraphDef file", path, kind(fi.Mode()))
	}
	if fi.Size() > int64(limit) {
		return fmt.Errorf("-in %s is %d bytes, more than the limit of %d bytes (-max-bytes)", path, fi.Size(), limit)
	}
	return nil
}

// readBounded reads r to its end and fails when it holds more than limit
// bytes. size, the length the file had when stat'ed, sizes the buffer;
// reading through io.LimitReader(r, limit+1) catches a file that grew past
// the limit since without reading more than one byte beyond it.
func readBounded(r io.Reader, size int64, limit int) ([]byte, error) {
	buf := make([]byte, 0, min(size, int64(limit))+1) // +1: see EOF without growing
	lr := io.LimitReader(r, int64(limit)+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(buf) > limit {
		return nil, fmt.Errorf("grew past the limit of %d bytes (-max-bytes) while being read", limit)
	}
	return buf, nil
}

// newFilePerm is the mode of a new output file, before the umask; it is
// what os.WriteFile was given before outputs were written atomically.
const newFilePerm fs.FileMode = 0o644

// checkOutput checks, before the work, that -out is a regular file or
// does not exist, as atomicfile will when writing it, with messages that
// name -out. A symbolic link is refused, not replaced (the user's link
// would silently become a file) nor written through (into a file
// graphpass did not name); a directory, device, FIFO or socket cannot be
// replaced by renaming a file over it.
func checkOutput(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	m := fi.Mode()
	if m&fs.ModeSymlink != 0 {
		target, err := os.Readlink(path)
		if err != nil {
			target = "?"
		}
		return fmt.Errorf("-out %s is a symbolic link (to %s); graphpass replaces its output and neither replaces a link nor writes through it: give the path of the file itself", path, target)
	}
	if !m.IsRegular() {
		return fmt.Errorf("-out %s is %s; graphpass writes a regular file by renaming a new one over -out: give a file path", path, kind(m))
	}
	return nil
}

// kind describes a file mode for error messages.
func kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	default:
		return "an irregular file"
	}
}
