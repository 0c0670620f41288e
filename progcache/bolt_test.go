package progcache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func quietBolt(o BoltOptions) BoltOptions {
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return o
}

func openBolt(t *testing.T, path string, o BoltOptions) *Bolt {
	t.Helper()
	c, err := OpenBolt(path, quietBolt(o))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestBoltGarbageFile(t *testing.T) {
	ctx := context.Background()
	for name, content := range map[string][]byte{
		"text":   []byte("hello, not a database\n"),
		"zeros":  make([]byte, 64<<10),
		"random": bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef, 0x01}, 5000),
		"empty":  {},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "cache.db")
			os.WriteFile(p, content, 0o600)
			c := openBolt(t, p, BoltOptions{})
			if len(content) > 0 && c.SetAside() == "" {
				t.Fatal("a garbage file must be set aside")
			}
			if c.SetAside() != "" {
				if b, _ := os.ReadFile(c.SetAside()); !bytes.Equal(b, content) {
					t.Error("the set-aside file must keep the original bytes")
				}
				if c.Stats().Corrupt != 1 {
					t.Errorf("Stats.Corrupt = %d, want 1", c.Stats().Corrupt)
				}
			}
			if err := c.Put(ctx, testKey(1), testObject(1, 10)); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := c.Get(ctx, testKey(1)); !ok {
				t.Fatal("the rebuilt file must work")
			}
		})
	}
}

func TestBoltForeignDatabase(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cache.db")
	db, err := bolt.Open(p, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		b, _ := tx.CreateBucket([]byte("someone-else"))
		return b.Put([]byte("k"), []byte("v"))
	})
	db.Close()
	c := openBolt(t, p, BoltOptions{})
	if c.SetAside() == "" {
		t.Fatal("a bbolt file of another application must be set aside, not used or wiped")
	}
}

func TestBoltSchemaMismatch(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cache.db")
	c := openBolt(t, p, BoltOptions{})
	c.Put(context.Background(), testKey(1), testObject(1, 10))
	c.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchema, []byte("accelkit/progcache/bolt/v0"))
	})
	c.Close()
	c2 := openBolt(t, p, BoltOptions{})
	if c2.SetAside() == "" {
		t.Fatal("a schema mismatch must rebuild")
	}
	if n, _ := c2.Len(context.Background()); n != 0 {
		t.Errorf("rebuilt file has %d entries", n)
	}
}

func TestBoltCorruptEntry(t *testing.T) {
	ctx := context.Background()
	c := openBolt(t, filepath.Join(t.TempDir(), "cache.db"), BoltOptions{})
	c.Put(ctx, testKey(1), testObject(1, 100))
	k1 := testKey(1)
	c.db.Update(func(tx *bolt.Tx) error {
		v := bytes.Clone(tx.Bucket(bucketEntries).Get(k1[:]))
		v[len(v)/2] ^= 1
		return tx.Bucket(bucketEntries).Put(k1[:], v)
	})
	if _, ok, err := c.Get(ctx, testKey(1)); ok || err != nil {
		t.Fatalf("corrupt entry: hit %v err %v; want a miss", ok, err)
	}
	if n, _ := c.Len(ctx); n != 0 || c.Stats().Corrupt != 1 {
		t.Errorf("corrupt entry not removed and counted: len %d corrupt %d", n, c.Stats().Corrupt)
	}
}

func TestBoltReadAwareLRU(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "cache.db")
	size := RecordSize(testObject(0, 1000), RecordOptions{})
	c := openBolt(t, p, BoltOptions{MaxBytes: 3 * size})
	for i := range 3 {
		c.Put(ctx, testKey(i), testObject(i, 1000))
	}
	c.Get(ctx, testKey(0)) // 0 becomes the most recent; 1 is now the oldest
	c.Close()
	// The access time was batched in memory and written on Close; a
	// reopened cache must know 0 was used after 1 and 2.
	c = openBolt(t, p, BoltOptions{MaxBytes: 3 * size})
	c.Put(ctx, testKey(3), testObject(3, 1000))
	if _, ok, _ := c.Get(ctx, testKey(1)); ok {
		t.Error("entry 1 (least recently used) must be evicted")
	}
	if _, ok, _ := c.Get(ctx, testKey(0)); !ok {
		t.Error("entry 0 (read before reopen) must survive")
	}
}

