package bolt

// Damaged bolt files: truncations and seeded byte flips of a populated
// cache, each opened read-only and read-write and driven through every
// operation. A damaged file used to crash the process (bbolt assertions,
// slices out of range, SIGBUS on a truncated mapping, which is a fatal error
// that no recover sees), so the trials run in a child process: the parent
// re-executes the test binary, reads one line per trial, and reports a
// child that dies as a failed trial with its output, then goes on with the
// next trial in a new child.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
	bbolt "go.etcd.io/bbolt"
)

const (
	damageFlipTrials  = 300
	damageShortTrials = 60
	damageEntries     = 80
	damageFuzzEntries = 7 // the smallest fixture whose entries bucket has a branch page
	damageSeed        = 23
)

// damageSize is the code size of fixture entry n: mostly small records
// (many per leaf page, so the entries bucket has branch pages) and every
// fifteenth one large (overflow pages).
func damageSize(n int) int {
	if n%15 == 7 {
		return 9000 + 500*n
	}
	return 100 + (n*131)%1400
}

// writeDamageFixture builds a populated cache file at p and returns its
// bytes. A few entries are read and deleted so the file has access times,
// counters and free pages.
func writeDamageFixture(tb testing.TB, p string, entries int) []byte {
	tb.Helper()
	ctx := context.Background()
	c, err := Open(p, quietBolt(Options{NoSync: true}))
	if err != nil {
		tb.Fatal(err)
	}
	for n := range entries {
		if err := c.Put(ctx, testKey(n), testObject(n, damageSize(n))); err != nil {
			tb.Fatal(err)
		}
	}
	for n := 0; n < entries; n += 3 {
		c.Get(ctx, testKey(n))
	}
	for n := 1; n < entries; n += 17 {
		c.Delete(ctx, testKey(n))
	}
	if err := c.Close(); err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Trials 0-5 truncate (see damage), 6-9 are crafted damage (see craft),
// the rest flip bytes.
const (
	damageTruncations = 6
	damageCrafted     = 4
	damageFirstFlip   = damageTruncations + damageCrafted
)

// fixtureLayout is where things are in the fixture file.
type fixtureLayout struct {
	ps, used    int    // page size, bytes in use (high-water mark x page size)
	entriesRoot uint64 // root page of the entries bucket, a branch page
	freelist    uint64 // the free list page
	hwm         uint64
}

func layoutOf(tb testing.TB, p string, orig []byte) fixtureLayout {
	tb.Helper()
	m0 := parseBoltMeta(orig)
	ps := int(m0.pageSize)
	m1 := parseBoltMeta(orig[ps:])
	m := m0
	if m1.txid > m0.txid {
		m = m1
	}
	l := fixtureLayout{ps: ps, used: int(m.pgid) * ps, freelist: m.freelist, hwm: m.pgid}
	db, err := bbolt.Open(p, 0, &bbolt.Options{ReadOnly: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bbolt.Tx) error {
		l.entriesRoot = uint64(tx.Bucket(bucketEntries).Root())
		return nil
	})
	if fl := nativeEndian.Uint16(orig[int(l.entriesRoot)*ps+8:]); fl != boltBranchFlag {
		tb.Fatalf("the fixture's entries bucket root is page type %#x; want a branch page (more entries)", fl)
	}
	return l
}

// craft returns crafted damage c (0 to damageCrafted-1) of the fixture:
// the structures that drive bbolt into states a recover cannot catch or
// into freeing a page twice.
func craft(orig []byte, l fixtureLayout, c int) ([]byte, string) {
	b := bytes.Clone(orig)
	root := int(l.entriesRoot) * l.ps
	child0 := root + boltPageHeader + 8 // the first branch element's child page id
	switch c {
	case 0:
		// Cursor.search and Cursor.first follow this for ever: a stack
		// overflow (fatal) or a cursor stack that grows until memory runs
		// out.
		nativeEndian.PutUint64(b[child0:], l.entriesRoot)
		return b, "a branch page whose first child is itself"
	case 1:
		nativeEndian.PutUint64(b[child0:], l.hwm+1<<20)
		return b, "a branch child page id far past the high-water mark"
	case 2:
		// The free list hands out a page still in use; freeing it again
		// panics inside a write transaction.
		fl := int(l.freelist) * l.ps
		idx := boltPageHeader
		if nativeEndian.Uint16(b[fl+10:]) == 0 {
			nativeEndian.PutUint16(b[fl+10:], 1)
		}
		nativeEndian.PutUint64(b[fl+idx:], l.entriesRoot)
		return b, "the free list holds a page in use"
	default:
		// The first leaf element's key size runs far past its page.
		leaf := int(nativeEndian.Uint64(b[child0:])) * l.ps
		nativeEndian.PutUint32(b[leaf+boltPageHeader+8:], 1<<30)
		return b, "a leaf key running far past its page"
	}
}

// damage returns trial i's damaged copy of the fixture and what was done:
// trials 0-2 truncate the file to 25, 50 and 75% of its length, trials 3-5
// to 25, 50 and 75% of the pages in use (bbolt grows a file ahead of its
// use), trials 6-9 are crafted (craft); the others flip 1 to 4 bytes in the
// pages in use past the two meta pages, half of them in the first 64 bytes
// of a page, where the page and element headers are.
func damage(orig []byte, l fixtureLayout, seed uint64, i int) ([]byte, string) {
	ps, used := l.ps, l.used
	switch {
	case i < 3:
		n := len(orig) * (i + 1) / 4
		return bytes.Clone(orig[:n]), fmt.Sprintf("truncated to %d of %d bytes", n, len(orig))
	case i < damageTruncations:
		n := used * (i - 2) / 4
		return bytes.Clone(orig[:n]), fmt.Sprintf("truncated to %d of %d bytes in use", n, used)
	case i < damageFirstFlip:
		return craft(orig, l, i-damageTruncations)
	}
	b := bytes.Clone(orig)
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	var what []string
	for range 1 + r.IntN(4) {
		off := 2*ps + r.IntN(used-2*ps)
		if r.IntN(2) == 0 {
			off = off - off%ps + r.IntN(64)
		}
		x := byte(1 + r.IntN(255))
		b[off] ^= x
		what = append(what, fmt.Sprintf("%#x^=%#02x", off, x))
	}
	return b, "flipped " + strings.Join(what, " ")
}

// damageOK reports whether err is an error a damaged file may give: a
// refusal (ErrNotCache) or a damage report (ErrCorrupt).
func damageOK(err error) bool {
	return err == nil || errors.Is(err, progcache.ErrCorrupt) || errors.Is(err, progcache.ErrNotCache)
}

// damageReads runs the reading operations on a cache over a damaged file:
// each may fail only as damageOK allows, and a hit must be the object
// stored.
func damageReads(ctx context.Context, c *Cache, entries int) []error {
	var errs []error
	check := func(op string, err error) {
		if !damageOK(err) {
			errs = append(errs, fmt.Errorf("%s: %w", op, err))
		}
	}
	_, err := c.Len(ctx)
	check("Len", err)
	for n := range entries {
		got, ok, err := c.Get(ctx, testKey(n))
		check("Get", err)
		if ok && !got.Equal(testObject(n, damageSize(n))) {
			errs = append(errs, fmt.Errorf("Get %d returned a wrong object", n))
		}
	}
	_, err = c.Entries(ctx, false)
	check("Entries", err)
	_, err = c.Totals(ctx)
	check("Totals", err)
	return errs
}

// exerciseDamaged opens the damaged file at p read-write and runs every
// operation; it returns what went wrong, if anything.
func exerciseDamaged(p string, entries int) error {
	ctx := context.Background()
	before, _ := os.ReadFile(p)
	c, err := Open(p, quietBolt(Options{NoSync: true}))
	if err != nil {
		if !damageOK(err) {
			return fmt.Errorf("open: %w; want nil, progcache.ErrNotCache or progcache.ErrCorrupt", err)
		}
		if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
			return fmt.Errorf("open refused (%w) but changed the file", err)
		}
		return nil
	}
	defer c.Close()
	errs := damageReads(ctx, c, entries)
	check := func(op string, err error) {
		if !damageOK(err) {
			errs = append(errs, fmt.Errorf("%s: %w", op, err))
		}
	}
	newKey := testKey(entries + 1)
	check("Put", c.Put(ctx, newKey, testObject(entries+1, 500)))
	switch got, ok, err := c.Get(ctx, newKey); {
	case err != nil:
		errs = append(errs, fmt.Errorf("Get after Put: %w", err))
	case ok && !got.Equal(testObject(entries+1, 500)):
		errs = append(errs, errors.New("Get after Put returned a wrong object"))
	}
	check("Delete", c.Delete(ctx, testKey(2)))
	_, err = c.Prune(ctx, 64<<10)
	check("Prune", err)
	_, err = c.Entries(ctx, true)
	check("Entries(verify)", err)
	check("Clear", c.Clear(ctx))
	check("Close", c.Close())

	// Whatever happened, the path must hold a working cache again.
	c, err = Open(p, quietBolt(Options{NoSync: true}))
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("reopen: %w", err))...)
	}
	defer c.Close()
	if err := c.Put(ctx, newKey, testObject(entries+1, 500)); err != nil {
		errs = append(errs, fmt.Errorf("Put after reopen: %w", err))
	} else if _, ok, err := c.Get(ctx, newKey); err != nil {
		errs = append(errs, fmt.Errorf("Get after reopen: %w", err))
	} else if !ok {
		errs = append(errs, errors.New("Get after reopen missed the entry just put"))
	}
	return errors.Join(errs...)
}

