package redistier

// One Redis call: the breaker, the per-call timeout, and what a failure
// counts as.
//
// go-redis applies a context's deadline to its socket reads and writes
// only when the client was built with ContextTimeoutEnabled; otherwise it
// waits up to its own ReadTimeout (3 s by default, or for ever) whatever
// the context says. The client is the caller's, with their settings, so
// callValue enforces Options.Timeout itself: with a client that honours
// deadlines the call runs on the caller's goroutine under a context with
// that deadline (opctx.go: up to Timeout/16 later where calls share one);
// with one that does not, it runs on a goroutine of its own
// and callValue stops waiting for it at the deadline. What that goroutine
// reads comes back as the op's value, which callValue hands over only when
// the call succeeded, so no caller can read a reply that came too late. The abandoned call ends
// within the client's ReadTimeout (its connection is then discarded) and
// is counted in Stats.Abandoned.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

// honoursDeadlines reports whether c applies context deadlines to its
// socket operations (ContextTimeoutEnabled), for the clients go-redis
// builds; a client of another type is assumed not to.
func honoursDeadlines(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// callValue runs op, which talks to Redis, under the breaker and within
// Options.Timeout, and returns op's value only when the call succeeded:
// with any error, the value is T's zero value. The error is nil, redis.Nil
// (a missing key: an answer, not a failure), an error wrapping the
// caller's context error when ctx ended, or an error wrapping
// ErrUnavailable and the cause, counted. what names the operation in the
// error.
//
// An abandoned op finishes on its own goroutine, after callValue returned:
// its value travels back only through the channel that callValue stops
// reading when it gives up, so no caller can read a reply that came too
// late. op must hand what it read back as its value, never write it to
// the caller's variables, and must not keep what it is given past its
// return.
func callValue[T any](ctx context.Context, c *Cache, what string, op func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	ok, probe := c.breaker.allow()
	if !ok {
		c.n.rejected.Add(1)
		return zero, fmt.Errorf("redistier: %s: %w", what, ErrBreakerOpen)
	}
	opCtx := c.startOp(ctx)
	defer opCtx.finish()
	var v T
	var err error
	if c.inline {
		v, err = op(opCtx)
	} else {
		type result struct {
			v   T
			err error
		}
		done := make(chan result, 1)
		go func() {
			v, err := op(opCtx)
			done <- result{v, err}
		}()
		select {
		case r := <-done:
			v, err = r.v, r.err
		case <-opCtx.Done():
			c.n.abandoned.Add(1)
			err = opCtx.Err()
		}
	}
	switch {
	case err == nil:
		c.breaker.done(probe, verdictOK)
		return v, nil
	case errors.Is(err, redis.Nil):
		c.breaker.done(probe, verdictOK)
		return zero, err
	case ctx.Err() != nil:
		// The caller gave up (or its own deadline came first): nothing
		// learnt about the server, and nothing counted.
		c.breaker.done(probe, verdictNeutral)
		return zero, fmt.Errorf("redistier: %s: %w", what, ctx.Err())
	}
	c.n.errors.Add(1)
	verdict := verdictFailed
	switch {
	case opCtx.Err() != nil || isTimeout(err):
		c.n.timeouts.Add(1)
		err = fmt.Errorf("no answer within %v (Options.Timeout): %w", c.opts.Timeout, err)
	case isReply(err):
		// The server answered: it is there, if unhappy (out of memory
		// under noeviction, no permission, a script error).
		verdict = verdictOK
	}
	c.breaker.done(probe, verdict)
	return zero, fmt.Errorf("redistier: %s: %w: %w", what, ErrUnavailable, err)
}

// call is callValue for an op that returns nothing but its error.
func (c *Cache) call(ctx context.Context, what string, op func(ctx context.Context) error) error {
	_, err := callValue(ctx, c, what, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, op(ctx)
	})
	return err
}

// isTimeout reports a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// isReply reports an error reply from a server that can serve: not one
// that says the server (or the cluster) cannot serve right now, which is
// as good as no answer for the breaker.
func isReply(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	for _, p := range []string{"LOADING", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "BUSY"} {
		if strings.HasPrefix(re.Error(), p) {
			return false
		}
	}
	return true
}

// isOurs reports an error that call already shaped: a failure wrapping
// ErrUnavailable, or the caller's context error.
func isOurs(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
