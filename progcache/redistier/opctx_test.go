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
				parent := context.Background()
				var cancel context.CancelFunc = func() {}
				if (g+i)%3 == 0 {
					parent, cancel = context.WithCancel(parent)
				}
				timeout := time.Hour
				if (g+i)%5 == 0 {
					timeout = time.Microsecond
				}
				c := startOp(parent, timeout)
				if timeout == time.Hour {
					select {
					case <-c.Done():
						errs <- errors.New("a fresh context was already done")
						return
					default:
					}
					if err := c.Err(); err != nil {
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