// TestBoltDamageChild is not a test: it is the body of the child process
// that TestBoltDamage starts, running trials [from, to) of one fixture.
func TestBoltDamageChild(t *testing.T) {
	dir := os.Getenv("PROGCACHE_BOLT_DAMAGE_DIR")
	if dir == "" {
		t.Skip("child process of TestBoltDamage only")
	}
	from, _ := strconv.Atoi(os.Getenv("PROGCACHE_BOLT_DAMAGE_FROM"))
	to, _ := strconv.Atoi(os.Getenv("PROGCACHE_BOLT_DAMAGE_TO"))
	orig, err := os.ReadFile(filepath.Join(dir, "fixture.db"))
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(3)
	}
	l := layoutOf(t, filepath.Join(dir, "fixture.db"), orig)
	var started atomic.Int64
	go damageWatchdog(&started)
	for i := from; i < to; i++ {
		b, what := damage(orig, l, damageSeed, i)
		started.Store(time.Now().UnixNano())
		fmt.Printf("START %d %s\n", i, what)
		p := filepath.Join(dir, fmt.Sprintf("trial-%d.db", i))
		if err := os.WriteFile(p, b, filePerm); err != nil {
			fmt.Println("ERROR", err)
			os.Exit(3)
		}
		err := damageTrial(p, b)
		if err != nil {
			fmt.Printf("FAIL %d %s\n", i, strings.ReplaceAll(err.Error(), "\n", "; "))
		} else {
			fmt.Printf("OK %d\n", i)
		}
		os.Stdout.Sync()
	}
	os.Exit(0)
}

