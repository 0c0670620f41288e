package trace

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"testing"
)

func TestGeneratorsBalancedAndDeterministic(t *testing.T) {
	for name, gen := range map[string]func() []Event{
		"training":  func() []Event { return Training(DefaultTraining) },
		"inference": func() []Event { return Inference(DefaultInference) },
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
		{Thread: 140573312345856, Time: 1634567890.123456, Action: Alloc, Ptr: 0x7f8a40000000, Size: 1024, Stream: 0x7f8a38001020},
		{Thread: 7, Time: 10*3600 + 30*60 + 45.5, Action: Free, Ptr: 0x7f8a40000000, Size: 1024},
		{Thread: 7, Time: 10*3600 + 30*60 + 45.25, Action: AllocFailed, Size: 1 << 40},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestReadErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"a,b,c\n", "header"},
		{Header + "\n1,2,allocate,0x1,10\n", "line 2: 5 fields"},
		{Header + "\n1,2,alloc,0x1,10,0\n", `action "alloc"`},
		{Header + "\nx,2,allocate,0x1,10,0\n", "thread"},
		{Header + "\n1,-2,allocate,0x1,10,0\n", "time"},
		{Header + "\n1,2,allocate,zz,10,0\n", "pointer"},
		{Header + "\n1,2,allocate,0x1,-10,0\n", "size"},
		{Header + "\n1,2,allocate,0x1,10,\n", "stream"},
		{Header + "\n" + string(bytes.Repeat([]byte("1"), MaxLineBytes+10)) + "\n", "longer than"},
	} {
		_, err := Read(bytes.NewBufferString(tc.in))
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("Read(%.40q) error = %v, want it to mention %q", tc.in, err, tc.want)
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
	if res.Failed == 0 || res.UnknownFrees != res.Failed || res.FirstErr == nil || len(b.live) != 0 {
		t.Errorf("capped replay: %+v, %d live", res, len(b.live))
	}
}
