package progcache

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// buildBigBolt writes a cache of n entries of code size each at p,
// batching many puts per transaction so that a 100 MB file builds quickly.
func buildBigBolt(b *testing.B, p string, n, size int) {
	c, err := OpenBolt(p, quietBolt(BoltOptions{NoSync: true}))
	if err != nil {
		b.Fatal(err)
	}
	c.Close()
	db, err := bolt.Open(p, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const batch = 500
	for i := 0; i < n; i += batch {
		err := db.Update(func(tx *bolt.Tx) error {
			eb, at := tx.Bucket(bucketEntries), tx.Bucket(bucketATime)
			for j := i; j < min(n, i+batch); j++ {
				k := testKey(j)
				rec, err := EncodeRecord(k, testObject(j, size), RecordOptions{})
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

// BenchmarkBoltOpenCheck compares, on a 100 MB cache, the check OpenBolt
// runs before bbolt maps a file (checkBoltFile), bbolt's own Tx.Check, and
// a whole OpenBolt (check, map, index) and Close. The file is in the page
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
				db, err := bolt.Open(p, 0, &bolt.Options{ReadOnly: true})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				for b.Loop() {
					db.View(func(tx *bolt.Tx) error {
						for err := range tx.Check() {
							b.Fatal(err)
						}
						return nil
					})
				}
			})
			b.Run("OpenBolt+Close", func(b *testing.B) {
				for b.Loop() {
					c, err := OpenBolt(p, quietBolt(BoltOptions{ReadOnly: true}))
					if err != nil {
						b.Fatal(err)
					}
					c.Close()
				}
			})
		})
	}
}