// damageWatchdog ends the child when a trial runs past damageTrialLimit or
// the heap grows past damageHeapLimit: a cursor caught in a page cycle
// loops, growing its stack, until memory runs out.
func damageWatchdog(started *atomic.Int64) {
	const (
		damageTrialLimit = 20 * time.Second
		damageHeapLimit  = 1 << 30
	)
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	for range time.Tick(20 * time.Millisecond) {
		metrics.Read(sample)
		if heap := sample[0].Value.Uint64(); heap > damageHeapLimit {
			fmt.Printf("WATCHDOG heap at %d bytes\n", heap)
			os.Exit(5)
		}
		if t := started.Load(); t != 0 && time.Since(time.Unix(0, t)) > damageTrialLimit {
			fmt.Printf("WATCHDOG trial running for over %v\n", damageTrialLimit)
			os.Exit(5)
		}
	}
}

// damageTrial runs the checks on one damaged file at p, whose bytes are b.
func damageTrial(p string, b []byte) error {
	if err := exerciseReadOnly(p, b); err != nil {
		return fmt.Errorf("read-only: %w", err)
	}
	return exerciseDamaged(p, damageEntries)
}

func TestBoltDamage(t *testing.T) {
	dir := t.TempDir()
	writeDamageFixture(t, filepath.Join(dir, "fixture.db"), damageEntries)
	trials := damageFirstFlip + damageFlipTrials
	if testing.Short() || raceEnabled {
		// Under the race detector each trial is ~6x slower, and the race
		// detector looks for unsynchronised access, which the truncations,
		// crafted pages and first flips exercise as well as 300 flips do.
		// Every run without -race (go test ./progcache/bolt, the macOS and
		// Windows legs, release check) sweeps all of them.
		trials = damageFirstFlip + damageShortTrials
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var failed []string
	for next := 0; next < trials; {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBoltDamageChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PROGCACHE_BOLT_DAMAGE_DIR="+dir,
			"PROGCACHE_BOLT_DAMAGE_FROM="+strconv.Itoa(next), "PROGCACHE_BOLT_DAMAGE_TO="+strconv.Itoa(trials))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		current, what := -1, ""
		var tail []string
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			f := strings.SplitN(line, " ", 3)
			switch f[0] {
			case "START":
				current, _ = strconv.Atoi(f[1])
				what, tail = strings.Join(f[2:], " "), nil
			case "OK":
				current = -1
			case "FAIL":
				failed = append(failed, fmt.Sprintf("trial %s (%s): %s", f[1], what, strings.Join(f[2:], " ")))
				current = -1
			default:
				tail = append(tail, line)
			}
		}
		werr := cmd.Wait()
		if current < 0 {
			if werr != nil {
				t.Fatalf("damage child: %v\n%s%s", werr, strings.Join(tail, "\n"), stderr.String())
			}
			break
		}
		// The child died inside trial current: record it with the end of
		// what it printed, and go on with the next trial in a new child.
		msg := strings.Join(tail, "\n") + stderr.String()
		if len(msg) > 1500 {
			msg = msg[:1500] + "..."
		}
		failed = append(failed, fmt.Sprintf("trial %d (%s): the process died (%v):\n%s", current, what, werr, msg))
		next = current + 1
		if ctx.Err() != nil {
			t.Fatal("damage trials timed out")
		}
	}
	for _, f := range failed {
		t.Error(f)
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d damage trials failed", len(failed), trials)
	}
}

