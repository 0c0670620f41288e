package redistier_test

// A Cache as the remote tier and the lease service of tiered.Cache,
// across processes: each test process below stands for a machine of a
// fleet, with a local filestream cache of its own and its own Redis client.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/filestream"
	"github.com/accelkit/accelkit/progcache/redistier"
	"github.com/accelkit/accelkit/progcache/redistier/redistest"
	"github.com/accelkit/accelkit/progcache/tiered"
)

// Environment of the machine processes these tests start.
const (
	machineRoleEnv = "REDISTIER_TEST_MACHINE_ROLE" // "compile-once" or "die-compiling"
	machineAddrEnv = "REDISTIER_TEST_MACHINE_ADDR"
	machineNSEnv   = "REDISTIER_TEST_MACHINE_NS"
	machineDirEnv  = "REDISTIER_TEST_MACHINE_DIR"
)

// machineOpts are the remote tier's options on every machine: leases
// short enough that a dead holder is taken over within seconds, calls
// patient enough for four race-instrumented processes on two cores.
var machineOpts = redistier.Options{Timeout: 500 * time.Millisecond, LeaseTTL: 1500 * time.Millisecond}

// compileCounter is the Redis key, in namespace ns, that every machine's
// compile increments: the fleet's count of compiles.
func compileCounter(ns string) string { return "test:" + ns + ":compiles" }

// tieredObject is what the machines compile for k: the same bytes on
// every machine, as a compiler's output for one key is.
func tieredObject(k progcache.Key) progcache.Object {
	return progcache.Object{Kind: "cubin", Code: bytes.Repeat([]byte(k.String()), 1000)}
}

// openMachine opens a machine's cache: a filestream cache in dir in front of a
// Cache on addr, which is also the Leaser. The client is the machine's
// own.
func openMachine(t testing.TB, addr, ns, dir string) (*tiered.Cache, *redis.Client) {
	t.Helper()
	client := clientOf(t, addr, true)
	opts := machineOpts
	opts.Namespace = ns
	remote := openCache(t, client, opts)
	local, err := filestream.Open(dir, filestream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := tiered.New(local, remote, tiered.Options{Leaser: remote, LeaseWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	return tc, client
}

// machineProc is a machine process: this test binary again, running the
// test that started it in the role of a machine.
type machineProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser // the machine exits when it closes, should its test die
	out   *bufio.Reader
}

// startMachine starts a machine process in role (machineRoleEnv), on the
// server at addr and namespace ns, with a local directory of its own. It
// is killed, if still running, when t ends.
func startMachine(t *testing.T, role, addr, ns string) machineProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$")
	cmd.Env = append(os.Environ(), machineRoleEnv+"="+role, machineAddrEnv+"="+addr,
		machineNSEnv+"="+ns, machineDirEnv+"="+filepath.Join(t.TempDir(), "local"))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return machineProc{cmd, stdin, bufio.NewReader(stdout)}
}

// machineReport is what a machine process prints when it is done.
type machineReport struct {
	Digests []string         `json:"digests"` // of each goroutine's object
	Tier    tiered.TierStats `json:"tier"`
}

// TestTieredCompileOnceAcrossMachines: 4 processes with separate local
// directories, 32 goroutines each, miss one key at once; the fleet
// compiles it once, and every goroutine gets the same object.
func TestTieredCompileOnceAcrossMachines(t *testing.T) {
	if os.Getenv(machineRoleEnv) == "compile-once" {
		runCompileOnceMachine(t)
		return
	}
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	const machines = 4
	procs := make([]machineProc, machines)
	for i := range procs {
		procs[i] = startMachine(t, "compile-once", srv.Addr, ns)
	}
	for i, p := range procs {
		if line, err := p.out.ReadString('\n'); line != "READY\n" {
			t.Fatalf("machine %d said %q, %v; want READY", i, line, err)
		}
	}
	for _, p := range procs {
		p.stdin.Close() // all four go at once
	}
	var digests []string
	var tier tiered.TierStats
	for i, p := range procs {
		line, err := p.out.ReadString('\n')
		var r machineReport
		if err != nil || json.Unmarshal([]byte(line), &r) != nil {
			t.Fatalf("machine %d said %q, %v; want its report", i, line, err)
		}
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("machine %d: %v", i, err)
		}
		digests = append(digests, r.Digests...)
		tier.LeaseAcquired += r.Tier.LeaseAcquired
		tier.LeaseWaited += r.Tier.LeaseWaited
		tier.LeaseWaitHits += r.Tier.LeaseWaitHits
		tier.LeaseTakenOver += r.Tier.LeaseTakenOver
		tier.LeaseWaitTimeouts += r.Tier.LeaseWaitTimeouts
		tier.LeaseAcquireErrors += r.Tier.LeaseAcquireErrors
	}
	n, err := srv.Client(t).Get(bg, compileCounter(ns)).Int()
	if err != nil || n != 1 {
		t.Fatalf("the fleet compiled the key %d times (%v); want once", n, err)
	}
	want := digestOf(tieredObject(cachetest.KeyN(1)))
	if len(digests) != machines*32 {
		t.Fatalf("%d goroutines reported, want %d", len(digests), machines*32)
	}
	for i, d := range digests {
		if d != want {
			t.Fatalf("goroutine %d got an object with digest %s, want %s", i, d, want)
		}
	}
	// One machine took the lease and compiled; the others waited for its
	// entry, or found it before or just after taking the freed lease.
	if tier.LeaseAcquired+tier.LeaseTakenOver == 0 || tier.LeaseWaitTimeouts != 0 || tier.LeaseAcquireErrors != 0 {
		t.Errorf("lease counters over the fleet %+v: want a lease taken, no timeouts or errors", tier)
	}
	t.Logf("fleet: 1 compile; %d machines waited on the lease, %d found the entry while waiting", tier.LeaseWaited, tier.LeaseWaitHits)
}

