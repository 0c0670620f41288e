package trace

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestGeneratorsBalancedAndDeterministic(t *testing.T) {
	for name, gen := range map[string]func() []Event{
		"training":  func() []Event { return Training(DefaultTraining) },
		"inference": func() []Event { return Inference(DefaultInference) },
		"shapes":    func() []Event { return Training(DefaultShapes) },
	} {
		t.Run(name, func(t *testing.T) {
			a, b := gen(), gen()
			var ba, bb bytes.Buffer
			if err := Write(&ba, a); err != nil {
				t.Fatal(err)
			}
			Write(&bb, b)
			if !bytes.Equal(ba.Bytes(), bb.Bytes()) {
				t.Fatal("two runs with the same parameters differ")
			}
			s := Summarize(a)
			if s.Allocs != s.Frees || s.Allocs == 0 {
				t.Errorf("allocs %d, frees %d: a generated trace frees everything it allocates", s.Allocs, s.Frees)
			}
			t.Logf("%s: %d events, peak live %.2f GiB, largest %.1f MiB, sha256 %x",
				name, s.Events, float64(s.PeakLive)/(1<<30), float64(s.MaxSize)/(1<<20), sha256.Sum256(ba.Bytes()))
		})
	}
}

func TestSeedChangesTrace(t *testing.T) {
	p := DefaultTraining
	p.Seed++
	var a, b bytes.Buffer
	Write(&a, Training(DefaultTraining))
	Write(&b, Training(p))
	if bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("a different seed gave the same trace")
	}
}

func TestReadWriteRoundTrip(t *testing.T) {
	events := Inference(DefaultInference)[:200]
	var buf bytes.Buffer
	if err := Write(&buf, events); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(events) {
		t.Fatalf("read %d events, wrote %d", len(got), len(events))
	}
	for i := range got {
		w := events[i]
		w.Time = got[i].Time // %.6f rounding
		if got[i].Line != i+2 {
			t.Fatalf("event %d: line %d, want %d (after the header)", i, got[i].Line, i+2)
		}
		w.Line = got[i].Line
		if got[i] != w {
			t.Fatalf("event %d: read %+v, wrote %+v", i, got[i], events[i])
		}
	}
}

func TestReadForms(t *testing.T) {
	in := Header + "\n" +
		"140573312345856,1634567890.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020\n" +
		"\n" +
		"7,10:30:45.5,deallocate,7f8a40000000,1024,0x0\n" +
		"7,10:30:45:250000,allocate failure,(nil),1099511627776,0\n"
	got, err := Read(bytes.NewBufferString(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Thread: 140573312345856, Time: 1634567890.123456, Action: Alloc, Ptr: 0x7f8a40000000, Size: 1024, Stream: 0x7f8a38001020, Line: 2},
		{Thread: 7, Time: 10*3600 + 30*60 + 45.5, Action: Free, Ptr: 0x7f8a40000000, Size: 1024, Line: 4},
		{Thread: 7, Time: 10*3600 + 30*60 + 45.25, Action: AllocFailed, Size: 1 << 40, Line: 5},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestReadErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		line int
		want string
	}{
		{"", 1, "empty, want the header"},
		{"a,b,c\n", 1, "header"},
		{Header + "\n1,2,allocate,0x1,10\n", 2, "5 fields, want 6"},
		{Header + "\n1,2,allocate,0x1,10,0\n\n1,2,alloc,0x1,10,0\n", 4, `action "alloc": want allocate, free, deallocate or allocate failure`},
		{Header + "\nx,2,allocate,0x1,10,0\n", 2, "thread"},
		{Header + "\n1,-2,allocate,0x1,10,0\n", 2, "time"},
		{Header + "\n1,2,allocate,zz,10,0\n", 2, "pointer"},
		{Header + "\n1,2,allocate,0x1,-10,0\n", 2, "size"},
		{Header + "\n1,2,allocate,0x1,10,\n", 2, "stream"},
		{Header + "\n" + string(bytes.Repeat([]byte("1"), MaxLineBytes+10)) + "\n", 2, "longer than"},
		{Header + "\n1,2," + string(bytes.Repeat([]byte("x"), 500)) + ",0x1,10,0\n", 2, `xxx...": want allocate`},
	} {
		_, err := Read(bytes.NewBufferString(tc.in))
		var le *LineError
		if !errors.As(err, &le) || le.Line != tc.line || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Read(%.40q) error = %v, want a *LineError at line %d mentioning %q", tc.in, err, tc.line, tc.want)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("error of %d bytes: quoted input is not clipped", len(err.Error()))
		}
	}
}