// exerciseReadOnly opens the damaged file at p (holding b) read-only, runs
// every reading operation, checks that the changing ones fail with
// ErrReadOnly, and that the file's bytes and modification time are
// unchanged.
func exerciseReadOnly(p string, b []byte) error {
	ctx := context.Background()
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	var errs []error
	c, err := Open(p, quietBolt(Options{ReadOnly: true}))
	if err != nil {
		if !damageOK(err) {
			errs = append(errs, fmt.Errorf("open: %w; want nil, progcache.ErrNotCache or progcache.ErrCorrupt", err))
		}
	} else {
		errs = append(errs, damageReads(ctx, c, damageEntries)...)
		for op, err := range map[string]error{
			"Put":    c.Put(ctx, testKey(1), testObject(1, 10)),
			"Delete": c.Delete(ctx, testKey(1)),
			"Clear":  c.Clear(ctx),
		} {
			switch {
			case err == nil:
				errs = append(errs, fmt.Errorf("%s on a read-only cache succeeded, want progcache.ErrReadOnly", op))
			case !errors.Is(err, progcache.ErrReadOnly) && !errors.Is(err, progcache.ErrCorrupt):
				errs = append(errs, fmt.Errorf("%s on a read-only cache = %w, want progcache.ErrReadOnly", op, err))
			}
		}
		if err := c.Close(); !damageOK(err) {
			errs = append(errs, fmt.Errorf("Close: %w", err))
		}
	}
	after, err := os.Stat(p)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if now, _ := os.ReadFile(p); !bytes.Equal(now, b) || !after.ModTime().Equal(fi.ModTime()) {
		errs = append(errs, errors.New("a read-only open changed the file"))
	}
	return errors.Join(errs...)
}

// currentMeta returns the meta page bbolt uses in the file b.
func currentMeta(b []byte) boltMeta {
	m0 := parseBoltMeta(b)
	m1 := parseBoltMeta(b[m0.pageSize:])
	if m1.txid > m0.txid {
		return m1
	}
	return m0
}

// writeBehind writes b at off of the file at p through a descriptor of
// its own, as a process that ignores bbolt's advisory lock would: bbolt's
// shared mapping sees it at once.
func writeBehind(t *testing.T, p string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// within runs f and fails the test if it has not returned after a
// generous minute: a bbolt lock left held would make it wait for ever.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return: a lock left held?", what)
	}
}

