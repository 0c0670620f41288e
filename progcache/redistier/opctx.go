package redistier

// The context of one Redis call.
//
// callValue bounds each call by Options.Timeout with a context that ends
// then, or when the caller's does. context.WithTimeout allocates a
// context, a timer and a channel per call and arms and stops the timer:
// 2.2-3.7 µs a call beside a loopback GET of 64 KiB that takes about
// 70 µs (the timer alone, armed and stopped, 1-2 µs of it), where a
// context that only reports a deadline costs nothing measurable. go-redis
// reads Deadline for its socket deadlines and Done for its pool and dial
// waits, so Done must still close on time.
//
// A caller's context that cannot end (Background, or one made by
// WithoutCancel or WithValue of such) is the usual case: the calls whose
// parent is one and that start within Timeout/16 of each other share one
// deadline, an opWindow, Timeout/16 after the first of them starts plus
// Timeout, and one timer, so a call is given up at most Timeout/16 past
// its own Timeout. A call whose parent can end, or has a deadline of its
// own, gets an opContext, whose timer and channel are pooled from call to
// call.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// callCtx is the context of one call. finish releases it, once the call
// is over: op has returned, or was abandoned.
type callCtx interface {
	context.Context
	finish()
}

// windowSlack is the share of Options.Timeout by which the calls that
// share an opWindow may be given up late: Timeout/windowSlack at most.
const windowSlack = 16

// opWindow is the deadline of the calls that start before openUntil and
// whose parents cannot end (Cache.startOp).
//
// Locking: openUntil, deadline and done are set before the window is
// shared; ended is set, then done closed, by the window's timer.
type opWindow struct {
	openUntil time.Time
	deadline  time.Time
	done      chan struct{}
	ended     atomic.Bool
}

func newOpWindow(now time.Time, timeout time.Duration) *opWindow {
	slack := timeout / windowSlack
	w := &opWindow{openUntil: now.Add(slack), deadline: now.Add(slack + timeout), done: make(chan struct{})}
	time.AfterFunc(slack+timeout, func() {
		w.ended.Store(true)
		close(w.done)
	})
	return w
}

// windowCtx is a call's context on a shared opWindow: its deadline, and
// its parent's values.
//
// Locking: none; its fields are set before it is handed out and never
// written again.
type windowCtx struct {
	parent context.Context
	w      *opWindow
}

func (c *windowCtx) Deadline() (time.Time, bool) { return c.w.deadline, true }
func (c *windowCtx) Done() <-chan struct{}       { return c.w.done }
func (c *windowCtx) Value(key any) any           { return c.parent.Value(key) }
func (c *windowCtx) finish()                     {}

// Err returns nil until the window's deadline, then DeadlineExceeded.
func (c *windowCtx) Err() error {
	if c.w.ended.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// startOp returns the context of a call that starts now under parent,
// ending Options.Timeout from now or when parent does (see above).
func (c *Cache) startOp(parent context.Context) callCtx {
	if parent.Done() == nil {
		if _, ok := parent.Deadline(); !ok {
			now := time.Now()
			w := c.window.Load()
			if w == nil || !now.Before(w.openUntil) {
				// Two calls may both open a window here: each is
				// right, and the one stored last is shared.
				w = newOpWindow(now, c.opts.Timeout)
				c.window.Store(w)
			}
			return &windowCtx{parent: parent, w: w}
		}
	}
	return startOp(parent, c.opts.Timeout)
}

// opContext is done when its deadline passes or its parent is done,
// whichever comes first; its Err is then context.DeadlineExceeded or the
// parent's error. Values are the parent's.
//
// Locking: mu guards err and the closing of done. parent, deadline, timer
// and stopParent are set by start before the context is handed out and
// only read until finish, which the one goroutine that called start calls
// once the call no longer uses the context.
type opContext struct {
	parent     context.Context
	deadline   time.Time
	done       chan struct{}
	timer      *time.Timer // runs expire at the deadline; nil until first armed
	armed      bool        // timer set for this call (false: the parent's deadline comes first)
	stopParent func() bool // unregisters the parent's AfterFunc; nil when the parent cannot end

	mu  sync.Mutex
	err error // nil until done is closed
}

var (
	_ callCtx = (*opContext)(nil)
	_ callCtx = (*windowCtx)(nil)
)

// opContexts holds opContexts that are not done, their timers stopped.
var opContexts = sync.Pool{New: func() any { return &opContext{done: make(chan struct{})} }}

// startOp returns a context that ends timeout from now or when parent
// does. The caller must call finish once the call is over: op has
// returned, or was abandoned.
func startOp(parent context.Context, timeout time.Duration) *opContext {
	c := opContexts.Get().(*opContext)
	c.parent = parent
	now := time.Now()
	c.deadline = now.Add(timeout)
	c.armed = true
	if d, ok := parent.Deadline(); ok && !d.After(c.deadline) {
		// The parent ends first: c ends with it (parentDone), with the
		// parent's own error, as context.WithDeadline does. A timer of
		// ours due at the same instant could fire before the parent's
		// and make the caller's deadline look like the server's timeout.
		c.deadline = d
		c.armed = false
	}
	if c.armed {
		if c.timer == nil {
			c.timer = time.AfterFunc(c.deadline.Sub(now), c.expire)
		} else {
			c.timer.Reset(c.deadline.Sub(now))
		}
	}
	if parent.Done() != nil {
		c.stopParent = context.AfterFunc(parent, c.parentDone)
	}
	return c
}

// finish stops c's timer and its parent's AfterFunc, and puts c back in
// the pool when neither ran: done is then open and nothing left can close
// it. Otherwise c is left as it is, for an abandoned op that may still
// use it, and for the garbage collector.
func (c *opContext) finish() {
	reusable := !c.armed || c.timer.Stop() // false: expire ran or is running
	if c.stopParent != nil && !c.stopParent() {
		reusable = false // parentDone ran or is running
	}
	if reusable {
		c.parent, c.stopParent = nil, nil
		opContexts.Put(c)
	}
}

func (c *opContext) expire()     { c.end(context.DeadlineExceeded) }
func (c *opContext) parentDone() { c.end(c.parent.Err()) }

// end closes done with err, if it is not closed yet.
func (c *opContext) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
}

// Deadline returns the earlier of the timeout's end and the parent's
// deadline.
func (c *opContext) Deadline() (time.Time, bool) { return c.deadline, true }

// Done returns a channel closed when the context ends.
func (c *opContext) Done() <-chan struct{} { return c.done }

// Err returns nil until the context ends, then why it did.
func (c *opContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Value returns the parent's value for key.
func (c *opContext) Value(key any) any { return c.parent.Value(key) }