func TestBoltAccessBatch(t *testing.T) {
	ctx := context.Background()
	c := openBolt(t, filepath.Join(t.TempDir(), "cache.db"), BoltOptions{})
	c.Put(ctx, testKey(1), testObject(1, 10))
	writes := func() int64 { st := c.db.Stats(); return st.TxStats.GetWrite() }
	before := writes()
	for range accessBatch - 1 {
		c.Get(ctx, testKey(1))
	}
	if w := writes() - before; w != 0 {
		t.Errorf("%d page writes for %d hits; access times must be batched", w, accessBatch-1)
	}
}

func TestBoltCaps(t *testing.T) {
	for _, o := range []BoltOptions{{MaxBytes: -1}, {Timeout: -1}} {
		if _, err := OpenBolt(filepath.Join(t.TempDir(), "x.db"), o); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("OpenBolt(%+v) = %v, want ErrInvalidConfig", o, err)
		}
	}
}

func holdBoltHelper() error {
	c, err := OpenBolt(os.Getenv("PROGCACHE_FILE"), BoltOptions{})
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("OPEN")
	blockUntilKilled()
	return nil
}

func TestBoltLocked(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("flock semantics")
	}
	p := filepath.Join(t.TempDir(), "cache.db")
	c := openBolt(t, p, BoltOptions{})
	c.Put(context.Background(), testKey(1), testObject(1, 100))
	c.Close()
	sum := func() [32]byte { b, _ := os.ReadFile(p); return sha256.Sum256(b) }
	before := sum()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, sc := helper(t, ctx, "PROGCACHE_HELPER=holdbolt", "PROGCACHE_FILE="+p)
	if !sc.Scan() || sc.Text() != "OPEN" {
		t.Fatalf("child did not open the file: %q", sc.Text())
	}
	if sum() != before {
		t.Fatal("opening an existing file must not write to it")
	}
	_, err := OpenBolt(p, quietBolt(BoltOptions{Timeout: 200 * time.Millisecond}))
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("OpenBolt on a held file = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "FileStream") {
		t.Errorf("the ErrLocked message must point to FileStream: %v", err)
	}
	if sum() != before {
		t.Error("a held file must be left untouched")
	}
	if m, _ := filepath.Glob(p + ".corrupt-*"); len(m) != 0 {
		t.Error("a held file must not be set aside as corrupt")
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// TestBoltOtherMACKeyKept: reopened with another MAC key, a Bolt reports
// the entries as unreadable misses and keeps them; the right key reads them
// again, and verification does not remove them.
func TestBoltOtherMACKeyKept(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "cache.db")
	right := BoltOptions{Record: RecordOptions{MACKey: bytes.Repeat([]byte{1}, 32)}}
	wrong := BoltOptions{Record: RecordOptions{MACKey: bytes.Repeat([]byte{2}, 32)}}
	c := openBolt(t, p, right)
	if err := c.Put(ctx, testKey(1), testObject(1, 100)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = openBolt(t, p, wrong)
	if _, ok, err := c.Get(ctx, testKey(1)); ok || err != nil {
		t.Fatalf("Get with another MAC key = hit %v, err %v; want a miss", ok, err)
	}
	es, err := c.Entries(ctx, true)
	if err != nil || len(es) != 1 || !es[0].Unreadable {
		t.Fatalf("Entries(verify) with another MAC key = %+v, %v; want the entry reported unreadable", es, err)
	}
	if s := c.Stats(); s.Unreadable != 1 || s.Corrupt != 0 || s.Misses != 1 {
		t.Errorf("unreadable %d, corrupt %d, misses %d; want 1, 0, 1", s.Unreadable, s.Corrupt, s.Misses)
	}
	c.Close()
	c = openBolt(t, p, right)
	if got, ok, err := c.Get(ctx, testKey(1)); !ok || err != nil || !got.Equal(testObject(1, 100)) {
		t.Fatalf("Get with the right key after a wrong-key session = hit %v, err %v; want the object", ok, err)
	}
}
