//go:build unix

package filestream

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

// TestFileStreamSealedMemory: a MAC-sealed cache reads a file that only
// this user can write without computing its MAC again while its identity
// holds, as a checksummed cache does (issue 41: a sealed read was 2.2x a
// checksummed one); a file its group or others may write is verified on
// every read; and a rewrite in place is found either way.
func TestFileStreamSealedMemory(t *testing.T) {
	ctx := context.Background()
	key := bytes.Repeat([]byte{1}, 32)
	for _, rec := range []progcache.RecordOptions{{MACKey: key}, {MACKey: key, MAC: progcache.MACHash}} {
		t.Run(rec.MAC.String(), func(t *testing.T) {
			c := openFS(t, t.TempDir(), Options{Record: rec})
			c.verified.window = 0
			var sums int
			c.hooks.checksummed = func(progcache.Key) { sums++ }
			k, obj := testKey(3), testObject(3, 4096)
			if err := c.Put(ctx, k, obj); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(c.path(k)); err != nil || fi.Mode().Perm()&0o022 != 0 {
				t.Fatalf("entry file mode %v (%v): want no group or other write", fi.Mode(), err)
			}
			for range 3 {
				getAndView(t, c, k, obj)
			}
			if sums != 1 || !c.verified.verified(k, statEntry(t, c, k)) {
				t.Fatalf("3 reads of a file only this user can write computed %d MACs, remembered %v; want 1 and remembered", sums, c.verified.verified(k, statEntry(t, c, k)))
			}

			// Group-writable: its owner's group could rewrite it through a
			// shared mapping without moving the ctime. Every read verifies.
			time.Sleep(20 * time.Millisecond) // past coarse timestamp ticks
			if err := os.Chmod(c.path(k), 0o664); err != nil {
				t.Fatal(err)
			}
			sums = 0
			for range 3 {
				getAndView(t, c, k, obj)
			}
			if sums != 6 || c.verified.verified(k, statEntry(t, c, k)) {
				t.Fatalf("6 reads of a group-writable sealed file computed %d MACs, remembered %v; want 6, not remembered", sums, c.verified.verified(k, statEntry(t, c, k)))
			}

			// Back to owner-only and remembered; then rewritten in place:
			// the ctime moved, so the MAC is computed and the damage found.
			if err := os.Chmod(c.path(k), 0o644); err != nil {
				t.Fatal(err)
			}
			getAndView(t, c, k, obj)
			time.Sleep(20 * time.Millisecond)
			f, err := os.OpenFile(c.path(k), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte{0xFF, 0xFF}, 3000); err != nil {
				t.Fatal(err)
			}
			f.Close()
			before := c.Stats().Corrupt
			if _, ok, err := c.Get(ctx, k); ok || err != nil {
				t.Fatalf("Get of a sealed file rewritten in place = hit %v, err %v; want a miss", ok, err)
			}
			if c.Stats().Corrupt != before+1 {
				t.Errorf("Stats.Corrupt = %d, want %d", c.Stats().Corrupt, before+1)
			}
		})
	}
}

// TestOwnedAlone: the rule for which sealed files are remembered.
func TestOwnedAlone(t *testing.T) {
	for _, tc := range []struct {
		st   fileStat
		want bool
	}{
		{fileStat{uid: euid, mode: 0o644}, true},
		{fileStat{uid: euid, mode: 0o600}, true},
		{fileStat{uid: euid, mode: 0o664}, false},
		{fileStat{uid: euid, mode: 0o646}, false},
		{fileStat{uid: euid + 1, mode: 0o644}, false},
	} {
		if got := tc.st.ownedAlone(); got != tc.want {
			t.Errorf("uid %d (this process %d), mode %v: ownedAlone = %v, want %v", tc.st.uid, euid, tc.st.mode, got, tc.want)
		}
	}
}
