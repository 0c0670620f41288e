package bolt

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/progcache"

	bbolt "go.etcd.io/bbolt"
)

// TestBoltNestedBucketWhereValueBelongs: a bucket under a key where this
// package keeps a value (an entry's access time, an entry, the counters)
// made every later Put, Prune and Close fail with bbolt's "incompatible
// value" for ever. It is damage of ours: the bucket is deleted and the
// operation goes on.
func TestBoltNestedBucketWhereValueBelongs(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "cache.db")
	c := openCache(t, p, Options{NoSync: true})
	for n := range 4 {
		if err := c.Put(ctx, testKey(n), testObject(n, 500)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(p, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	plant := func(tx *bbolt.Tx, bucket, key []byte) error {
		b := tx.Bucket(bucket)
		if err := b.Delete(key); err != nil {
			return err
		}
		nb, err := b.CreateBucket(key)
		if err != nil {
			return err
		}
		return nb.Put([]byte("x"), []byte("y"))
	}
	k0, k1, k9 := testKey(0), testKey(1), testKey(9)
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, pl := range []struct{ bucket, key []byte }{
			{bucketATime, k0[:]},      // an entry's access time
			{bucketATime, k1[:]},      // another, evicted by Prune
			{bucketEntries, k9[:]},    // a key not yet stored
			{bucketMeta, keyCounters}, // the counters
		} {
			if err := plant(tx, pl.bucket, pl.key); err != nil {
				return err
			}
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	c = openCache(t, p, Options{NoSync: true})
	if err := c.Put(ctx, testKey(0), testObject(0, 600)); err != nil {
		t.Errorf("Put over a bucket in atime: %v", err)
	}
	if err := c.Put(ctx, testKey(9), testObject(9, 600)); err != nil {
		t.Errorf("Put over a bucket in entries: %v", err)
	}
	if n, err := c.Prune(ctx, 1); err != nil || n == 0 {
		t.Errorf("Prune: %d evicted, %v", n, err)
	}
	if err := c.Put(ctx, testKey(5), testObject(5, 600)); err != nil {
		t.Errorf("Put after Prune: %v", err)
	}
	if _, _, err := c.Get(ctx, testKey(5)); err != nil {
		t.Error(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close (counters over a bucket): %v", err)
	}
	c = openCache(t, p, Options{NoSync: true})
	if _, ok, err := c.Get(ctx, testKey(5)); !ok || err != nil {
		t.Errorf("Get after reopening: hit %v, %v", ok, err)
	}
	if s, err := c.Totals(ctx); err != nil || s.Puts == 0 {
		t.Errorf("Totals after reopening: %+v, %v (counters not written)", s, err)
	}
	if c.SetAside() != "" {
		t.Errorf("the file was set aside (%s); want it repaired in place", c.SetAside())
	}
}

// TestBoltNoCreate: with Options.NoCreate a read-write open makes no cache
// of a path that is not one (nothing there, an empty file, a link to one,
// a bbolt database with no buckets or another application's), leaving it
// byte for byte as it was; it opens an existing cache; a damaged cache is
// set aside but not rebuilt.
func TestBoltNoCreate(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	link := filepath.Join(dir, "link.db")
	symlinkOrSkip(t, empty, link)
	fresh := filepath.Join(dir, "fresh.db")
	db, err := bbolt.Open(fresh, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	foreign := filepath.Join(dir, "foreign.db")
	foreignBolt(t, foreign)
	for _, p := range []string{empty, link, fresh, foreign} {
		before, target := statePath(t, p), statePath(t, empty)
		_, err := Open(p, quietBolt(Options{NoCreate: true}))
		if !errors.Is(err, progcache.ErrNotCache) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v; want ErrNotCache naming the path", p, err)
		}
		before.check(t, p)
		target.check(t, empty)
	}
	missing := filepath.Join(dir, "missing.db")
	if _, err := Open(missing, quietBolt(Options{NoCreate: true})); !errors.Is(err, progcache.ErrNotCache) {
		t.Errorf("missing path: %v; want ErrNotCache", err)
	}
	if _, err := os.Lstat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a NoCreate open created %s", missing)
	}

	ours := filepath.Join(dir, "ours.db")
	writeDamageFixture(t, ours, 10)
	c, err := Open(ours, quietBolt(Options{NoCreate: true}))
	if err != nil {
		t.Fatalf("an existing cache: %v", err)
	}
	if n, _ := c.Len(context.Background()); n == 0 {
		t.Error("the existing cache opened empty")
	}
	c.Close()
	os.Truncate(ours, 3*4096)
	_, err = Open(ours, quietBolt(Options{NoCreate: true}))
	if !errors.Is(err, progcache.ErrCorrupt) || !strings.Contains(err.Error(), "set aside") {
		t.Errorf("a damaged cache: %v; want ErrCorrupt saying it was set aside", err)
	}
	if _, err := os.Lstat(ours); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a NoCreate open rebuilt %s", ours)
	}
}
