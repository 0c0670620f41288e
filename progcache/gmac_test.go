package progcache

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
)

// fixedNonces makes the records t seals carry the nonces 0, 1, 2, ...
// (little-endian in the nonce's first bytes) instead of random ones, so
// that their bytes can be pinned; the returned func starts the sequence
// over. Not for parallel tests.
func fixedNonces(t testing.TB) (restart func()) {
	old := readNonce
	var n uint64
	readNonce = func(p []byte) {
		clear(p)
		binary.LittleEndian.PutUint64(p, n)
		n++
	}
	t.Cleanup(func() { readNonce = old })
	return func() { n = 0 }
}

// TestXAESVectors checks the record's AES-GMAC construction, the key
// derivation of XAES-256-GCM, against C2SP's test vectors
// (https://c2sp.org/XAES-256-GCM, which Go's FIPS module tests too): the
// same derived key and GCM sealing a plaintext give the published
// ciphertexts.
func TestXAESVectors(t *testing.T) {
	for _, tc := range []struct {
		key       byte
		aad, want string
	}{
		{0x01, "", "ce546ef63c9cc60765923609b33a9a1974e96e52daf2fcf7075e2271"},
		{0x03, "c2sp.org/XAES-256-GCM", "986ec1832593df5443a179437fd083bf3fdb41abd740a21f71eb769d"},
	} {
		block, err := aes.NewCipher(bytes.Repeat([]byte{tc.key}, 32))
		if err != nil {
			t.Fatal(err)
		}
		g := gmacKey{block: block}
		var l [aes.BlockSize]byte
		block.Encrypt(l[:], l[:])
		g.k1 = cmacDouble(l)
		nonce := []byte("ABCDEFGHIJKLMNOPQRSTUVWX")
		key := g.deriveKey(nonce)
		kb, _ := aes.NewCipher(key[:])
		a, _ := cipher.NewGCM(kb)
		n := nonce[12:]
		var aad []byte
		if tc.aad != "" {
			aad = []byte(tc.aad)
		}
		if got := hex.EncodeToString(a.Seal(nil, n, []byte("XAES-256-GCM"), aad)); got != tc.want {
			t.Errorf("key %#x: XAES-256-GCM ciphertext %s, want %s", tc.key, got, tc.want)
		}
	}
}

