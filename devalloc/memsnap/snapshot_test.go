package memsnap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"segments":[{"device":0,"address":4096,"total_size":2097152,"blocks":[{"address":4096,"size":512,"state":"active_allocated"}]}],"device_traces":[[{"action":"alloc","addr":4096,"size":512}]]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := s.WriteJSON(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(&buf); err != nil {
			t.Fatalf("re-decoding our own encoding: %v", err)
		}
	})
}

// TestReadLimit: ReadLimit reads at most one byte past
// its limit and says which limit refused the input and how to raise it.
func TestReadLimit(t *testing.T) {
	var buf bytes.Buffer
	s := &Snapshot{Segments: []SegmentInfo{}, DeviceTraces: [][]TraceEntry{{{Action: ActionAlloc, Addr: 4096, Size: 512}}}}
	if err := s.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	n := int64(buf.Len())
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{n, true}, {math.MaxInt64, true}, {n - 1, false}, {1, false}} {
		r := &countingReader{r: bytes.NewReader(buf.Bytes())}
		got, err := ReadLimit(r, tc.limit)
		if tc.ok {
			if err != nil || len(got.DeviceTraces[0]) != 1 {
				t.Errorf("limit %d of a %d-byte snapshot: %v", tc.limit, n, err)
			}
			continue
		}
		if !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), fmt.Sprintf("read limit of %d bytes", tc.limit)) ||
			!strings.Contains(err.Error(), "memviz -max-bytes") {
			t.Errorf("limit %d of a %d-byte snapshot: err %v, want ErrInvalidValue naming the limit and how to raise it", tc.limit, n, err)
		}
		if r.n > tc.limit+1 {
			t.Errorf("limit %d: read %d bytes", tc.limit, r.n)
		}
	}
	for _, limit := range []int64{0, -1} {
		if _, err := ReadLimit(bytes.NewReader(buf.Bytes()), limit); !errors.Is(err, driver.ErrInvalidValue) {
			t.Errorf("limit %d: err %v, want ErrInvalidValue", limit, err)
		}
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// FuzzReadLimit: under any limit, an input is either refused
// with the limit's error, having been read at most one byte past it, or
// decodes as Read decodes it.
func FuzzReadLimit(f *testing.F) {
	good := `{"segments":[{"device":0,"address":4096,"total_size":2097152,"blocks":[{"address":4096,"size":512,"state":"active_allocated"}]}],"device_traces":[[{"action":"alloc","addr":4096,"size":512}]]}`
	f.Add([]byte(good), uint16(len(good)))
	f.Add([]byte(good), uint16(len(good)-1))
	f.Add([]byte(good+"\n"), uint16(len(good)))
	f.Add([]byte(`{"segments":[]}`+strings.Repeat(" ", 600)), uint16(20))
	f.Add([]byte(`{"segments":["`+strings.Repeat("\xff", 64)+`"]}`), uint16(40))
	f.Add([]byte(`[`), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, limit uint16) {
		lim := int64(limit) + 1
		r := &countingReader{r: bytes.NewReader(data)}
		s, err := ReadLimit(r, lim)
		if r.n > lim+1 {
			t.Fatalf("limit %d: read %d bytes", lim, r.n)
		}
		if err != nil {
			if int64(len(data)) <= lim && strings.Contains(err.Error(), "read limit") {
				t.Fatalf("a %d-byte input refused under a limit of %d: %v", len(data), lim, err)
			}
			return
		}
		want, err := Read(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("decodes under limit %d but not under Read's: %v", lim, err)
		}
		var a, b bytes.Buffer
		if err := s.WriteJSON(&a); err != nil {
			t.Fatal(err)
		}
		if err := want.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("limit %d decodes differently:\n%s\n%s", lim, a.Bytes(), b.Bytes())
		}
	})
}

// TestPicklePath: the pickle's name is the JSON's with its extension
// replaced, and WriteFiles refuses a path that already names the pickle
// (the two files would have one name), writing nothing.
func TestPicklePath(t *testing.T) {
	for in, want := range map[string]string{"a/s.json": "a/s.pickle", "a/s": "a/s.pickle", "a.b/s": "a.b/s.pickle", "s.tar.gz": "s.tar.pickle"} {
		if got := PicklePath(in); got != want {
			t.Errorf("PicklePath(%q) = %q, want %q", in, got, want)
		}
	}
	path := filepath.Join(t.TempDir(), "snap.pickle")
	s := &Snapshot{Segments: []SegmentInfo{}}
	if err := s.WriteFiles(path); !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "snap.pickle") {
		t.Fatalf("WriteFiles(%q) = %v, want an error naming it", path, err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("a file was written at %s", path)
	}
}