func FuzzRead(f *testing.F) {
	f.Add(Header + "\n1,1.5,allocate,0x10,512,0x0\n1,1.6,free,0x10,512,0x0\n")
	f.Add(Header + "\n7,10:30:45:250000,allocate failure,(nil),1,0\n")
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, in string) {
		events, err := Read(bytes.NewBufferString(in))
		if err != nil {
			return
		}
		// Whatever parses writes back and parses to the same events.
		var buf bytes.Buffer
		if err := Write(&buf, events); err != nil {
			t.Fatal(err)
		}
		again, err := Read(&buf)
		if err != nil {
			t.Fatalf("re-reading written trace: %v", err)
		}
		if len(again) != len(events) {
			t.Fatalf("%d events became %d", len(events), len(again))
		}
		for i := range again {
			a, b := again[i], events[i]
			a.Time, b.Time = 0, 0
			a.Line, b.Line = 0, 0
			if a != b {
				t.Fatalf("event %d: %+v became %+v", i, events[i], again[i])
			}
		}
	})
}

// bump is a trivial allocator for replay tests: distinct addresses, and it
// rejects frees of pointers it does not hold.
type bump struct {
	next  uint64
	live  map[uint64]bool
	limit int
}

func (b *bump) Alloc(size, stream uint64) (uint64, error) {
	if b.limit > 0 && len(b.live) >= b.limit {
		return 0, fmt.Errorf("bump: full")
	}
	b.next += size + 1
	b.live[b.next] = true
	return b.next, nil
}

func (b *bump) Free(p uint64) error {
	if !b.live[p] {
		return fmt.Errorf("bump: unknown 0x%x", p)
	}
	delete(b.live, p)
	return nil
}

func TestReplay(t *testing.T) {
	events := Training(DefaultTraining)
	b := &bump{live: map[uint64]bool{}}
	res, err := Replay(events, b)
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(events)
	if res.Allocs != s.Allocs || res.Frees != s.Frees || res.Failed != 0 || len(b.live) != 0 {
		t.Errorf("replay %+v of %+v left %d live", res, s, len(b.live))
	}

	// A capped allocator: failures are counted, their frees skipped, and
	// the allocator still ends empty.
	b = &bump{live: map[uint64]bool{}, limit: 20}
	res, err = Replay(events, b)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed == 0 || res.SkippedFrees != res.Failed || res.UnknownFrees != 0 || res.FirstErr == nil || len(b.live) != 0 {
		t.Errorf("capped replay: %+v, %d live", res, len(b.live))
	}
}

// idleLog records StreamIdle calls and checks them against the live
// allocations it handed out.
type idleLog struct {
	bump
	streamOf map[uint64]uint64 // our pointer -> stream
	live     map[uint64]int    // stream -> live allocations
	idle     []uint64
	t        *testing.T
}

func (l *idleLog) Alloc(size, stream uint64) (uint64, error) {
	p, err := l.bump.Alloc(size, stream)
	if err == nil {
		l.streamOf[p] = stream
		l.live[stream]++
	}
	return p, err
}

func (l *idleLog) Free(p uint64) error {
	s := l.streamOf[p]
	delete(l.streamOf, p)
	l.live[s]--
	return l.bump.Free(p)
}

func (l *idleLog) StreamIdle(stream uint64) {
	if l.live[stream] != 0 {
		l.t.Errorf("StreamIdle(0x%x) with %d allocations live on it", stream, l.live[stream])
	}
	l.idle = append(l.idle, stream)
}

func TestReplayCountsAndStreamIdle(t *testing.T) {
	in := Header + `
1,1.0,free,0x900,64,0x1
1,1.1,allocate,0x100,64,0x1
1,1.2,allocate,0x200,64,0x1
1,1.3,allocate,(nil),0,0x1
1,1.4,free,(nil),0,0x1
1,1.5,allocate failure,(nil),1099511627776,0x1
1,1.6,free,0x100,64,0x1
1,1.7,allocate,0x300,64,0x2
1,1.8,allocate,0x400,64,0x3
1,1.9,free,0x400,64,0x3
1,2.0,free,0x200,64,0x1
1,2.1,free,0x300,64,0x2
`
	events, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	// Room for two live blocks: 0x400 on stream 3 fails (0x200 and 0x300
	// are live), so stream 3 is idle at once and its free is skipped.
	l := &idleLog{bump: bump{live: map[uint64]bool{}, limit: 2}, streamOf: map[uint64]uint64{}, live: map[uint64]int{}, t: t}
	res, err := Replay(events, l)
	if err != nil {
		t.Fatal(err)
	}
	want := Result{Allocs: 3, Frees: 3, Failed: 1, SkippedFrees: 1, TraceFailures: 1, UnknownFrees: 1, NullAllocs: 1}
	got := res
	got.Elapsed, got.FirstErr = 0, nil
	if got != want {
		t.Errorf("result %+v\nwant   %+v", got, want)
	}
	if res.FirstErr == nil || !strings.Contains(res.FirstErr.Error(), "line 10 ") {
		t.Errorf("first error %v: want it to name line 10", res.FirstErr)
	}
	if fmt.Sprint(l.idle) != "[3 1 2]" {
		t.Errorf("StreamIdle calls %v, want [3 1 2] (stream 3 after its failure, 1 and 2 after their last free)", l.idle)
	}
}