// runCompileOnceMachine is a machine of TestTieredCompileOnceAcrossMachines:
// it says READY, waits for its standard input to close, runs 32
// GetOrCompile calls of one key at once, and prints its report.
func runCompileOnceMachine(t *testing.T) {
	ns := os.Getenv(machineNSEnv)
	tc, client := openMachine(t, os.Getenv(machineAddrEnv), ns, os.Getenv(machineDirEnv))
	k := cachetest.KeyN(1)
	fmt.Println("READY")
	io.Copy(io.Discard, os.Stdin)

	var wg sync.WaitGroup
	digests := make([]string, 32)
	for i := range digests {
		wg.Go(func() {
			obj, err := progcache.GetOrCompile(bg, tc, k, func(ctx context.Context) (progcache.Object, error) {
				if err := client.Incr(ctx, compileCounter(ns)).Err(); err != nil {
					return progcache.Object{}, err
				}
				time.Sleep(300 * time.Millisecond) // a compile: the others arrive meanwhile
				return tieredObject(k), nil
			})
			if err != nil {
				t.Errorf("GetOrCompile: %v", err)
				return
			}
			digests[i] = digestOf(obj)
		})
	}
	wg.Wait()
	b, err := json.Marshal(machineReport{Digests: digests, Tier: tc.TierStats()})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(string(b))
}

