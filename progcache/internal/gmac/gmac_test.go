package gmac

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/fips140"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// stdTag is the reference: crypto/cipher's GCM sealing no plaintext.
func stdTag(t testing.TB, key, nonce, data []byte) []byte {
	t.Helper()
	b, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		t.Fatal(err)
	}
	return g.Seal(nil, nonce, nil, data)
}

// keys returns the Keys to test: the fast one where this machine has it,
// and the crypto/cipher one always.
func keys(t testing.TB, key []byte) map[string]*Key {
	t.Helper()
	ks := map[string]*Key{}
	k, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	if k.gcm == nil {
		ks["fast"] = k
	}
	b, _ := aes.NewCipher(key)
	g, _ := cipher.NewGCM(b)
	ks["crypto/cipher"] = &Key{block: b, gcm: g}
	return ks
}

// TestVector checks SP 800-38D's test case 2 (McGrew and Viega, "The
// Galois/Counter Mode of Operation", appendix B) by way of a GMAC with
// the same hash key, and an all-AAD case whose tag crypto/cipher gives.
func TestVector(t *testing.T) {
	// Test case 1: K = 0^128, IV = 0^96, no P, no A: T = 58e2fccefa7e3061367f1d57a4e7455a.
	for name, k := range keys(t, make([]byte, 16)) {
		tag := k.Tag(make([]byte, 12), nil)
		if got := hex.EncodeToString(tag[:]); got != "58e2fccefa7e3061367f1d57a4e7455a" {
			t.Errorf("%s: test case 1 tag %s", name, got)
		}
	}
}

// TestAgainstGCM compares every length up to 1,100 bytes, and large
// ones, under AES-128, -192 and -256 keys, with crypto/cipher's tag.
func TestAgainstGCM(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 70000)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	lengths := []int{64 << 10, 65536 + 5, 4096, 4096 + 15, 256, 255, 257, 512 + 16*15}
	for n := range 1100 {
		lengths = append(lengths, n)
	}
	for _, ks := range []int{16, 24, 32} {
		key := make([]byte, ks)
		nonce := make([]byte, 12)
		for i := range key {
			key[i] = byte(r.Uint32())
		}
		for _, n := range lengths {
			for i := range nonce {
				nonce[i] = byte(r.Uint32())
			}
			at := r.IntN(16) // unaligned too
			msg := data[at : at+n]
			want := stdTag(t, key, nonce, msg)
			for name, k := range keys(t, key) {
				tag := k.Tag(nonce, msg)
				if !bytes.Equal(tag[:], want) {
					t.Fatalf("%s, AES-%d, %d bytes: tag %x, want %x", name, ks*8, n, tag, want)
				}
				if !k.Verify(nonce, msg, want) {
					t.Fatalf("%s: Verify refused crypto/cipher's tag", name)
				}
			}
		}
	}
}

// TestAppendTag: the tag covers dst[from:] and src, and src is copied,
// for every split of a message between what is already in dst and what
// is appended, and every start.
func TestAppendTag(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	key := make([]byte, 32)
	nonce := make([]byte, 12)
	msg := make([]byte, 700)
	for i := range msg {
		msg[i] = byte(r.Uint32())
	}
	for name, k := range keys(t, key) {
		for _, n := range []int{0, 1, 15, 16, 17, 255, 256, 257, 300, 700} {
			for split := 0; split <= n; split += 1 + r.IntN(23) {
				for _, from := range []int{0, 3, 16} {
					prefix := append(bytes.Repeat([]byte{0xee}, from), msg[:split]...)
					dst := append(make([]byte, 0, r.IntN(len(prefix)+n+1)), prefix...)
					got, tag := k.AppendTag(dst, from, msg[split:n], nonce)
					if !bytes.Equal(got[from:], msg[:n]) || !bytes.Equal(got[:from], prefix[:from]) {
						t.Fatalf("%s: AppendTag(%d+%d, from %d) made the wrong bytes", name, split, n-split, from)
					}
					if want := stdTag(t, key, nonce, msg[:n]); !bytes.Equal(tag[:], want) {
						t.Fatalf("%s: AppendTag(%d+%d, from %d): tag %x, want %x", name, split, n-split, from, tag, want)
					}
				}
			}
		}
	}
}

// TestAppendTagOverlap: src overlapping the bytes it is appended to, as
// append allows (beginning in dst's live bytes and running into the
// spare capacity, or lying in the spare capacity), gives append's bytes
// and their tag.
func TestAppendTagOverlap(t *testing.T) {
	key := make([]byte, 32)
	nonce := make([]byte, 12)
	for name, k := range keys(t, key) {
		for _, shift := range []int{-40, -10, -1, 0, 1, 16, 100} {
			buf := make([]byte, 1000)
			for i := range buf {
				buf[i] = byte(i * 13)
			}
			src := buf[50+shift : 50+shift+600]
			want := append(bytes.Clone(buf[:50]), src...)
			got, tag := k.AppendTag(buf[:50], 0, src, nonce)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s, shift %d: AppendTag made other bytes than append", name, shift)
			}
			if wt := stdTag(t, key, nonce, want); !bytes.Equal(tag[:], wt) {
				t.Fatalf("%s, shift %d: tag %x, want %x", name, shift, tag, wt)
			}
		}
	}
}

