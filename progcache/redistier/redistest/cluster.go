package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of masters without replicas, made with
// redis-cli --cluster create.
type Cluster struct {
	Masters []*Server
}

// StartCluster starts n cluster-enabled servers, joins them into one
// cluster with redis-cli --cluster create (the 16384 slots split evenly,
// no replicas), and returns once every node reports cluster_state:ok. The
// servers are stopped when the test ends.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		Binary(tb) // same skip or failure, same hint
		tb.Fatalf("redistest: redis-server is installed but redis-cli is not: %v", err)
	}
	cl := &Cluster{}
	addrs := make([]string, n)
	for i := range n {
		s := Start(tb, "--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", i), "--cluster-node-timeout", "5000")
		cl.Masters = append(cl.Masters, s)
		addrs[i] = s.Addr
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		tb.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	deadline := time.Now().Add(readyWait)
	for _, s := range cl.Masters {
		for {
			info, err := s.CLI("cluster", "info")
			// A node can report cluster_state:ok while its slot map still
			// lacks a master's address; a client that loads the map from
			// it then walks fewer masters (ForEachMaster) until it reloads
			// seconds later. So the map must name every master too.
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+fmt.Sprint(n)) && slotMapComplete(s, addrs) {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("redistest: node %s not ready within %v: %v\n%s", s.Addr, readyWait, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return cl
}

// Addrs returns the masters' addresses.
func (cl *Cluster) Addrs() []string {
	a := make([]string, len(cl.Masters))
	for i, s := range cl.Masters {
		a[i] = s.Addr
	}
	return a
}

// Client returns a cluster client, closed when the test ends, after it
// has loaded the slot map.
func (cl *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	tb.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), readyWait)
	defer cancel()
	if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() }); err != nil {
		tb.Fatalf("redistest: cluster client: %v", err)
	}
	return c
}

// slotMapComplete reports whether s's CLUSTER SLOTS covers all 16384 slots
// with masters at exactly addrs.
func slotMapComplete(s *Server, addrs []string) bool {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return false
	}
	covered := 0
	masters := map[string]bool{}
	for _, sl := range slots {
		if len(sl.Nodes) == 0 || !slices.Contains(addrs, sl.Nodes[0].Addr) {
			return false
		}
		covered += sl.End - sl.Start + 1
		masters[sl.Nodes[0].Addr] = true
	}
	return covered == 16384 && len(masters) == len(addrs)
}