// TestTieredLeaseHolderKilled: a machine dies while it compiles under the
// lease (SIGKILL); a machine waiting for it takes the lease over once it
// expires, compiles, and stores. The takeover time is logged: at most
// LeaseTTL after the dead holder's last heartbeat, plus one poll.
func TestTieredLeaseHolderKilled(t *testing.T) {
	t.Parallel() // mostly waiting: for a failover, a cluster, a lease to expire
	if os.Getenv(machineRoleEnv) == "die-compiling" {
		runDyingMachine(t)
		return
	}
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	holder := startMachine(t, "die-compiling", srv.Addr, ns)
	defer holder.stdin.Close()
	cmd := holder.cmd
	if line, err := holder.out.ReadString('\n'); line != "COMPILING\n" {
		t.Fatalf("the holder machine said %q, %v; want COMPILING", line, err)
	}

	tc, _ := openMachine(t, srv.Addr, ns, filepath.Join(t.TempDir(), "local"))
	k := cachetest.KeyN(1)
	type result struct {
		obj   progcache.Object
		err   error
		start time.Time // when this machine's compile began
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.obj, r.err = progcache.GetOrCompile(bg, tc, k, func(context.Context) (progcache.Object, error) {
			r.start = time.Now()
			return tieredObject(k), nil
		})
		done <- r
	}()
	eventually(t, 10*time.Second, "the second machine waits on the lease", func() bool {
		return tc.TierStats().LeaseWaited == 1
	})
	time.Sleep(2 * machineOpts.LeaseTTL) // the holder's heartbeat keeps its lease past its first expiry
	select {
	case r := <-done:
		t.Fatalf("GetOrCompile returned (%v) while the holder was alive and compiling", r.err)
	default:
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	cmd.Wait()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting machine did not take over the dead holder's lease within 30 s")
	}
	if r.err != nil || !bytes.Equal(r.obj.Code, tieredObject(k).Code) {
		t.Fatalf("GetOrCompile after the takeover = %d bytes, %v; want the object", len(r.obj.Code), r.err)
	}
	if r.start.IsZero() {
		t.Fatal("the waiting machine returned without compiling, but the holder died before storing")
	}
	s := tc.TierStats()
	if s.LeaseTakenOver != 1 || s.LeaseWaitTimeouts != 0 {
		t.Errorf("tier counters %+v: want the lease taken over once, no wait timeout", s)
	}
	if _, ok, err := tc.Remote().Get(bg, k); !ok || err != nil {
		t.Errorf("remote tier after the takeover's compile: ok %v, %v; want the entry stored", ok, err)
	}
	t.Logf("lease of a SIGKILLed compiling machine taken over, and its compile started, %v after the kill (LeaseTTL %v, heartbeat every %v)",
		r.start.Sub(killed).Round(time.Millisecond), machineOpts.LeaseTTL, machineOpts.LeaseTTL/3)
}

// runDyingMachine is the holder of TestTieredLeaseHolderKilled: it starts
// the compile of KeyN(1), says COMPILING once inside it (holding the
// lease), and never finishes: it is killed, or exits when its standard
// input closes.
func runDyingMachine(t *testing.T) {
	tc, _ := openMachine(t, os.Getenv(machineAddrEnv), os.Getenv(machineNSEnv), os.Getenv(machineDirEnv))
	_, err := progcache.GetOrCompile(bg, tc, cachetest.KeyN(1), func(context.Context) (progcache.Object, error) {
		if tc.TierStats().LeaseAcquired != 1 {
			return progcache.Object{}, fmt.Errorf("compiling without the lease: %+v", tc.TierStats())
		}
		fmt.Println("COMPILING")
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
		return progcache.Object{}, nil
	})
	t.Fatalf("the dying machine's compile returned: %v", err)
}