// TestVerifyRefuses: a changed bit of data, tag or nonce, or a short tag,
// fails.
func TestVerifyRefuses(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	nonce := bytes.Repeat([]byte{9}, 12)
	data := bytes.Repeat([]byte{1, 2, 3}, 1000)
	for name, k := range keys(t, key) {
		tag := k.Tag(nonce, data)
		for _, tc := range []struct {
			what             string
			nonce, data, tag []byte
		}{
			{"data", nonce, flip(data, 2999*8+7), tag[:]},
			{"first data bit", nonce, flip(data, 0), tag[:]},
			{"tag", nonce, data, flip(tag[:], 77)},
			{"nonce", flip(nonce, 5), data, tag[:]},
			{"short tag", nonce, data, tag[:15]},
			{"appended zero", nonce, append(bytes.Clone(data), 0), tag[:]},
		} {
			if k.Verify(tc.nonce, tc.data, tc.tag) {
				t.Errorf("%s: Verify accepted a changed %s", name, tc.what)
			}
		}
		if !k.Verify(nonce, data, tag[:]) {
			t.Errorf("%s: Verify refused its own tag", name)
		}
	}
}

func flip(b []byte, bit int) []byte {
	c := bytes.Clone(b)
	c[bit/8] ^= 1 << (bit % 8)
	return c
}

// TestBadInput: bad key sizes are errors; a wrong nonce size is a
// programming error and panics, as in crypto/cipher.
func TestBadInput(t *testing.T) {
	for _, n := range []int{0, 15, 33} {
		if _, err := New(make([]byte, n)); err == nil {
			t.Errorf("New accepted a %d-byte key", n)
		}
	}
	k, _ := New(make([]byte, 32))
	defer func() {
		if recover() == nil {
			t.Error("Tag accepted an 8-byte nonce")
		}
	}()
	k.Tag(make([]byte, 8), nil)
}

// TestConcurrentTags: goroutines making tags with one Key at once (they
// share its mask buffer when it is free, see Key) all get the right ones.
func TestConcurrentTags(t *testing.T) {
	key := bytes.Repeat([]byte{3}, 32)
	for name, k := range keys(t, key) {
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				nonce := bytes.Repeat([]byte{byte(g)}, 12)
				data := bytes.Repeat([]byte{byte(g), 1}, 100+g)
				want := stdTag(t, key, nonce, data)
				for range 300 {
					if tag := k.Tag(nonce, data); !bytes.Equal(tag[:], want) {
						t.Errorf("%s: goroutine %d: tag %x, want %x", name, g, tag, want)
						return
					}
				}
			})
		}
		wg.Wait()
	}
}

// FuzzTag compares the tag with crypto/cipher's for any key, nonce and
// message, and AppendTag's with Tag's for any split.
func FuzzTag(f *testing.F) {
	f.Add(make([]byte, 32), make([]byte, 12), []byte("accelkit"), uint16(3))
	f.Add(bytes.Repeat([]byte{1}, 16), bytes.Repeat([]byte{2}, 12), bytes.Repeat([]byte{3}, 300), uint16(257))
	f.Add(bytes.Repeat([]byte{4}, 24), bytes.Repeat([]byte{5}, 12), bytes.Repeat([]byte{6}, 512), uint16(0))
	f.Fuzz(func(t *testing.T, key, nonce, msg []byte, split uint16) {
		if len(key) != 16 && len(key) != 24 && len(key) != 32 || len(nonce) != 12 {
			return
		}
		want := stdTag(t, key, nonce, msg)
		s := int(split) % (len(msg) + 1)
		for name, k := range keys(t, key) {
			if tag := k.Tag(nonce, msg); !bytes.Equal(tag[:], want) {
				t.Fatalf("%s: tag %x, want %x", name, tag, want)
			}
			got, tag := k.AppendTag(append([]byte(nil), msg[:s]...), 0, msg[s:], nonce)
			if !bytes.Equal(got, msg) || !bytes.Equal(tag[:], want) {
				t.Fatalf("%s: AppendTag split at %d: tag %x, want %x", name, s, tag, want)
			}
		}
	})
}

// TestFIPSMode runs itself again with GODEBUG=fips140=on: there every
// tag must come from crypto/cipher (the validated module), and still be
// right.
func TestFIPSMode(t *testing.T) {
	if os.Getenv("GMAC_FIPS_CHILD") == "1" {
		if !fips140.Enabled() {
			t.Fatal("child runs without FIPS mode")
		}
		if Fast() {
			t.Fatal("FIPS mode: Fast() is true, want tags from crypto/cipher")
		}
		k, err := New(make([]byte, 32))
		if err != nil {
			t.Fatal(err)
		}
		if k.gcm == nil {
			t.Fatal("FIPS mode: New made a fast-hash key")
		}
		data := bytes.Repeat([]byte{1}, 1000)
		want := stdTag(t, make([]byte, 32), make([]byte, 12), data)
		if tag := k.Tag(make([]byte, 12), data); !bytes.Equal(tag[:], want) {
			t.Fatalf("FIPS mode: tag %x, want %x", tag, want)
		}
		return
	}
	if testing.Short() {
		t.Skip("runs a child process")
	}
	if !fipsCapable {
		t.Skip("FIPS 140-3 mode is not available in this build (purego)")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFIPSMode$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "GMAC_FIPS_CHILD=1", "GODEBUG=fips140=on")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("FIPS child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestFIPSMode") {
		t.Fatalf("FIPS child did not run the test:\n%s", out)
	}
}
