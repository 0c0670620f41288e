package evpool

import (
	"errors"
	"fmt"

	"github.com/accelkit/accelkit/driver"
)

// ErrNotReleased is wrapped by Release's error when the release could
// neither be ordered after the streams' work nor be shown safe by waiting
// for it: release did not run, and what it would have released is still
// the caller's.
var ErrNotReleased = errors.New("evpool: not released")

// Release is stream-ordered release, the protocol devalloc and hostpin
// share: run release once the work queued on streams up to now is over,
// so that memory that work reads or writes is reused only after it. Its
// failure policy, in order:
//
//  1. streams empty: release runs now, before Release returns.
//  2. Release defers release (Defer with one pooled event per stream); it
//     runs at a later Poll or Drain, once every event has completed. An
//     event that reports its stream's sticky error counts as completed: it
//     was recorded behind the work, so that work has reached its end and
//     the stream runs nothing more.
//  3. If no event can be got or recorded (the pool's device is out of
//     resources, a stream was destroyed or has failed), Release waits on
//     the host: Synchronize on each stream, and when one of those fails,
//     Synchronize on the pool's device, which also waits for the work a
//     destroyed stream still has queued. The first wait that returns nil
//     proves the work over, and release runs before Release returns.
//  4. If every wait fails, nothing shows the work is over (a lost device
//     answers before waiting), so release does not run: Release returns an
//     error wrapping ErrNotReleased and the causes, and the caller keeps
//     what it meant to release, exactly as before the call (a pointer stays
//     live, a buffer stays the caller's). The caller may try again later.
//
// So the failure paths release nothing early and lose nothing: release
// runs exactly once after the work is shown over, or not at all with the
// resource handed back. release must not need a lock the caller of Release
// holds, since it may run before Release returns.
func (d *Deferred) Release(streams StreamSet, release func()) error {
	if release == nil {
		return fmt.Errorf("evpool: release with a nil function: %w", driver.ErrInvalidValue)
	}
	if streams.Len() == 0 {
		release()
		return nil
	}
	deferErr := d.Defer(streams.Streams(), func(error) { release() })
	if deferErr == nil {
		return nil
	}
	var waitErrs []error
	for _, s := range streams.Streams() {
		if err := s.Synchronize(); err != nil {
			waitErrs = append(waitErrs, fmt.Errorf("synchronize stream %d: %w", s.ID(), err))
		}
	}
	if len(waitErrs) == 0 {
		release()
		return nil
	}
	if d.pool != nil && d.pool.dev != nil {
		err := d.pool.dev.Synchronize()
		if err == nil {
			release()
			return nil
		}
		waitErrs = append(waitErrs, fmt.Errorf("synchronize device %d: %w", d.ordinal, err))
	}
	return fmt.Errorf("%w: streams %v: ordering after them failed (%w) and waiting for them failed (%w)",
		ErrNotReleased, streams.IDs(), deferErr, errors.Join(waitErrs...))
}