// TestTieredPrefetchWarmStart: a machine that joins the fleet fetches
// what another stored, in batches (redistier's Prefetch), into its local
// tier; its lookups are then local hits, Redis or no Redis.
func TestTieredPrefetchWarmStart(t *testing.T) {
	srv := redistest.Start(t)
	ns := freshNamespace(t)
	first, _ := openMachine(t, srv.Addr, ns, filepath.Join(t.TempDir(), "local"))
	var keys []progcache.Key
	for i := range 100 {
		k := cachetest.KeyN(i)
		keys = append(keys, k)
		if err := first.Put(bg, k, tieredObject(k)); err != nil {
			t.Fatal(err)
		}
	}
	first.Close() // drains the queued remote puts
	if s := first.TierStats(); s.RemotePutDone != 100 {
		t.Fatalf("first machine's remote puts: %+v; want 100 done", s)
	}

	joiner, _ := openMachine(t, srv.Addr, ns, filepath.Join(t.TempDir(), "local"))
	n, err := joiner.Prefetch(bg, append(keys, cachetest.KeyN(1000)))
	if n != 100 || err != nil {
		t.Fatalf("Prefetch of 100 stored keys and 1 absent = %d, %v; want 100, nil", n, err)
	}
	rs := joiner.Remote().(*redistier.Cache).RedisStats()
	if rs.Prefetched != 100 || rs.PrefetchMisses != 1 || rs.Hits != 0 {
		t.Errorf("remote tier's counters %+v: want 100 prefetched in batches, 1 prefetch miss, no single Gets", rs)
	}
	srv.Kill()
	for _, k := range keys {
		obj, ok, err := joiner.Get(bg, k)
		if !ok || err != nil || !bytes.Equal(obj.Code, tieredObject(k).Code) {
			t.Fatalf("Get of prefetched %s with Redis down = %v, %v", k, ok, err)
		}
	}
	if s := joiner.TierStats(); s.LocalHits != 100 || s.Backfills != 100 {
		t.Errorf("joiner's counters %+v: want 100 backfills, 100 local hits", s)
	}
}

// TestTieredRedisKilled: Redis SIGKILLed under a machine never fails its
// compiles; once Redis is back (and the breaker has probed it), the
// machine stores into it again.
func TestTieredRedisKilled(t *testing.T) {
	srv := redistest.Start(t)
	tc, _ := openMachine(t, srv.Addr, freshNamespace(t), filepath.Join(t.TempDir(), "local"))
	compiles := 0
	compile := func(k progcache.Key) progcache.CompileFunc {
		return func(context.Context) (progcache.Object, error) {
			compiles++
			return tieredObject(k), nil
		}
	}
	srv.Kill()
	for i := range 10 {
		k := cachetest.KeyN(i)
		obj, err := progcache.GetOrCompile(bg, tc, k, compile(k))
		if err != nil || !bytes.Equal(obj.Code, tieredObject(k).Code) {
			t.Fatalf("GetOrCompile %d with Redis killed = %d bytes, %v; want the compiled object", i, len(obj.Code), err)
		}
	}
	eventually(t, 10*time.Second, "the queued remote puts fail", func() bool { return tc.TierStats().RemotePutFailed == 10 })
	if s := tc.TierStats(); compiles != 10 || s.LeaseAcquireErrors != 10 {
		t.Errorf("with Redis down: %d compiles, counters %+v; want 10 compiles, 10 lease errors", compiles, s)
	}
	// The remote tier's failed lookups are its own misses (it fails
	// open), counted there.
	if rs := tc.Remote().(*redistier.Cache).RedisStats(); rs.Errors == 0 || rs.Breaker != redistier.BreakerOpen || rs.Rejected == 0 {
		t.Errorf("remote tier with Redis down: %d errors, breaker %v, %d rejected; want errors, the breaker open, refusing calls", rs.Errors, rs.Breaker, rs.Rejected)
	}

	srv.Restart()
	k := cachetest.KeyN(100)
	eventually(t, 10*time.Second, "the machine stores into the restarted Redis", func() bool {
		if _, err := progcache.GetOrCompile(bg, tc, k, compile(k)); err != nil {
			t.Fatal(err)
		}
		_, ok, _ := tc.Remote().Get(bg, k)
		if !ok {
			tc.Local().Delete(bg, k) // compile it again
		}
		return ok
	})
	if _, ok, _ := tc.Get(bg, cachetest.KeyN(3)); !ok {
		t.Error("an object compiled while Redis was down is gone from the local tier")
	}
}

// digestOf is a short digest of obj's kind and code.
func digestOf(obj progcache.Object) string {
	h := sha256.New()
	h.Write([]byte(obj.Kind))
	h.Write([]byte{0})
	h.Write(obj.Code)
	return strings.ToLower(hex.EncodeToString(h.Sum(nil)[:8]))
}
