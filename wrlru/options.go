package wrlru

import "fmt"

// Unbounded, as Options.MaxSize or BudgetOptions.MaxSize, lets a cache
// (or the caches of a budget) grow without bound (JAX's maxsize=None):
// entries go only when their object is collected, or by Evict and Clear.
const Unbounded = -1

// Options configure New. The zero value is the default: a private bound of
// DefaultMaxSize entries over a shard count chosen from GOMAXPROCS and the
// bound. A value out of range is an error from New wrapping
// ErrInvalidOption that names the field, the value and what is valid.
type Options struct {
	// MaxSize bounds the cache to this many entries over all its objects.
	// 0 means DefaultMaxSize (2048, JAX's default); Unbounded (-1) means no
	// bound. Other negative values are an error, and so is a MaxSize other
	// than 0 together with Budget (the budget's size is then the bound).
	MaxSize int
	// Shards is the number of shards, 1 to MaxShards, rounded up to a
	// power of two. 0 means 4 per GOMAXPROCS, but no more than one per 64
	// entries of the bound (so bounds under 128 get one shard). One shard
	// with the cache's own bound (no Budget) makes eviction exact LRU, at
	// the price of one shared atomic add per hit; more shards make hits
	// write nothing shared and recency approximate (see Budget).
	Shards int
	// Budget, when not nil, makes the cache share the budget's bound with
	// the other caches built with it, instead of having its own. nil means
	// a private bound of MaxSize entries.
	Budget *Budget
}

// validate reports the first field of o out of range.
func (o Options) validate() error {
	if o.MaxSize < Unbounded {
		return fmt.Errorf("%w: Options.MaxSize %d: want 0 (DefaultMaxSize), a positive bound, or Unbounded (-1)", ErrInvalidOption, o.MaxSize)
	}
	if o.Shards < 0 || o.Shards > MaxShards {
		return fmt.Errorf("%w: Options.Shards %d: want 1 to %d, or 0 for the default", ErrInvalidOption, o.Shards, MaxShards)
	}
	if o.Budget != nil && o.MaxSize != 0 {
		return fmt.Errorf("%w: Options.MaxSize %d with Options.Budget: the budget's size is the bound; leave MaxSize 0", ErrInvalidOption, o.MaxSize)
	}
	return nil
}

// BudgetOptions configure NewBudget. The zero value is an unbounded
// budget: the member caches' entries then go only when their objects are
// collected, or by Evict and Clear.
type BudgetOptions struct {
	// MaxSize bounds the member caches together to this many entries. 0
	// and Unbounded (-1) mean no bound; other negative values are an
	// error.
	MaxSize int
}

// validate reports a field of o out of range.
func (o BudgetOptions) validate() error {
	if o.MaxSize < Unbounded {
		return fmt.Errorf("%w: BudgetOptions.MaxSize %d: want a positive bound, or 0 or Unbounded (-1) for none", ErrInvalidOption, o.MaxSize)
	}
	return nil
}

// bound returns the budget's bound for o; 0 means unbounded.
func (o BudgetOptions) bound() int64 { return int64(max(o.MaxSize, 0)) }

// bound returns the entries a private budget holds for o; 0 means
// unbounded, as in NewBudget.
func (o Options) bound() int64 {
	switch o.MaxSize {
	case 0:
		return DefaultMaxSize
	case Unbounded:
		return 0
	}
	return int64(o.MaxSize)
}