func TestReplayRefusesInconsistentTrace(t *testing.T) {
	in := Header + `
1,1.0,allocate,0x100,64,0x1
1,1.1,allocate,0x200,64,0x1

1,1.2,allocate,0x100,64,0x2
`
	events, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	for name, run := range map[string]func() error{
		"Check":  func() error { return Check(events) },
		"Replay": func() error { _, err := Replay(events, &bump{live: map[uint64]bool{}}); return err },
	} {
		err := run()
		var le *LineError
		if !errors.As(err, &le) || le.Line != 5 || !strings.Contains(err.Error(), "allocates 0x100, which the trace allocated before and has not freed") {
			t.Errorf("%s: %v, want a *LineError at line 5 naming 0x100", name, err)
		}
	}
	// Generated events have no line: the error names the event.
	events[2].Line = 0
	if err := Check(events); err == nil || !strings.Contains(err.Error(), "event 3 allocates") {
		t.Errorf("Check of a generated event: %v", err)
	}
	if err := Check(events[:2]); err != nil {
		t.Errorf("Check of a consistent prefix: %v", err)
	}
}

func TestManyStreams(t *testing.T) {
	for _, keep := range []bool{false, true} {
		ev := ManyStreams(StreamsParams{Streams: 1000, Size: 1024, Keep: keep})
		s := Summarize(ev)
		if s.Streams != 1000 || s.Allocs != 1000 || s.Frees != 1000 || Check(ev) != nil {
			t.Errorf("keep %v: %+v", keep, s)
		}
		if want := uint64(1024); keep {
			want = 1000 * 1024
			if s.PeakLive != want {
				t.Errorf("keep: peak live %d, want %d", s.PeakLive, want)
			}
		} else if s.PeakLive != want {
			t.Errorf("no keep: peak live %d, want %d", s.PeakLive, want)
		}
	}
}

// TestShapesChangeEachStep checks the shape-changing trace's schedule,
// recovered from the trace itself: each forward layer allocates its
// layer-norm output (tokens x hidden), its QKV (three times that), the
// attention scores and the probabilities (batch x heads x seq x seq each),
// then frees the scores. Every step must differ in shape from the one
// before, batch must follow the token budget, and the sequence lengths
// must warm up.
func TestShapesChangeEachStep(t *testing.T) {
	p := DefaultShapes
	unit := uint64(p.Hidden * p.ElemBytes)
	ev := Training(p)
	var seqs, batches []uint64 // per forward layer
	for k := 0; k+4 < len(ev); k++ {
		ln, qkv, sc, pr, fr := ev[k], ev[k+1], ev[k+2], ev[k+3], ev[k+4]
		if ln.Action != Alloc || qkv.Action != Alloc || sc.Action != Alloc || pr.Action != Alloc || fr.Action != Free ||
			qkv.Size != 3*ln.Size || sc.Size != pr.Size || fr.Ptr != sc.Ptr || ln.Size%unit != 0 {
			continue
		}
		tok := ln.Size / unit
		s := sc.Size / (tok * uint64(p.Heads*p.ElemBytes))
		if s == 0 || tok%s != 0 {
			t.Fatalf("event %d: scores of %d bytes for %d tokens: not batch x heads x seq x seq", k, sc.Size, tok)
		}
		seqs, batches = append(seqs, s), append(batches, tok/s)
	}
	if len(seqs) != p.Steps*p.Layers {
		t.Fatalf("found %d forward layers, want %d steps x %d layers", len(seqs), p.Steps, p.Layers)
	}
	for step := range p.Steps {
		s, b := seqs[step*p.Layers], batches[step*p.Layers]
		for l := 1; l < p.Layers; l++ {
			if seqs[step*p.Layers+l] != s || batches[step*p.Layers+l] != b {
				t.Fatalf("step %d: layers of different shapes", step)
			}
		}
		if b != max(uint64(p.TokenBudget)/s, 1) {
			t.Errorf("step %d: batch %d for sequence %d, want the token budget %d over the sequence", step, b, s, p.TokenBudget)
		}
		if window := p.SeqLens[:min(len(p.SeqLens), 2+step*len(p.SeqLens)/p.Steps)]; !slices.Contains(window, int(s)) {
			t.Errorf("step %d: sequence %d outside the warmed-up buckets %v", step, s, window)
		}
		if step > 0 && s == seqs[(step-1)*p.Layers] {
			t.Errorf("step %d: same shape (%d x %d) as the step before", step, b, s)
		}
	}
	if first, last := seqs[0], seqs[len(seqs)-1]; last <= first {
		t.Errorf("sequence %d at the start, %d at the end: no warmup", first, last)
	}
}
