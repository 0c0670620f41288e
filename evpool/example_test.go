package evpool_test

import (
	"fmt"
	"log"

	"github.com/accelkit/accelkit/driver"
	_ "github.com/accelkit/accelkit/driver/sim"
	"github.com/accelkit/accelkit/evpool"
)

// openDevice opens device 0 of the simulated driver for the examples.
func openDevice() (driver.Driver, driver.Device) {
	drv, err := driver.Open("sim", "capacity=64MiB")
	if err != nil {
		log.Fatal(err)
	}
	dev, err := drv.Device(0)
	if err != nil {
		log.Fatal(err)
	}
	return drv, dev
}

func ExamplePool() {
	drv, dev := openDevice()
	defer drv.Close()

	pool := evpool.NewPool(dev, evpool.PoolOptions{MaxIdle: 16})
	defer pool.Close()
	s := dev.DefaultStream()
	for range 3 {
		ev, err := pool.Get() // the first Get creates; later ones reuse
		if err != nil {
			log.Fatal(err)
		}
		if err := ev.Record(s); err != nil {
			log.Fatal(err)
		}
		if err := ev.Synchronize(); err != nil {
			log.Fatal(err)
		}
		pool.Put(ev)
	}
	st := pool.Stats()
	fmt.Printf("created %d, reused %d, idle %d\n", st.Created, st.Reused, st.Idle)
	// Output: created 1, reused 2, idle 1
}

func ExampleDeferred() {
	drv, dev := openDevice()
	defer drv.Close()

	pool := evpool.NewPool(dev, evpool.PoolOptions{})
	defer pool.Close()
	deferred := evpool.NewDeferred(pool)

	s, err := dev.NewStream()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Destroy()
	buf, err := dev.Malloc(1 << 20)
	if err != nil {
		log.Fatal(err)
	}
	if err := dev.Memset(buf, 0, 1<<20, s); err != nil {
		log.Fatal(err)
	}
	// Free buf once the Memset queued on s has run, without waiting here.
	err = deferred.Defer([]driver.Stream{s}, func(err error) {
		if err != nil {
			fmt.Println("stream failed:", err)
		}
		if err := dev.Free(buf); err != nil {
			log.Fatal(err)
		}
		fmt.Println("freed")
	})
	if err != nil {
		log.Fatal(err)
	}
	// A program calls Poll from its own loop (it never blocks); Drain
	// waits for everything, as at shutdown.
	deferred.Poll()
	if err := deferred.Drain(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending:", deferred.Pending())
	// Output:
	// freed
	// pending: 0
}

func ExampleHandles() {
	drv, dev := openDevice()
	defer drv.Close()

	type blasContext struct{ stream uint64 }
	handles := evpool.NewHandles(
		func(s driver.Stream) (*blasContext, error) {
			fmt.Println("create for stream", s.ID())
			return &blasContext{stream: s.ID()}, nil
		},
		func(c *blasContext) error {
			fmt.Println("destroy for stream", c.stream)
			return nil
		})

	s := dev.DefaultStream()
	a, _ := handles.Get(s) // first use creates
	b, _ := handles.Get(s) // later uses hit
	fmt.Println("same handle:", a == b)
	if err := handles.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// create for stream 0
	// same handle: true
	// destroy for stream 0
}
