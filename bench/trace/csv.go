// Package trace reads, writes, generates and replays device allocation
// traces in RAPIDS RMM's logging_resource_adaptor CSV format:
//
//	Thread,Time,Action,Pointer,Size,Stream
//	140573312345856,1634567890.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020
//
// so that logs captured from an RMM application replay through devalloc,
// and traces generated here replay through other allocators (PyTorch's, via
// bench/peers) unchanged.
package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Action is what one trace line does.
type Action uint8

const (
	Alloc       Action = iota // "allocate"
	Free                      // "free" (RMM before 24.x) or "deallocate"
	AllocFailed               // "allocate failure": the traced allocator refused the request
)

func (a Action) String() string {
	switch a {
	case Alloc:
		return "allocate"
	case Free:
		return "free"
	case AllocFailed:
		return "allocate failure"
	}
	return fmt.Sprintf("Action(%d)", a)
}

// Event is one line of a trace.
type Event struct {
	Thread uint64
	Time   float64 // seconds; RMM writes seconds since the epoch or HH:MM:SS.ffffff
	Action Action
	Ptr    uint64 // address in the traced process; a key, not an address here
	Size   uint64
	Stream uint64 // stream handle in the traced process; a key
	Line   int    // line in the file Read parsed it from (1-based); 0 for generated events
}

// LineError is what is wrong with one line of a trace: a line Read cannot
// parse, or an event Check or Replay finds inconsistent with the lines
// before it.
type LineError struct {
	Line int    // 1-based; 0 when the event came from no file
	Msg  string // what is wrong and what is valid
}

func (e *LineError) Error() string {
	if e.Line == 0 {
		return "trace: " + e.Msg
	}
	return fmt.Sprintf("trace line %d: %s", e.Line, e.Msg)
}

// where names an event in errors: its line, else its position.
func where(ev Event, i int) string {
	if ev.Line > 0 {
		return fmt.Sprintf("line %d", ev.Line)
	}
	return fmt.Sprintf("event %d", i+1)
}

// Header is the CSV header RMM writes and Write emits.
const Header = "Thread,Time,Action,Pointer,Size,Stream"

// MaxLineBytes bounds one line, so a corrupt file cannot make Read buffer
// without limit.
const MaxLineBytes = 4096

// Read parses a trace. The header is required; blank lines are skipped.
// A line that does not parse is a *LineError naming the line and what is
// valid there.
func Read(r io.Reader) ([]Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), MaxLineBytes)
	var events []Event
	line := 0
	sawHeader := false
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		if !sawHeader {
			if strings.ReplaceAll(text, " ", "") != Header {
				return nil, &LineError{line, fmt.Sprintf("header %q, want %q (RMM logging_resource_adaptor CSV)", clip(text), Header)}
			}
			sawHeader = true
			continue
		}
		ev, err := parseLine(text)
		if err != nil {
			return nil, &LineError{line, err.Error()}
		}
		ev.Line = line
		events = append(events, ev)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &LineError{line + 1, fmt.Sprintf("longer than %d bytes, want one CSV record of 6 fields (%s)", MaxLineBytes, Header)}
		}
		return nil, err
	}
	if !sawHeader {
		return nil, &LineError{1, fmt.Sprintf("empty, want the header %q", Header)}
	}
	return events, nil
}

// clip shortens text quoted in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

func parseLine(text string) (Event, error) {
	f := strings.Split(text, ",")
	if len(f) != 6 {
		return Event{}, fmt.Errorf("%d fields, want 6 (%s)", len(f), Header)
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	var ev Event
	var err error
	if ev.Thread, err = strconv.ParseUint(f[0], 0, 64); err != nil {
		return ev, fmt.Errorf("thread %q: want an integer", clip(f[0]))
	}
	if ev.Time, err = parseTime(f[1]); err != nil {
		return ev, err
	}
	switch f[2] {
	case "allocate":
		ev.Action = Alloc
	case "free", "deallocate":
		ev.Action = Free
	case "allocate failure":
		ev.Action = AllocFailed
	default:
		return ev, fmt.Errorf("action %q: want allocate, free, deallocate or allocate failure", clip(f[2]))
	}
	if ev.Ptr, err = parseHex(f[3]); err != nil {
		return ev, fmt.Errorf("pointer %q: want a hexadecimal address such as 0x7f8a40000000", clip(f[3]))
	}
	if ev.Size, err = strconv.ParseUint(f[4], 10, 64); err != nil {
		return ev, fmt.Errorf("size %q: want a byte count", clip(f[4]))
	}
	if ev.Stream, err = parseHex(f[5]); err != nil {
		return ev, fmt.Errorf("stream %q: want a hexadecimal handle such as 0x0", clip(f[5]))
	}
	return ev, nil
}

func parseHex(s string) (uint64, error) {
	if s == "(nil)" { // glibc's %p of a null pointer
		return 0, nil
	}
	return strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"), 16, 64)
}

// parseTime accepts seconds ("1634567890.123456") and RMM's older spdlog
// clock form ("10:30:45.123456" or "10:30:45:123456").
func parseTime(s string) (float64, error) {
	if !strings.Contains(s, ":") {
		t, err := strconv.ParseFloat(s, 64)
		if err != nil || t < 0 {
			return 0, fmt.Errorf("time %q: want seconds such as 1634567890.123456 or HH:MM:SS.ffffff", clip(s))
		}
		return t, nil
	}
	parts := strings.Split(strings.ReplaceAll(s, ".", ":"), ":")
	if len(parts) < 3 || len(parts) > 4 {
		return 0, fmt.Errorf("time %q: want HH:MM:SS.ffffff", clip(s))
	}
	var v [4]uint64
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("time %q: want HH:MM:SS.ffffff", clip(s))
		}
		v[i] = n
	}
	frac := 0.0
	if len(parts) == 4 {
		frac = float64(v[3]) / pow10(len(parts[3]))
	}
	return float64(v[0]*3600+v[1]*60+v[2]) + frac, nil
}

func pow10(n int) float64 {
	f := 1.0
	for range n {
		f *= 10
	}
	return f
}

// Write emits events in RMM's CSV format with the header.
func Write(w io.Writer, events []Event) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, Header)
	for _, ev := range events {
		fmt.Fprintf(bw, "%d,%.6f,%s,0x%x,%d,0x%x\n", ev.Thread, ev.Time, ev.Action, ev.Ptr, ev.Size, ev.Stream)
	}
	return bw.Flush()
}
