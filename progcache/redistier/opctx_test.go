package redistier

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestOpContextDeadline: a call's context ends at its timeout with
// DeadlineExceeded, reports that deadline, and passes the parent's values
// through.
func TestOpContextDeadline(t *testing.T) {
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	start := time.Now()
	c := startOp(parent, 20*time.Millisecond)
	defer c.finish()
	if d, ok := c.Deadline(); !ok || d.Before(start.Add(20*time.Millisecond)) || d.After(time.Now().Add(20*time.Millisecond)) {
		t.Errorf("Deadline() = %v, %v; want about 20ms from the start", d, ok)
	}
	if err := c.Err(); err != nil {
		t.Errorf("Err() before the deadline = %v, want nil", err)
	}
	if v := c.Value(key{}); v != "v" {
		t.Errorf("Value = %v, want the parent's %q", v, "v")
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed 5s after a 20ms timeout")
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Errorf("Done closed after %v, before the 20ms timeout", took)
	}
	if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err() after the deadline = %v, want DeadlineExceeded", err)
	}
}

// TestOpContextParent: a call's context ends when its parent is
// cancelled, with the parent's error, and takes the parent's deadline
// when it is the earlier.
func TestOpContextParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	c := startOp(parent, time.Hour)
	defer c.finish()
	cancel()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed 5s after the parent was cancelled")
	}
	if err := c.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err() after the parent's cancel = %v, want Canceled", err)
	}

	soon := time.Now().Add(30 * time.Millisecond)
	short, cancel2 := context.WithDeadline(context.Background(), soon)
	defer cancel2()
	c2 := startOp(short, time.Hour)
	defer c2.finish()
	if d, _ := c2.Deadline(); !d.Equal(soon) {
		t.Errorf("Deadline() under a parent ending sooner = %v, want the parent's %v", d, soon)
	}
	<-c2.Done()
	if err := c2.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err() at the parent's deadline = %v, want DeadlineExceeded", err)
	}
}

// TestOpContextReuse: a context that ended is never handed out again, and
// one that is handed out is live, whatever mix of calls that finished in
// time, timed out and were cancelled came before, from many goroutines at
// once. Run with -race.
func TestOpContextReuse(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				parent, cancel := context.WithCancel(context.Background())
				if (g+i)%3 != 0 {
					cancel()
					parent, cancel = context.Background(), func() {}
				}
				timeout := time.Hour
				if (g+i)%5 == 0 {
					timeout = time.Microsecond
				}
				c := startOp(parent, timeout)
				if timeout == time.Hour {
					select {
					case <-c.Done():
						cancel()
						errs <- errors.New("a fresh context was already done")
						return
					default:
					}
					if err := c.Err(); err != nil {
						cancel()
						errs <- err
						return
					}
				}
				switch {
				case timeout != time.Hour:
					<-c.Done()
				case (g+i)%3 == 0 && i%2 == 0:
					cancel()
					<-c.Done()
				}
				c.finish()
				cancel()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestWindowContext: calls whose parent cannot end share a deadline at
// least Timeout and at most Timeout*(1+1/windowSlack) after each one's
// start, ending with DeadlineExceeded, each with its own parent's values;
// a call whose parent can end, or has a deadline of its own, gets a
// context of its own.
func TestWindowContext(t *testing.T) {
	c := newCallCache(t, true) // Timeout 20ms
	type key struct{}
	var ctxs []callCtx
	var starts []time.Time
	for i := range 3 {
		starts = append(starts, time.Now())
		ctxs = append(ctxs, c.startOp(context.WithValue(context.Background(), key{}, i)))
	}
	for i, ctx := range ctxs {
		defer ctx.finish()
		if _, ok := ctx.(*windowCtx); !ok {
			t.Fatalf("call %d under a parent that cannot end got a %T, want a *windowCtx", i, ctx)
		}
		d, ok := ctx.Deadline()
		if lo, hi := starts[i].Add(c.opts.Timeout), starts[i].Add(c.opts.Timeout+c.opts.Timeout/windowSlack); !ok || d.Before(lo) || d.After(hi.Add(time.Millisecond)) {
			t.Errorf("call %d: Deadline() = %v, %v; want within [%v, %v] (its start plus Timeout, plus at most Timeout/%d)", i, d, ok, lo, hi, windowSlack)
		}
		if v := ctx.Value(key{}); v != i {
			t.Errorf("call %d: Value = %v, want its own parent's %d", i, v, i)
		}
		if err := ctx.Err(); err != nil {
			t.Errorf("call %d: Err() before the deadline = %v", i, err)
		}
	}
	select {
	case <-ctxs[0].Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed 5s after a 20ms Timeout")
	}
	if took := time.Since(starts[0]); took < c.opts.Timeout {
		t.Errorf("Done closed %v after the start, before the Timeout", took)
	}
	if err := ctxs[0].Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err() after the deadline = %v, want DeadlineExceeded", err)
	}
	// A window that ended is not handed out again.
	if next := c.startOp(context.Background()); next.Err() != nil {
		t.Errorf("a call after the window ended got a context that ended: %v", next.Err())
	}

	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	own := c.startOp(parent)
	defer own.finish()
	if _, ok := own.(*opContext); !ok {
		t.Errorf("a call under a parent that can end got a %T, want an *opContext", own)
	}
	withDeadline := dlOnly{context.Background(), time.Now().Add(time.Millisecond)}
	early := c.startOp(withDeadline)
	defer early.finish()
	if d, _ := early.Deadline(); !d.Equal(withDeadline.d) {
		t.Errorf("a call under a parent with an earlier deadline: Deadline() = %v, want the parent's %v", d, withDeadline.d)
	}
}

// dlOnly is a context with a deadline and no Done channel.
type dlOnly struct {
	context.Context
	d time.Time
}

func (c dlOnly) Deadline() (time.Time, bool) { return c.d, true }

// TestCallValueAllocs: a call under a context that cannot end allocates
// at most its context's small wrapper (the shared window's timer is
// armed once per Timeout/16, not per call); context.WithTimeout per call
// allocated a context, a timer and a channel.
func TestCallValueAllocs(t *testing.T) {
	c := newCallCache(t, true)
	op := func(context.Context) (int, error) { return 1, nil }
	callValue(context.Background(), c, "warm", op)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := callValue(context.Background(), c, "alloc", op); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Errorf("callValue under context.Background allocates %v times a call, want at most 1", n)
	}
}

// TestOpContextParentDeadlineFirst: when the caller's deadline comes before
// Options.Timeout, the call's context ends only through the caller's, so
// callValue sees the caller's error when it looks (ctx.Err() != nil) and
// does not count the caller's deadline as the server's timeout. A timer of
// the call's own, due at the same instant, used to win that race now and
// then (TestStalledServer failed about 2 runs in 5).
func TestOpContextParentDeadlineFirst(t *testing.T) {
	for i := range 200 {
		parent, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		c := startOp(parent, time.Hour)
		<-c.Done()
		if parent.Err() == nil {
			cancel()
			t.Fatalf("run %d: the call's context ended before the caller's, whose deadline it shares", i)
		}
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Fatalf("run %d: Err = %v, want the caller's DeadlineExceeded", i, c.Err())
		}
		c.finish()
		cancel()
	}
}
