package tiered

// Cache.Prefetch: a warm start. A machine that joins a fleet (a new CI
// runner, an inference server scaled out) knows the programs it will
// need; fetching them from the remote tier one lookup at a time costs a
// round trip each, so a remote tier that can fetch many keys in few round
// trips (a Prefetcher: redistier pipelines its GETs) does it in batches.

import (
	"context"
	"fmt"

	"github.com/accelkit/accelkit/progcache"
)

// Prefetcher is a remote tier that fetches many keys in few round trips.
// Cache.Prefetch uses it when its remote tier has it.
type Prefetcher interface {
	// Prefetch looks keys up and calls fn, on the calling goroutine, with
	// each object found, which fn may keep; keys it does not find are
	// skipped. It returns the number of objects given to fn, and stops at
	// fn's first error, returned as is, or at the first failure of its
	// own.
	Prefetch(ctx context.Context, keys []progcache.Key, fn func(progcache.Key, progcache.Object) error) (int, error)
}

// Prefetch warms the local tier with keys: those it does not hold are
// fetched from the remote tier, through its Prefetch when it is a
// Prefetcher (few round trips) and otherwise one Get each, and put into
// the local tier (counted as backfills, or BackfillFailed for those it
// refuses). It returns how many objects it put into the local tier.
//
// Unlike a lookup, Prefetch returns the remote tier's error (with the
// count of what it stored before it): the caller asked for this work and
// may want to know it was cut short. The cache works all the same: later
// lookups go to the remote tier key by key. Keys absent from both tiers
// are skipped; Prefetch counts no lookups in Stats.
func (t *Cache) Prefetch(ctx context.Context, keys []progcache.Key) (int, error) {
	if t.closed.Load() {
		return 0, t.errClosed()
	}
	var want []progcache.Key
	for _, k := range keys {
		_, ok, err := t.peekLocal(ctx, k)
		if err != nil {
			return 0, err
		}
		if !ok {
			want = append(want, k)
		}
	}
	stored := 0
	keep := func(k progcache.Key, obj progcache.Object) error {
		if err := t.local.Put(ctx, k, obj); err != nil {
			if ctx.Err() != nil || t.closed.Load() {
				return err
			}
			t.st.backfillFailed.Add(1)
			return nil
		}
		t.st.backfills.Add(1)
		stored++
		return nil
	}
	if p, ok := t.remote.(Prefetcher); ok {
		if _, err := p.Prefetch(ctx, want, keep); err != nil {
			t.st.remoteErrors.Add(1)
			return stored, fmt.Errorf("tiered: prefetch %d keys from the remote tier: %w", len(want), err)
		}
		return stored, nil
	}
	for _, k := range want {
		obj, ok, err := t.remote.Get(ctx, k)
		if err != nil {
			t.st.remoteErrors.Add(1)
			return stored, fmt.Errorf("tiered: prefetch %s from the remote tier: %w", k, err)
		}
		if !ok {
			continue
		}
		if err := keep(k, obj); err != nil {
			return stored, err
		}
	}
	return stored, nil
}