// TestBoltDamageWhileOpen: damage made to an open file behind bbolt's lock
// (a truncation, overwritten pages) is met by the next operation, which
// sets the file aside and carries on with a new one, without a crash and
// without waiting on a bbolt lock a panic left held.
func TestBoltDamageWhileOpen(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		wedged bool // whether the panic leaves bbolt's locks held
		damage func(t *testing.T, c *Cache, p string)
		op     func(c *Cache) error
	}{
		// bbolt faults reading the meta page in Begin, holding its meta
		// and mmap locks: the handle is wedged.
		{"truncated to nothing, Get", true, func(t *testing.T, c *Cache, p string) { os.Truncate(p, 0) }, func(c *Cache) error {
			_, ok, err := c.Get(ctx, testKey(1))
			if ok {
				return errors.New("a hit from a truncated file")
			}
			return err
		}},
		{"truncated to nothing, Put", true, func(t *testing.T, c *Cache, p string) { os.Truncate(p, 0) }, func(c *Cache) error {
			return c.Put(ctx, testKey(99), testObject(99, 10))
		}},
		// The tree lies past the end: SIGBUS inside the transaction,
		// which rolls back cleanly.
		{"truncated to the meta pages, Get", false, func(t *testing.T, c *Cache, p string) {
			os.Truncate(p, 2*int64(c.h.db.Info().PageSize))
		}, func(c *Cache) error {
			_, _, err := c.Get(ctx, testKey(1))
			return err
		}},
		// bbolt's page assertion panics inside the transaction.
		{"entries root overwritten, Entries", false, func(t *testing.T, c *Cache, p string) {
			writeBehind(t, p, entriesRoot(t, c)*int64(c.h.db.Info().PageSize), bytes.Repeat([]byte{0xEE}, 16))
		}, func(c *Cache) error {
			_, err := c.Entries(ctx, false)
			switch {
			case err == nil:
				return errors.New("Entries on a damaged file succeeded, want progcache.ErrCorrupt")
			case !errors.Is(err, progcache.ErrCorrupt):
				return fmt.Errorf("Entries on a damaged file = %w, want progcache.ErrCorrupt", err)
			}
			return nil
		}},
		// A write transaction panics on the damaged root. DB.Update's own
		// rollback would re-read the damaged free list and panic again,
		// holding bbolt's writer lock, so DB.Close would wait for ever;
		// run rolls back with Tx.Rollback, which does not read the file.
		{"entries root and free list overwritten, Put", false, func(t *testing.T, c *Cache, p string) {
			ps := int64(c.h.db.Info().PageSize)
			b, _ := os.ReadFile(p)
			writeBehind(t, p, entriesRoot(t, c)*ps, bytes.Repeat([]byte{0xEE}, 16))
			writeBehind(t, p, int64(currentMeta(b).freelist)*ps, bytes.Repeat([]byte{0xEE}, 16))
		}, func(c *Cache) error {
			return c.Put(ctx, testKey(99), testObject(99, 10))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "cache.db")
			c := openCache(t, p, Options{NoSync: true})
			for n := range 60 {
				c.Put(ctx, testKey(n), testObject(n, 700))
			}
			tc.damage(t, c, p)
			old := c.h
			within(t, tc.name, func() {
				if err := tc.op(c); err != nil {
					t.Errorf("the operation that met the damage: %v", err)
				}
			})
			if c.SetAside() == "" {
				t.Fatal("the damaged file was not set aside")
			}
			if s := c.Stats(); s.Corrupt == 0 {
				t.Error("the damage was not counted")
			}
			if old.wedged.Load() != tc.wedged {
				t.Errorf("old handle wedged %v, want %v", old.wedged.Load(), tc.wedged)
			}
			within(t, "the operations after", func() {
				if err := c.Put(ctx, testKey(1), testObject(1, 10)); err != nil {
					t.Fatal(err)
				}
				if got, ok, err := c.Get(ctx, testKey(1)); !ok || err != nil || !got.Equal(testObject(1, 10)) {
					t.Fatalf("Get on the new file: hit %v, err %v", ok, err)
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
			})
			c = openCache(t, p, Options{})
			if _, ok, _ := c.Get(ctx, testKey(1)); !ok {
				t.Error("the new file lost its entry across a reopen")
			}
		})
	}
}

func entriesRoot(t *testing.T, c *Cache) int64 {
	t.Helper()
	var root int64
	c.h.db.View(func(tx *bbolt.Tx) error {
		root = int64(tx.Bucket(bucketEntries).Root())
		return nil
	})
	if root == 0 {
		t.Fatal("the entries bucket is inline; put more")
	}
	return root
}

