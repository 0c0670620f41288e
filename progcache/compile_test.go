package progcache

// GetOrCompile on caches of this package (Memory) and of none: a waiter's
// context, and a cache without a Group. The cross-process lock is tested
// with progcache/filestream, the compile-once capabilities from outside
// in capability_test.go.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"testing"
)

func testKey(n int) Key {
	var k Key
	copy(k[:], fmt.Sprintf("fs-test-key-%08d", n))
	return k
}

func testObject(n, size int) Object {
	code := bytes.Repeat([]byte{byte(n), byte(n >> 8), 0xA5}, size/3+1)[:size]
	return Object{Kind: "cubin", Name: "k" + strconv.Itoa(n), Code: code, Symbols: map[string]string{"k": "_Z" + strconv.Itoa(n)}}
}

func TestGetOrCompileContext(t *testing.T) {
	c, _ := NewMemory(MemoryOptions{})
	fg := c.Group()
	waiterIn := make(chan struct{})
	fg.waiting = func(Key) { close(waiterIn) }
	release := make(chan struct{})
	leaderDone := make(chan struct{})
	go func() {
		defer close(leaderDone)
		GetOrCompile(context.Background(), c, testKey(1), func(context.Context) (Object, error) {
			<-release
			return testObject(1, 1), nil
		})
	}()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() {
		// Wait until the leader is in its flight before joining it.
		for {
			c.group.mu.Lock()
			n := len(c.group.calls)
			c.group.mu.Unlock()
			if n == 1 {
				break
			}
			runtime.Gosched()
		}
		_, err := GetOrCompile(ctx, c, testKey(1), func(context.Context) (Object, error) { return Object{}, errors.New("must not run") })
		errc <- err
	}()
	<-waiterIn
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("waiter with a cancelled context = %v, want context.Canceled", err)
	}
	close(release)
	<-leaderDone
}

// A cache from outside this module: the package-level GetOrCompile refuses
// one without a Group, a Group kept beside it serves it, and so does a
// Group method on it (Grouped).
func TestGetOrCompileForeignCache(t *testing.T) {
	ctx := context.Background()
	m, _ := NewMemory(MemoryOptions{})
	var c Cache = struct{ Cache }{m} // hides the Group method
	if _, err := GetOrCompile(ctx, c, testKey(1), nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("GetOrCompile on a cache without a Group = %v, want ErrInvalidConfig", err)
	}
	var g Group
	obj, err := g.GetOrCompile(ctx, c, testKey(1), func(context.Context) (Object, error) { return testObject(1, 3), nil })
	if err != nil || !obj.Equal(testObject(1, 3)) {
		t.Fatalf("Group.GetOrCompile on a cache without a Group = %v", err)
	}
	own := &groupedCache{Cache: struct{ Cache }{m}}
	obj, err = GetOrCompile(ctx, own, testKey(2), func(context.Context) (Object, error) { return testObject(2, 3), nil })
	if err != nil || !obj.Equal(testObject(2, 3)) {
		t.Fatalf("GetOrCompile on a cache of ours with a Group method = %v", err)
	}
}

// groupedCache is a cache from outside this module that carries a Group.
type groupedCache struct {
	Cache
	g Group
}

func (c *groupedCache) Group() *Group { return &c.g }
