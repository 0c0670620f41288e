package tiered

// Cache's remote puts: a bounded queue and the workers that drain it.
//
// A compile must not wait for the network, so Put hands the remote put to
// a queue and returns. The queue is bounded: when the remote tier is slow
// or down, puts beyond QueueLen are dropped and counted (the entry stays
// in the local tier, and another machine that misses it compiles it),
// instead of piling up in memory or blocking the caller.
//
// Delete and Clear must not be undone by a put still queued for what they
// remove, so they take the queued puts of their keys out of the queue
// and wait for the ones under way. The queue is a slice rather than a
// channel for that reason.

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

// putJob is one queued remote put; obj is Cache's own copy.
type putJob struct {
	k   progcache.Key
	obj progcache.Object
}

// putsUnderWay are the remote puts of one key that workers are making:
// done is closed when the last of them ends.
type putsUnderWay struct {
	n    int
	done chan struct{}
}

// putQueue is Cache's queue of remote puts. A nil *putQueue (a Cache
// with SyncRemotePut) is an empty queue that takes nothing.
//
// Locking: mu guards jobs, busy and closed, and cond (on mu) wakes the
// workers; mu is never held while the remote tier is called. remote,
// limit, st, ctx and stop are set before the workers start and never
// change; wg counts the workers.
type putQueue struct {
	remote progcache.Cache
	limit  int
	st     *tieredCounters
	ctx    context.Context // the workers' puts; cancelled when Close's drain time runs out
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	cond   sync.Cond
	jobs   []putJob                        // FIFO
	busy   map[progcache.Key]*putsUnderWay // keys whose puts workers are making
	closed bool
}

// newPutQueue starts workers goroutines that drain a queue of at most
// limit puts into remote.
func newPutQueue(remote progcache.Cache, limit, workers int, st *tieredCounters) *putQueue {
	q := &putQueue{remote: remote, limit: limit, st: st, busy: map[progcache.Key]*putsUnderWay{}}
	q.cond.L = &q.mu
	q.ctx, q.stop = context.WithCancel(context.Background())
	for range workers {
		q.wg.Go(q.work)
	}
	return q
}

// push queues a remote put of obj under k, or drops it (counted) when the
// queue is full or closed. It never blocks on the remote tier.
func (q *putQueue) push(k progcache.Key, obj progcache.Object) {
	q.mu.Lock()
	if q.closed || len(q.jobs) >= q.limit {
		q.mu.Unlock()
		q.st.putDropped.Add(1)
		return
	}
	q.jobs = append(q.jobs, putJob{k, obj})
	q.mu.Unlock()
	q.st.putQueued.Add(1)
	q.cond.Signal()
}

// work is a worker: it makes the queued puts in order until the queue is
// closed and empty.
func (q *putQueue) work() {
	for {
		q.mu.Lock()
		for len(q.jobs) == 0 && !q.closed {
			q.cond.Wait()
		}
		if len(q.jobs) == 0 {
			q.mu.Unlock()
			return
		}
		j := q.jobs[0]
		q.jobs[0] = putJob{} // let the object go with the put
		q.jobs = q.jobs[1:]
		u := q.busy[j.k]
		if u == nil {
			u = &putsUnderWay{done: make(chan struct{})}
			q.busy[j.k] = u
		}
		u.n++
		q.mu.Unlock()

		if err := q.remote.Put(q.ctx, j.k, j.obj); err != nil {
			q.st.remotePutFailed.Add(1)
		} else {
			q.st.remotePutDone.Add(1)
		}

		q.mu.Lock()
		if u.n--; u.n == 0 {
			delete(q.busy, j.k)
			close(u.done)
		}
		q.mu.Unlock()
	}
}

// cancel takes the queued puts of *k (of every key when k is nil) out of
// the queue, counted as cancelled, and waits, honouring ctx, for those
// that workers are making.
func (q *putQueue) cancel(ctx context.Context, k *progcache.Key) error {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	n := len(q.jobs)
	q.jobs = slices.DeleteFunc(q.jobs, func(j putJob) bool { return k == nil || j.k == *k })
	q.st.putCancelled.Add(int64(n - len(q.jobs)))
	var wait []chan struct{}
	for bk, u := range q.busy {
		if k == nil || bk == *k {
			wait = append(wait, u.done)
		}
	}
	q.mu.Unlock()
	for _, done := range wait {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// len returns the number of puts queued and not yet started.
func (q *putQueue) len() int {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.jobs)
}

// close stops taking puts and waits up to drain for the workers to make
// the queued ones. Past it, it drops what is still queued (counted) and
// cancels the puts under way, and returns without waiting for them: wait
// does, once the caller has closed the remote tier.
func (q *putQueue) close(drain time.Duration) {
	if q == nil {
		return
	}
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()

	done := make(chan struct{})
	go func() {
		q.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(drain)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		q.mu.Lock()
		q.st.putDropped.Add(int64(len(q.jobs)))
		q.jobs = nil
		q.mu.Unlock()
		q.stop()
	}
}

// wait waits for the workers to end.
func (q *putQueue) wait() {
	if q == nil {
		return
	}
	q.wg.Wait()
	q.stop()
}