// TestBoltDamageConcurrent: goroutines keep using the cache while its file
// is truncated under it three times. Every operation returns (nil, or an
// error wrapping ErrCorrupt for a listing or totals cut short), hits are
// right, and the cache ends up working on a new file. Run with -race.
func TestBoltDamageConcurrent(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "cache.db")
	c := openCache(t, p, Options{NoSync: true, MaxBytes: 256 << 10})
	const workers, keys = 6, 40
	size := func(n int) int { return 200 + 97*n }
	for n := range keys {
		c.Put(ctx, testKey(n), testObject(n, size(n)))
	}
	ps := int64(c.h.db.Info().PageSize)
	var ops atomic.Int64
	stop := make(chan struct{})
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				n := r.IntN(keys)
				var err error
				switch op := r.IntN(20); {
				case op < 10:
					var got progcache.Object
					var ok bool
					got, ok, err = c.Get(ctx, testKey(n))
					if ok && !got.Equal(testObject(n, size(n))) {
						err = fmt.Errorf("Get %d: wrong object", n)
					}
				case op < 15:
					err = c.Put(ctx, testKey(n), testObject(n, size(n)))
				case op < 16:
					err = c.Delete(ctx, testKey(n))
				case op < 17:
					_, err = c.Entries(ctx, false)
				case op < 18:
					_, err = c.Totals(ctx)
				case op < 19:
					_, err = c.Prune(ctx, 128<<10)
				default:
					_, err = c.Len(ctx)
				}
				if err != nil && !errors.Is(err, progcache.ErrCorrupt) {
					errs <- err
					return
				}
				ops.Add(1)
			}
		})
	}
	waitOps := func(n int64) {
		for ops.Load() < n {
			time.Sleep(time.Millisecond)
		}
	}
	for i, to := range []int64{0, ps, 3 * ps} {
		waitOps(int64(200 * (i + 1)))
		if err := os.Truncate(p, to); err != nil {
			t.Fatal(err)
		}
	}
	waitOps(800)
	close(stop)
	wg.Wait()
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	m, _ := filepath.Glob(p + ".corrupt-*")
	t.Logf("%d operations, %d files set aside", ops.Load(), len(m))
	if len(m) == 0 || c.Stats().Corrupt == 0 {
		t.Errorf("set aside %v, corrupt %d; want the truncated files set aside and counted", m, c.Stats().Corrupt)
	}
	if err := c.Put(ctx, testKey(1), testObject(1, size(1))); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.Get(ctx, testKey(1)); !ok || err != nil {
		t.Fatalf("Get after the damage: hit %v, err %v", ok, err)
	}
}

// FuzzBoltFile opens arbitrary bytes as a bolt file, read-only and then
// read-write, and runs every operation (damageTrial): nothing may crash,
// hang or return an error other than a refusal or a damage report, and a
// read-only open must leave the file as it was. The seeds are a small
// populated cache, cut to the pages in use (small inputs fuzz and minimise
// faster), and the damage of TestBoltDamage applied to it. The meta pages'
// checksums are recomputed before each run, so that mutated meta fields
// (page size, root, free list, high-water mark) reach the check instead of
// failing the checksum.
func FuzzBoltFile(f *testing.F) {
	p := filepath.Join(f.TempDir(), "fixture.db")
	orig := writeDamageFixture(f, p, damageFuzzEntries)
	l := layoutOf(f, p, orig)
	orig = orig[:l.used]
	f.Add(orig)
	for i := range damageFirstFlip + 20 {
		b, _ := damage(orig, l, damageSeed, i)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		resealMetas(b)
		p := filepath.Join(t.TempDir(), "cache.db")
		if err := os.WriteFile(p, b, filePerm); err != nil {
			t.Fatal(err)
		}
		if err := damageTrial(p, b); err != nil {
			t.Fatal(err)
		}
	})
}

// resealMetas recomputes the checksum of each meta page in b that carries
// bbolt's magic.
func resealMetas(b []byte) {
	ps := 4096
	if len(b) >= boltPageHeader+boltMetaSize {
		if m := parseBoltMeta(b); validPageSize(int64(m.pageSize)) {
			ps = int(m.pageSize)
		}
	}
	for _, off := range []int{0, ps} {
		if off+boltPageHeader+boltMetaSize > len(b) {
			continue
		}
		m := b[off+boltPageHeader:]
		if nativeEndian.Uint32(m) != boltMagic {
			continue
		}
		h := fnv.New64a()
		h.Write(m[:56])
		nativeEndian.PutUint64(m[56:], h.Sum64())
	}
}