// TestGMACNonces: every record gets a fresh nonce, so two records of the
// same object differ, and both verify.
func TestGMACNonces(t *testing.T) {
	opt := RecordOptions{MACKey: bytes.Repeat([]byte{5}, 32)}
	seen := map[string]bool{}
	for range 100 {
		b, err := EncodeRecord(Key{1}, sampleObject(), opt)
		if err != nil {
			t.Fatal(err)
		}
		if b[4] != gmacRecordVersion || b[5] != checkGMAC {
			t.Fatalf("default keyed record has version %d, check kind %d; want %d, %d", b[4], b[5], gmacRecordVersion, checkGMAC)
		}
		n := string(b[RecordHeaderSize : RecordHeaderSize+gmacNonceSize])
		if seen[n] {
			t.Fatalf("nonce %x repeated", n)
		}
		seen[n] = true
		if _, _, err := DecodeRecord(b, opt); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecordOldKinds: a cache opened with the default options (AES-GMAC)
// reads the records of every kind it read before under its key, each
// checked with the MAC its header names, and counts the others
// unreadable; none is misread or taken for damage. A blake2b cache reads
// GMAC and HMAC records too.
func TestRecordOldKinds(t *testing.T) {
	key := bytes.Repeat([]byte{9}, 32)
	obj := sampleObject()
	kinds := map[string]RecordOptions{
		"crc32c":      {},
		"hmac-sha256": {MACKey: key, MAC: MACHash},
		"blake2b":     {MACKey: key, Digest: DigestBlake2b256},
		"gmac":        {MACKey: key},
	}
	readers := map[string]RecordOptions{
		"default": {MACKey: key},
		"gmac":    {MACKey: key, MAC: MACGMAC},
		"hmac":    {MACKey: key, MAC: MACHash},
		"blake2b": {MACKey: key, Digest: DigestBlake2b256},
		"crc32c":  {},
	}
	readable := map[[2]string]bool{
		{"default", "hmac-sha256"}: true, {"default", "gmac"}: true,
		{"gmac", "hmac-sha256"}: true, {"gmac", "gmac"}: true,
		{"hmac", "hmac-sha256"}: true, {"hmac", "gmac"}: true,
		{"blake2b", "hmac-sha256"}: true, {"blake2b", "gmac"}: true, {"blake2b", "blake2b"}: true,
		{"crc32c", "crc32c"}: true,
	}
	for kn, ko := range kinds {
		rec, err := EncodeRecord(Key{7}, obj, ko)
		if err != nil {
			t.Fatal(err)
		}
		for rn, ro := range readers {
			_, got, err := DecodeRecord(rec, ro)
			herr := CheckRecordHeader(rec[:RecordHeaderSize], ro)
			if readable[[2]string{rn, kn}] {
				if err != nil || herr != nil || !got.Equal(obj) {
					t.Errorf("%s cache, %s record: %v, header %v; want it read", rn, kn, err, herr)
				}
				// Damage is damage, whichever MAC the record names.
				if _, _, err := DecodeRecord(mut(rec, func(b []byte) { b[len(b)-20] ^= 4 }), ro); !errors.Is(err, ErrCorrupt) {
					t.Errorf("%s cache, damaged %s record: %v; want ErrCorrupt", rn, kn, err)
				}
				continue
			}
			if !errors.Is(err, ErrUnreadable) || errors.Is(err, ErrCorrupt) || !errors.Is(herr, ErrUnreadable) {
				t.Errorf("%s cache, %s record: %v, header %v; want ErrUnreadable only", rn, kn, err, herr)
			}
		}
	}
}

// TestRecordOptionsMAC: the MAC field's values and conflicts.
func TestRecordOptionsMAC(t *testing.T) {
	key := bytes.Repeat([]byte{1}, 16)
	for _, tc := range []struct {
		opt  RecordOptions
		want byte // 0: invalid
	}{
		{RecordOptions{MACKey: key}, checkGMAC},
		{RecordOptions{MACKey: key, MAC: MACGMAC}, checkGMAC},
		{RecordOptions{MACKey: key, MAC: MACHash}, checkHMACSHA256},
		{RecordOptions{MACKey: key, Digest: DigestSHA256}, checkHMACSHA256},
		{RecordOptions{MACKey: key, Digest: DigestBlake2b256}, checkBlake2bMAC},
		{RecordOptions{MACKey: key, MAC: MACHash, Digest: DigestBlake2b256}, checkBlake2bMAC},
		{RecordOptions{}, checkCRC32C},
		{RecordOptions{MACKey: key, MAC: MACGMAC, Digest: DigestSHA256}, 0},
		{RecordOptions{MACKey: key, MAC: 3}, 0},
	} {
		err := tc.opt.Validate()
		if tc.want == 0 {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("%+v: Validate = %v, want ErrInvalidConfig", tc.opt, err)
			}
			continue
		}
		if err != nil || tc.opt.check() != tc.want {
			t.Errorf("%+v: Validate = %v, seals with %s; want %s", tc.opt, err, checkName(tc.opt.check()), checkName(tc.want))
		}
	}
}

// TestGMACKeysConcurrent: goroutines sealing and opening records under
// more MAC keys than macKeys keeps (so it is started over meanwhile)
// all read back what they wrote; run under -race.
func TestGMACKeysConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				key := bytes.Repeat([]byte{byte(g*50 + i%(maxMACKeys+3))}, 32)
				opt := RecordOptions{MACKey: key}
				obj := sampleObject()
				b, err := EncodeRecord(Key{byte(g), byte(i)}, obj, opt)
				if err != nil {
					t.Error(err)
					return
				}
				if k, got, err := DecodeRecord(b, opt); err != nil || k != (Key{byte(g), byte(i)}) || !got.Equal(obj) {
					t.Errorf("goroutine %d record %d: %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if m := macKeys.Load(); m == nil || len(*m) > maxMACKeys {
		t.Errorf("macKeys holds %v keys, want 1 to %d", m, maxMACKeys)
	}
}

// TestGMACReadAgain: verifying a record whose nonce was verified before
// reuses the derived GMAC key (no allocation, no key schedule), and a reused
// key still refuses the record once one byte of it changed, and refuses a
// record with the same nonce prefix sealed under another key's id.
func TestGMACReadAgain(t *testing.T) {
	opt := RecordOptions{MACKey: bytes.Repeat([]byte{0x42}, 32)}
	b, err := EncodeRecord(Key{7}, sampleObject(), opt)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ViewRecord(b, opt); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() {
		if _, _, err := ViewRecord(b, opt); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ViewRecord of a record verified before allocates %v times, want 0 (the derived key reused)", n)
	}
	for _, at := range []int{RecordHeaderSize + 5, RecordHeaderSize + gmacNonceSize + 3, len(b) - 40, len(b) - 1} {
		bad := bytes.Clone(b)
		bad[at] ^= 1
		if _, _, err := ViewRecord(bad, opt); !errors.Is(err, ErrCorrupt) {
			t.Errorf("record with byte %d flipped, read after the original: err %v, want ErrCorrupt", at, err)
		}
		if _, _, err := ViewRecord(b, opt); err != nil {
			t.Errorf("the original after the copy with byte %d flipped: %v", at, err)
		}
	}
	// The same nonce under another MAC key: that key's own derivation
	// (each gmacKey has its own cache), so the tag does not match.
	other := RecordOptions{MACKey: bytes.Repeat([]byte{0x43}, 32)}
	forged := bytes.Clone(b)
	id := gmacKeyOf(other.MACKey).id
	copy(forged[6:], id[:])
	if _, _, err := ViewRecord(forged, other); !errors.Is(err, ErrCorrupt) {
		t.Errorf("record re-labelled with another key's id: err %v, want ErrCorrupt", err)
	}
}
