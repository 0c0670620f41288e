//go:build !linux

package progcache

import (
	"io"
	"os"
	"time"
)

// entryStat is the fstat of the file readEntry read.
type entryStat struct{ fi os.FileInfo }

func (e *entryStat) size() int64        { return e.fi.Size() }
func (e *entryStat) modTime() time.Time { return e.fi.ModTime() }
func (e *entryStat) info() os.FileInfo  { return e.fi }

// readEntry reads the whole file at p with one read sized by its fstat. A
// file over maxRecordRead, or one that cannot be read whole, returns no
// bytes and no error, so it decodes as corrupt.
func readEntry(p string) ([]byte, entryStat, error) {
	var e entryStat
	f, err := os.Open(p)
	if err != nil {
		return nil, e, err
	}
	defer f.Close()
	if e.fi, err = f.Stat(); err != nil {
		return nil, e, err
	}
	if e.fi.Size() > maxRecordRead {
		return nil, e, nil
	}
	b := make([]byte, e.fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		// The file shrank under us: only a foreign writer does that.
		return nil, e, nil
	}
	return b, e, nil
}

// sameIdentity reports whether a and b are the same file.
func sameIdentity(a, b os.FileInfo) bool { return os.SameFile(a, b) }
