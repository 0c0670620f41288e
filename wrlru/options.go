package wrlru

import "fmt"

// Option configures New. Options are plain functions over New's private
// configuration; one Option value may be passed to many New calls.
type Option func(*config)

type config struct {
	maxSize    int
	maxSizeSet bool
	shards     int
	budget     *Budget
	budgetSet  bool
}

// WithMaxSize bounds the cache to n entries over all objects; 0 means
// unbounded (as in JAX). The default is DefaultMaxSize.
func WithMaxSize(n int) Option {
	return func(c *config) { c.maxSize = n; c.maxSizeSet = true }
}

// WithShards sets the number of shards, 1 to MaxShards, rounded up to a
// power of two. One shard with the cache's own bound (no WithBudget) makes
// eviction exact LRU, at the price of one shared atomic add per hit; more
// shards make hits write nothing shared and recency approximate (see
// Budget). The default is shardsPerProc per GOMAXPROCS, but no more than
// one per minEntriesPerShard entries of the bound.
func WithShards(n int) Option {
	return func(c *config) { c.shards = n }
}

func (c *config) validate() error {
	if c.maxSize < 0 {
		return fmt.Errorf("%w: max size %d: want 0 (unbounded) or more", ErrInvalidOption, c.maxSize)
	}
	if c.shards < 0 || c.shards > MaxShards {
		return fmt.Errorf("%w: %d shards: want 1 to %d (0 for the default)", ErrInvalidOption, c.shards, MaxShards)
	}
	if c.budgetSet && c.budget == nil {
		return fmt.Errorf("%w: nil budget: pass a *Budget from NewBudget", ErrInvalidOption)
	}
	if c.budgetSet && c.maxSizeSet {
		return fmt.Errorf("%w: both WithMaxSize and WithBudget: the budget's size is the bound, pass one", ErrInvalidOption)
	}
	return nil
}
