package bolt

import (
	"context"
	"path/filepath"
	"testing"

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
