package redistier

import (
	"fmt"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

const (
	// DefaultNamespace is the namespace of a cache whose Options name
	// none: every process that leaves it unset shares its entries.
	DefaultNamespace = "default"
	// MaxNamespaceLen bounds Options.Namespace: it is part of every key.
	MaxNamespaceLen = 64

	// DefaultMaxEntryBytes bounds one entry record when Options do not:
	// large enough for any program NVRTC or a linker emits in practice,
	// small enough that one SET does not hold the server's single thread
	// for long.
	DefaultMaxEntryBytes = 64 << 20
	// MaxEntryBytesLimit is the largest MaxEntryBytes accepted: Redis's
	// default proto-max-bulk-len, the largest value a SET may carry.
	MaxEntryBytesLimit = 512 << 20

	// DefaultTimeout bounds each Redis call. A remote hit that takes
	// longer than this is not much better than a compile, and a dead or
	// stalled server must not hold a compile up for long.
	DefaultTimeout = 250 * time.Millisecond

	// DefaultBreakerFailures is how many consecutive failed calls open
	// the circuit breaker.
	DefaultBreakerFailures = 5
	// DefaultBreakerCooldown is how long an open breaker refuses calls
	// before it lets one probe through.
	DefaultBreakerCooldown = time.Second

	// DefaultLeaseTTL is a lease's expiry. The holder extends it every
	// LeaseTTL/3, so it only runs out when the holder died or cannot
	// reach Redis; then another process takes over after at most this
	// long.
	DefaultLeaseTTL = 10 * time.Second
	// MaxLeaseTTL bounds Options.LeaseTTL. A lease with more time left
	// than this (or with no expiry) was not set by a holder of ours, and
	// Acquire takes it over: a planted lease blocks its key for at most
	// this long. Every process of a namespace must keep LeaseTTL within
	// it, which New enforces.
	MaxLeaseTTL = 10 * time.Minute

	// DefaultPrefetchBatch is how many keys one Prefetch round trip asks
	// for.
	DefaultPrefetchBatch = 64
)

// Options configure a Cache. The zero value of every field means its
// default, documented on the field, except that a cache must be told how
// its records are sealed: Record.MACKey, or TrustedNetworkNoMAC.
type Options struct {
	// Namespace separates deployments that share one Redis: every key
	// the cache writes starts with "progcache:<Namespace>:", so an ACL
	// key pattern can confine a user to one.
	// 1 to MaxNamespaceLen characters of A-Z a-z 0-9 . _ -; "" means
	// DefaultNamespace.
	Namespace string

	// Record selects how entries are sealed. Record.MACKey (16 to 64
	// bytes) makes every entry carry a MAC, so a client without the key
	// cannot plant a program for another: a forged entry is a counted
	// miss and is deleted. Every process of a deployment uses the same
	// key; an entry sealed with another key is a miss counted in
	// Unreadable and kept.
	Record progcache.RecordOptions
	// TrustedNetworkNoMAC opens a cache without a MAC key: entries then
	// carry only a CRC-32C, which catches corruption but not forgery. Set
	// it only when every client that can write to this Redis is trusted.
	// Setting it together with Record.MACKey is an error.
	TrustedNetworkNoMAC bool

	// TTL, when positive, makes each entry expire that long after its
	// last Put (at least 1 ms). 0 means entries do not expire; Redis's
	// maxmemory policy then bounds them.
	TTL time.Duration
	// MaxEntryBytes caps one entry record: Put refuses a larger one with
	// an error wrapping ErrTooLarge. 0 means DefaultMaxEntryBytes; at
	// most MaxEntryBytesLimit.
	MaxEntryBytes int64
	// MaxBytes, when positive, is a byte budget for the namespace that
	// the cache enforces itself: every Put records the entry's size and
	// last use in an index kept in Redis beside the entries, and evicts
	// the least recently used entries past the budget (counted in
	// Stats.Evictions). A Get hit then costs one more command (pipelined
	// with the GET). 0 means no budget: the server's maxmemory with
	// allkeys-lru is the usual bound (see README), and is cheaper.
	MaxBytes int64

	// Timeout bounds each Redis call, whatever the client's own
	// timeouts. 0 means DefaultTimeout. A call past it is a failure
	// (counted in Timeouts) that feeds the breaker. Calls whose context
	// cannot end (context.Background, say) and that start within
	// Timeout/16 of each other share one deadline and its timer, so such
	// a call may run up to Timeout/16 past Timeout before it is given up.
	Timeout time.Duration
	// BreakerFailures consecutive failed calls open the circuit breaker:
	// calls are then refused without reaching Redis until
	// BreakerCooldown has passed, when one call probes the server and
	// closes the breaker if it succeeds. 0 means DefaultBreakerFailures.
	BreakerFailures int
	// BreakerCooldown is how long an open breaker refuses calls before
	// the next probe. 0 means DefaultBreakerCooldown.
	BreakerCooldown time.Duration

	// LeaseTTL is the expiry of a lease taken by Acquire; the holder
	// extends it every LeaseTTL/3 until Release. 0 means
	// DefaultLeaseTTL, or 3*Timeout when that is longer; otherwise at
	// least 3*Timeout, so that a heartbeat that times out still leaves
	// another before the lease runs out; at most MaxLeaseTTL.
	LeaseTTL time.Duration

	// PrefetchBatch is how many keys one Prefetch round trip asks for. 0
	// means DefaultPrefetchBatch.
	PrefetchBatch int
}

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.MaxEntryBytes == 0 {
		o.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if o.MaxBytes > 0 && o.MaxBytes < o.MaxEntryBytes {
		o.MaxEntryBytes = o.MaxBytes
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.BreakerFailures == 0 {
		o.BreakerFailures = DefaultBreakerFailures
	}
	if o.BreakerCooldown == 0 {
		o.BreakerCooldown = DefaultBreakerCooldown
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = max(DefaultLeaseTTL, 3*o.Timeout)
	}
	if o.PrefetchBatch == 0 {
		o.PrefetchBatch = DefaultPrefetchBatch
	}
	return o
}

// validate checks every field against its range; the error names the
// field, its value and what is valid. It runs on the options as given,
// before defaults are filled in, except for the lease check, which needs
// the effective Timeout.
func (o Options) validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("redistier: Options.%s %v: want %s: %w", field, v, want, progcache.ErrInvalidConfig)
	}
	switch {
	case o.Namespace != "" && !validNamespace(o.Namespace):
		return bad("Namespace", fmt.Sprintf("%q", o.Namespace), fmt.Sprintf(`"" (%q) or 1 to %d characters of A-Z a-z 0-9 . _ -`, DefaultNamespace, MaxNamespaceLen))
	case o.Record.MACKey == nil && !o.TrustedNetworkNoMAC:
		return fmt.Errorf("redistier: no MAC key: a Redis shared by machines lets any client that can write to it plant programs for the others; set Options.Record.MACKey (%d to %d bytes, the same on every machine), or set Options.TrustedNetworkNoMAC if every client of this Redis is trusted: %w",
			progcache.MinMACKeyLen, progcache.MaxMACKeyLen, progcache.ErrInvalidConfig)
	case o.Record.MACKey != nil && o.TrustedNetworkNoMAC:
		return fmt.Errorf("redistier: Options.Record.MACKey and Options.TrustedNetworkNoMAC are both set: want one of them (a MAC key, or none on a trusted network): %w", progcache.ErrInvalidConfig)
	case o.TTL < 0 || (o.TTL > 0 && o.TTL < time.Millisecond):
		return bad("TTL", o.TTL, "0 (no expiry) or at least 1ms")
	case o.MaxEntryBytes < 0 || o.MaxEntryBytes > MaxEntryBytesLimit:
		return bad("MaxEntryBytes", o.MaxEntryBytes, fmt.Sprintf("0 (DefaultMaxEntryBytes, %d) or 1 to %d (Redis's proto-max-bulk-len)", DefaultMaxEntryBytes, MaxEntryBytesLimit))
	case o.MaxBytes < 0:
		return bad("MaxBytes", o.MaxBytes, "0 (no budget) or a positive byte count")
	case o.Timeout < 0 || (o.Timeout > 0 && o.Timeout < time.Millisecond):
		return bad("Timeout", o.Timeout, fmt.Sprintf("0 (DefaultTimeout, %v) or at least 1ms", DefaultTimeout))
	case o.BreakerFailures < 0:
		return bad("BreakerFailures", o.BreakerFailures, fmt.Sprintf("0 (DefaultBreakerFailures, %d) or a positive count", DefaultBreakerFailures))
	case o.BreakerCooldown < 0:
		return bad("BreakerCooldown", o.BreakerCooldown, fmt.Sprintf("0 (DefaultBreakerCooldown, %v) or a positive duration", DefaultBreakerCooldown))
	case o.PrefetchBatch < 0:
		return bad("PrefetchBatch", o.PrefetchBatch, fmt.Sprintf("0 (DefaultPrefetchBatch, %d) or a positive count", DefaultPrefetchBatch))
	}
	if err := o.Record.Validate(); err != nil {
		return fmt.Errorf("redistier: Options.Record: %w", err)
	}
	timeout := o.withDefaults().Timeout
	if o.LeaseTTL < 0 || (o.LeaseTTL > 0 && o.LeaseTTL < 3*timeout) || o.LeaseTTL > MaxLeaseTTL {
		return bad("LeaseTTL", o.LeaseTTL, fmt.Sprintf("0 (DefaultLeaseTTL, %v) or from 3*Timeout (%v: a heartbeat runs every LeaseTTL/3 and may take up to Timeout) to MaxLeaseTTL (%v)", DefaultLeaseTTL, 3*timeout, MaxLeaseTTL))
	}
	if 3*timeout > MaxLeaseTTL {
		return bad("Timeout", o.Timeout, fmt.Sprintf("at most MaxLeaseTTL/3 (%v): a lease lasts at least 3*Timeout and at most MaxLeaseTTL", MaxLeaseTTL/3))
	}
	return nil
}

// validNamespace reports whether ns is 1 to MaxNamespaceLen characters of
// A-Z a-z 0-9 . _ -: none of them is special in a key, in a SCAN pattern
// or in an ACL key pattern.
func validNamespace(ns string) bool {
	if len(ns) == 0 || len(ns) > MaxNamespaceLen {
		return false
	}
	for _, c := range []byte(ns) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}
