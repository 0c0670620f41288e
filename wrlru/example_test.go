package wrlru_test

import (
	"context"
	"fmt"

	"github.com/accelkit/accelkit/wrlru"
)

// Function is a traced function: the key object. The cache holds it weakly.
type Function struct {
	Name string
	Body string
}

// Signature is the rest of the key: compared by value.
type Signature struct {
	Shape string
	DType string
}

func Example() {
	compiles := 0
	cache, err := wrlru.New(func(ctx context.Context, f *Function, sig Signature) (string, error) {
		compiles++
		return fmt.Sprintf("%s[%s %s]", f.Name, sig.DType, sig.Shape), nil
	}, wrlru.Options{MaxSize: 128})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	f := &Function{Name: "matmul", Body: "a @ b"}
	for range 3 {
		exe, err := cache.Get(ctx, f, Signature{"(4,4)", "f32"})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(exe)
	}
	exe, _ := cache.Get(ctx, f, Signature{"(8,8)", "bf16"})
	fmt.Println(exe)
	fmt.Println("compiles:", compiles)
	// Once f is unreachable, its entries go: no Evict needed.
	fmt.Println(cache.Info())
	// Output:
	// matmul[f32 (4,4)]
	// matmul[f32 (4,4)]
	// matmul[f32 (4,4)]
	// matmul[bf16 (8,8)]
	// compiles: 2
	// Cache(hits=2, misses=2, maxsize=128, currsize=2)
}

func ExampleBudget() {
	// Two caches of different types share one capacity of 3 entries.
	budget, err := wrlru.NewBudget(wrlru.BudgetOptions{MaxSize: 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	traces, _ := wrlru.New(func(_ context.Context, f *Function, n int) (string, error) {
		return fmt.Sprint("trace ", f.Name, n), nil
	}, wrlru.Options{Budget: budget})
	sizes, _ := wrlru.New(func(_ context.Context, f *Function, _ struct{}) (int, error) {
		return len(f.Body), nil
	}, wrlru.Options{Budget: budget})

	ctx := context.Background()
	f := &Function{Name: "conv", Body: "conv2d(x, w)"}
	traces.Get(ctx, f, 1)
	traces.Get(ctx, f, 2)
	n, _ := sizes.Get(ctx, f, struct{}{})
	fmt.Println("body length:", n)
	// Across caches recency counts in inserts: this use of trace 1 comes
	// after the insert into sizes, so trace 2 is now the oldest.
	traces.Get(ctx, f, 1)
	traces.Get(ctx, f, 3) // the budget is full: evicts trace 2, the oldest of both caches
	for _, k := range traces.Keys() {
		if k.Args == 2 {
			fmt.Println("trace 2 still cached")
		}
	}
	fmt.Println("traces:", traces.Info().CurrSize, "sizes:", sizes.Info().CurrSize, "budget:", budget.Len(), "of", budget.MaxSize())
	// Output:
	// body length: 12
	// traces: 2 sizes: 1 budget: 3 of 3
}

func ExampleCache_Get_recursive() {
	var cache *wrlru.Cache[Function, int, int]
	cache, _ = wrlru.New(func(ctx context.Context, f *Function, n int) (int, error) {
		// Asking for its own key through ctx fails instead of deadlocking.
		return cache.Get(ctx, f, n)
	}, wrlru.Options{})
	_, err := cache.Get(context.Background(), &Function{Name: "loop"}, 1)
	fmt.Println(err)
	// Output: wrlru: recursive call: the computation asked for its own key
}
