package bolt

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/accelkit/accelkit/progcache"
	bbolt "go.etcd.io/bbolt"
)

// buildBigBolt writes a cache of n entries of code size each at p,
// batching many puts per transaction so that a 100 MB file builds quickly.
func buildBigBolt(b *testing.B, p string, n, size int) {
	c, err := Open(p, quietBolt(Options{NoSync: true}))
	if err != nil {
		b.Fatal(err)
	}
	c.Close()
	db, err := bbolt.Open(p, 0o600, &bbolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const batch = 500
	for i := 0; i < n; i += batch {
		err := db.Update(func(tx *bbolt.Tx) error {
			eb, at := tx.Bucket(bucketEntries), tx.Bucket(bucketATime)
			for j := i; j < min(n, i+batch); j++ {
				k := testKey(j)
				rec, err := progcache.EncodeRecord(k, testObject(j, size), progcache.RecordOptions{})
				if err != nil {
					return err
				}
				if err := eb.Put(k[:], rec); err != nil {
					return err
				}
				if err := at.Put(k[:], binary.LittleEndian.AppendUint64(nil, uint64(j))); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBoltOpenCheck compares, on a 100 MB cache, the check Open
// runs before bbolt maps a file (checkBoltFile), bbolt's own Tx.Check, and
// a whole Open (check, map, index) and Close. The file is in the page
// cache: the figures are CPU and syscall cost, not disk reads.
func BenchmarkBoltOpenCheck(b *testing.B) {
	for _, tc := range []struct {
		name    string
		n, size int
	}{
		{"64KiB-entries", 1600, 64 << 10},
		{"1KiB-entries", 100_000, 1 << 10},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := filepath.Join(b.TempDir(), "big.db")
			buildBigBolt(b, p, tc.n, tc.size)
			fi, _ := os.Stat(p)
			b.Logf("%d entries, file %d bytes", tc.n, fi.Size())
			b.Run("checkBoltFile", func(b *testing.B) {
				f, err := os.Open(p)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				for b.Loop() {
					if chk := checkBoltFile(f, fi.Size()); chk.verdict != boltUsable {
						b.Fatal(chk.reason)
					}
				}
			})
			b.Run("bbolt-Tx.Check", func(b *testing.B) {
				db, err := bbolt.Open(p, 0, &bbolt.Options{ReadOnly: true})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				for b.Loop() {
					db.View(func(tx *bbolt.Tx) error {
						for err := range tx.Check() {
							b.Fatal(err)
						}
						return nil
					})
				}
			})
			b.Run("Open+Close", func(b *testing.B) {
				for b.Loop() {
					c, err := Open(p, quietBolt(Options{ReadOnly: true}))
					if err != nil {
						b.Fatal(err)
					}
					c.Close()
				}
			})
		})
	}
}
