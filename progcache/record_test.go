package progcache

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"
)

func sampleObject() Object {
	return Object{
		Kind: "cubin", Name: "k.cu", Code: bytes.Repeat([]byte{0xC0, 0xDE}, 100),
		Symbols:  map[string]string{"k": "_Z1kv", "add<int>": "_Z3addIiEvv"},
		Metadata: map[string]string{"log": "", "arch": "sm_90"},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	key := Key{1, 2, 3}
	for _, tc := range []struct {
		name string
		opt  RecordOptions
	}{
		{"crc32c", RecordOptions{}},
		{"blake2b mac", RecordOptions{MACKey: bytes.Repeat([]byte{7}, 32), Digest: DigestBlake2b256}},
		{"hmac-sha256", RecordOptions{MACKey: bytes.Repeat([]byte{7}, 16), MAC: MACHash}},
		{"hmac-sha256 by digest", RecordOptions{MACKey: bytes.Repeat([]byte{7}, 16), Digest: DigestSHA256}},
		{"gmac default", RecordOptions{MACKey: bytes.Repeat([]byte{7}, 16)}},
		{"gmac", RecordOptions{MACKey: bytes.Repeat([]byte{7}, 64), MAC: MACGMAC}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, obj := range []Object{sampleObject(), {}, {Kind: "ptx", Code: []byte{}}} {
				b, err := EncodeRecord(key, obj, tc.opt)
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(b)) != RecordSize(obj, tc.opt) {
					t.Errorf("len %d != RecordSize %d", len(b), RecordSize(obj, tc.opt))
				}
				k, got, err := DecodeRecord(b, tc.opt)
				if err != nil || k != key || !got.Equal(obj) {
					t.Fatalf("round trip: key %v obj %+v err %v", k, got, err)
				}
				if err := CheckRecordHeader(b[:RecordHeaderSize], tc.opt); err != nil {
					t.Fatalf("CheckRecordHeader: %v", err)
				}
			}
		})
	}
}

func TestRecordRejects(t *testing.T) {
	key := Key{9}
	mac := RecordOptions{MACKey: bytes.Repeat([]byte{1}, 32), MAC: MACHash}
	gmac := RecordOptions{MACKey: bytes.Repeat([]byte{1}, 32)}
	good, _ := EncodeRecord(key, sampleObject(), RecordOptions{})
	goodMAC, _ := EncodeRecord(key, sampleObject(), mac)
	goodGMAC, _ := EncodeRecord(key, sampleObject(), gmac)
	cases := []struct {
		name string
		b    []byte
		opt  RecordOptions
	}{
		{"empty", nil, RecordOptions{}},
		{"truncated", good[:len(good)-1], RecordOptions{}},
		{"half", good[:len(good)/2], RecordOptions{}},
		{"bit flip", mut(good, func(b []byte) { b[60] ^= 0x10 }), RecordOptions{}},
		{"zero fill", make([]byte, len(good)), RecordOptions{}},
		{"wrong magic", mut(good, func(b []byte) { b[0] = 'X' }), RecordOptions{}},
		{"unknown check kind", mut(good, func(b []byte) { b[5] = 9 }), RecordOptions{}},
		{"mac bit flip", mut(goodMAC, func(b []byte) { b[len(b)-40] ^= 1 }), mac},
		{"mac key id on a crc record", mut(good, func(b []byte) { b[6] = 1 }), RecordOptions{}},
		{"gmac code bit flip", mut(goodGMAC, func(b []byte) { b[len(b)-40] ^= 1 }), gmac},
		{"gmac nonce bit flip", mut(goodGMAC, func(b []byte) { b[RecordHeaderSize+5] ^= 1 }), gmac},
		{"gmac stored key bit flip", mut(goodGMAC, func(b []byte) { b[RecordHeaderSize-1] ^= 1 }), gmac},
		{"gmac tag bit flip", mut(goodGMAC, func(b []byte) { b[len(b)-1] ^= 0x80 }), gmac},
		{"gmac truncated", goodGMAC[:len(goodGMAC)-1], gmac},
		{"gmac header and nonce only", goodGMAC[:RecordHeaderSize+gmacNonceSize+gmacTagSize-1], gmac},
		// A version 3 record with a version 2 check kind, and the
		// reverse: damage, not another configuration.
		{"version 3 with an HMAC check kind", mut(goodGMAC, func(b []byte) { b[5] = checkHMACSHA256 }), gmac},
		{"version 2 with the GMAC check kind", mut(goodMAC, func(b []byte) { b[5] = checkGMAC }), mac},
		{"foreign", []byte("#!/bin/sh\necho hello, this is not a cache entry at all\n"), RecordOptions{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeRecord(tc.b, tc.opt)
			if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnreadable) {
				t.Fatalf("DecodeRecord error = %v, want ErrCorrupt only", err)
			}
		})
	}
}

// TestRecordUnreadable: a record another configuration wrote is
// ErrUnreadable, not ErrCorrupt, so caches keep it for the peers that can
// read it.
func TestRecordUnreadable(t *testing.T) {
	key := Key{9}
	mac := RecordOptions{MACKey: bytes.Repeat([]byte{1}, 32), Digest: DigestBlake2b256}
	hmacSHA := RecordOptions{MACKey: bytes.Repeat([]byte{1}, 32), MAC: MACHash}
	gmac := RecordOptions{MACKey: bytes.Repeat([]byte{1}, 32)}
	goodGMAC, _ := EncodeRecord(key, sampleObject(), gmac)
	otherGMAC, _ := EncodeRecord(key, sampleObject(), RecordOptions{MACKey: bytes.Repeat([]byte{2}, 32)})
	good, _ := EncodeRecord(key, sampleObject(), RecordOptions{})
	goodMAC, _ := EncodeRecord(key, sampleObject(), mac)
	otherMAC, _ := EncodeRecord(key, sampleObject(), RecordOptions{MACKey: bytes.Repeat([]byte{2}, 32), Digest: DigestBlake2b256})
	for _, tc := range []struct {
		name, want string
		b          []byte
		opt        RecordOptions
	}{
		{"other record version", "record version 99", mut(good, func(b []byte) { b[4] = 99 }), RecordOptions{}},
		{"unkeyed in keyed cache", "sealed with CRC-32C", good, mac},
		{"keyed in unkeyed cache", "sealed with a blake2b MAC", goodMAC, RecordOptions{}},
		{"blake2b in HMAC-SHA-256 cache", "sealed with a blake2b MAC", goodMAC, hmacSHA},
		{"other MAC key", "another MAC key", otherMAC, mac},
		{"gmac in unkeyed cache", "sealed with an AES-GMAC MAC", goodGMAC, RecordOptions{}},
		{"blake2b in default (gmac) cache", "sealed with a blake2b MAC", goodMAC, gmac},
		{"unkeyed in gmac cache", "sealed with CRC-32C", good, gmac},
		{"gmac under another MAC key", "another MAC key", otherGMAC, gmac},
		{"gmac under another MAC key, hmac cache", "another MAC key", otherGMAC, hmacSHA},
		{"a later record version", "record version 4", mut(goodGMAC, func(b []byte) { b[4] = 4 }), gmac},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeRecord(tc.b, tc.opt)
			if !errors.Is(err, ErrUnreadable) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeRecord error = %v, want ErrUnreadable only", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func mut(b []byte, f func([]byte)) []byte {
	b = bytes.Clone(b)
	f(b)
	return b
}

func TestRecordBounds(t *testing.T) {
	if _, err := EncodeRecord(Key{}, Object{Kind: string(make([]byte, MaxKindLen+1))}, RecordOptions{}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("long kind: %v", err)
	}
	if _, err := EncodeRecord(Key{}, Object{}, RecordOptions{MACKey: []byte("short")}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("short MAC key: %v", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	// The options a record is decoded under: CRC-32C, then caches keyed
	// with one MAC key sealing AES-GMAC (the default, which also reads
	// HMAC-SHA-256), HMAC-SHA-256 and keyed blake2b-256.
	macKey := bytes.Repeat([]byte{3}, 32)
	opts := []RecordOptions{{}, {MACKey: macKey}, {MACKey: macKey, MAC: MACHash}, {MACKey: macKey, Digest: DigestBlake2b256}}
	good, _ := EncodeRecord(Key{1}, sampleObject(), RecordOptions{})
	f.Add(good, uint8(0))
	f.Add(good[:40], uint8(0))
	f.Add([]byte("AKPC\x02\x01"), uint8(0))
	f.Add([]byte("AKPC\x03\x04"), uint8(1))
	f.Add([]byte{}, uint8(1))
	for i, opt := range opts[1:] {
		rec, _ := EncodeRecord(Key{2}, sampleObject(), opt)
		f.Add(rec, uint8(i+1))
		f.Add(rec, uint8(0))
		empty, _ := EncodeRecord(Key{3}, Object{}, opt)
		f.Add(empty, uint8(1))
		f.Add(empty[:len(empty)-1], uint8(i+1))
	}
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		opt := opts[int(which)%len(opts)]
		k, obj, err := DecodeRecord(b, opt)
		vk, v, verr := ViewRecord(b, opt)
		if (err == nil) != (verr == nil) {
			t.Fatalf("DecodeRecord error %v, ViewRecord error %v: they must agree", err, verr)
		}
		// The backend kit: without the sum, a record still never panics,
		// and one that verifies parses the same; its header checks alone.
		uk, uv, uerr := ViewVerifiedRecord(b, opt)
		if err == nil {
			if uerr != nil || uk != k || !uv.ObjectSharingCode().Equal(obj) {
				t.Fatalf("ViewVerifiedRecord of a verified record = %v; want ViewRecord's key and object", uerr)
			}
			if herr := CheckRecordHeader(b[:RecordHeaderSize], opt); herr != nil {
				t.Fatalf("CheckRecordHeader of a verified record = %v", herr)
			}
		}
		if err != nil {
			if errors.Is(err, ErrCorrupt) == errors.Is(err, ErrUnreadable) {
				t.Fatalf("error %v wraps neither or both of ErrCorrupt and ErrUnreadable", err)
			}
			return
		}
		// The lazy view shows what the decoder built.
		if vk != k || !v.Object().Equal(obj) || v.Kind() != obj.Kind || !bytes.Equal(v.Code(), obj.Code) {
			t.Fatal("ViewRecord's view differs from DecodeRecord's object")
		}
		for name, want := range obj.Symbols {
			if got, ok := v.Symbol(name); !ok || got != want {
				t.Fatalf("view.Symbol(%q) = %q, %v; want %q", name, got, ok, want)
			}
		}
		for name, want := range obj.Metadata {
			if got, ok := v.Metadata(name); !ok || got != want {
				t.Fatalf("view.Metadata(%q) = %q, %v; want %q", name, got, ok, want)
			}
		}
		// Whatever decodes must re-encode to a record that decodes equal.
		b2, err := EncodeRecord(k, obj, opt)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		k2, obj2, err := DecodeRecord(b2, opt)
		if err != nil || k2 != k || !obj2.Equal(obj) {
			t.Fatalf("re-decode mismatch: %v", err)
		}
	})
}

func FuzzRecordRoundTrip(f *testing.F) {
	f.Add([]byte{1}, "cubin", "k", []byte("code"), "sym", "mangled")
	f.Add([]byte{}, "", "", []byte{}, "", "")
	f.Fuzz(func(t *testing.T, kb []byte, kind, name string, code []byte, sk, sv string) {
		var k Key
		copy(k[:], kb)
		obj := Object{Kind: kind, Name: name, Code: code, Symbols: map[string]string{sk: sv}, Metadata: map[string]string{sv: sk}}
		b, err := EncodeRecord(k, obj, RecordOptions{})
		if err != nil {
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("encode error %v", err)
			}
			return
		}
		k2, got, err := DecodeRecord(b, RecordOptions{})
		if err != nil || k2 != k || !got.Equal(obj) {
			t.Fatalf("round trip failed: %v", err)
		}
	})
}

// TestRecordMapOrder: map names must be strictly increasing, as
// EncodeRecord writes them; that is also how a repeated name is caught
// without building a map.
func TestRecordMapOrder(t *testing.T) {
	obj := Object{Kind: "cubin", Symbols: map[string]string{"a": "1", "b": "2"}}
	good, err := EncodeRecord(Key{1}, obj, RecordOptions{})
	if err != nil {
		t.Fatal(err)
	}
	entryA := []byte("\x01\x00a\x01\x00\x00\x001")
	entryB := []byte("\x01\x00b\x01\x00\x00\x002")
	at := bytes.Index(good, append(append([]byte{}, entryA...), entryB...))
	if at < 0 {
		t.Fatal("symbol entries not found in the record")
	}
	reseal := func(b []byte) []byte {
		body := b[:len(b)-4]
		return binary.LittleEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, castagnoli))
	}
	swapped := bytes.Clone(good)
	copy(swapped[at:], entryB)
	copy(swapped[at+8:], entryA)
	repeated := bytes.Clone(good)
	copy(repeated[at+8:], entryA)
	for name, b := range map[string][]byte{"out of order": reseal(swapped), "repeated": reseal(repeated)} {
		if _, _, err := DecodeRecord(b, RecordOptions{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s names: DecodeRecord error = %v, want ErrCorrupt saying %q", name, err, name)
		}
	}
}

// TestRecordGolden pins the bytes of records of each check kind (their
// SHA-256), so that a change to the encoder cannot change the format
// unnoticed: records written by other versions must stay readable, and
// a record is a pure function of (key, object, options).
func TestRecordGolden(t *testing.T) {
	big := sampleObject()
	big.Code = bytes.Repeat([]byte("0123456789abcdef"), 5000) // several sumChunks
	key := bytes.Repeat([]byte{7}, 32)
	for _, tc := range []struct {
		name string
		obj  Object
		opt  RecordOptions
		size int
		sum  string
	}{
		{"crc32c sample", sampleObject(), RecordOptions{}, 340, "f22c046fbf1d4d1316850ae04b97f0045502514e236b68b84619550ce1481ebc"},
		{"crc32c empty", Object{}, RecordOptions{}, 70, "f3f178819ca0f91fa18d471f3e7ce29cd7391a174eb8c48390dc5ddb9a488ab9"},
		{"crc32c 80000-byte code", big, RecordOptions{}, 80140, "00259f438f996c05cdd6ec8ab5a2c2f7dbd29a9cf5d031ffc9e2b635ee1adc27"},
		{"hmac-sha256 sample", sampleObject(), RecordOptions{MACKey: key, MAC: MACHash}, 368, "4b1d3a5e15ad9c8d374df26844a597b310b63d68a87b8c6ac8901653e1fd2b23"},
		{"hmac-sha256 empty", Object{}, RecordOptions{MACKey: key, MAC: MACHash}, 98, "b66783bd1341a4599d9c127a72bee76e467709c7f7fc5a210ce7f005a06e0fc3"},
		{"hmac-sha256 80000-byte code", big, RecordOptions{MACKey: key, Digest: DigestSHA256}, 80168, "2a2a5feba1e391791e237f6796e59a9e021f9a9e7b584bee062059f4f074145f"},
		// Nonces pinned (fixedNonces): 0, 1, 2, ... in the nonce's bytes.
		{"gmac sample", sampleObject(), RecordOptions{MACKey: key}, 376, "bf3ad1ef7fc2c2f7846e00f2dc15f32292004ef562ed65e32ef54cfd49879c4b"},
		{"gmac empty", Object{}, RecordOptions{MACKey: key}, 106, "9fefac6ff8037090567c4d8e4b8fa43e5f8e977313f8e6dda34b1cd79f2f778e"},
		{"gmac 80000-byte code", big, RecordOptions{MACKey: key, MAC: MACGMAC}, 80176, "23c25cc44a0f840d856db4e4fa4726d51b730c5e3bc032724e1c7f937e9f6194"},
		{"blake2b sample", sampleObject(), RecordOptions{MACKey: key, Digest: DigestBlake2b256}, 368, "2f102a4f1c7cc42f00102037aa3846a97e93f22831079db0530f4f300ef635df"},
		{"blake2b empty", Object{}, RecordOptions{MACKey: key, Digest: DigestBlake2b256}, 98, "af55c9741212f0fd639317f57a42cd3d62dd2c8a124d327b2b014bfdcb994558"},
		{"blake2b 80000-byte code", big, RecordOptions{MACKey: key, Digest: DigestBlake2b256}, 80168, "5e740e5d55fdf397b87d9ea5dfb3d16432bde9878fbdc9643cc73eea9888a17d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fixedNonces(t)
			b, err := EncodeRecord(Key{1, 2, 3}, tc.obj, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(b); len(b) != tc.size || hex.EncodeToString(sum[:]) != tc.sum {
				t.Errorf("record of %d bytes with SHA-256 %x; want %d bytes with %s", len(b), sum, tc.size, tc.sum)
			}
		})
	}
}

// TestAppendRecord: AppendRecord appends exactly EncodeRecord's bytes
// after what dst holds, leaves that prefix alone, reuses dst's capacity
// when it is enough, and returns dst unchanged on bad input.
func TestAppendRecord(t *testing.T) {
	key := Key{4, 5, 6}
	prefix := []byte("prefix")
	fixedNonces(t)
	for _, opt := range []RecordOptions{
		{},
		{MACKey: bytes.Repeat([]byte{7}, 32)},
		{MACKey: bytes.Repeat([]byte{7}, 32), MAC: MACHash},
		{MACKey: bytes.Repeat([]byte{7}, 32), Digest: DigestBlake2b256},
	} {
		// Code lengths around the chunk size that the check is fed in.
		for _, n := range []int{0, 1, sumChunk - 1, sumChunk, sumChunk + 1, 3*sumChunk + 5} {
			t.Run(fmt.Sprintf("%s/%d", checkName(opt.check()), n), func(t *testing.T) {
				obj := sampleObject()
				obj.Code = make([]byte, n)
				for i := range obj.Code {
					obj.Code[i] = byte(i * 7)
				}
				restart := fixedNonces(t)
				want, err := EncodeRecord(key, obj, opt)
				if err != nil {
					t.Fatal(err)
				}
				restart()
				got, err := AppendRecord(bytes.Clone(prefix), key, obj, opt)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
					t.Fatal("AppendRecord did not append EncodeRecord's bytes after the prefix")
				}
				// Into a buffer that is big enough: the same bytes, in it.
				buf := make([]byte, 0, len(want)+10)
				restart()
				got, err = AppendRecord(buf, key, obj, opt)
				if err != nil || !bytes.Equal(got, want) || &got[:1][0] != &buf[:1][0] {
					t.Fatalf("AppendRecord into a big enough buffer: err %v, equal %v, same array %v", err, bytes.Equal(got, want), &got[:1][0] == &buf[:1][0])
				}
				if _, _, err := DecodeRecord(got, opt); err != nil {
					t.Fatalf("the appended record does not decode: %v", err)
				}
			})
		}
	}
	for name, tc := range map[string]struct {
		obj  Object
		opt  RecordOptions
		want error
	}{
		"long kind":     {Object{Kind: strings.Repeat("k", MaxKindLen+1)}, RecordOptions{}, ErrInvalidInput},
		"short MAC key": {Object{}, RecordOptions{MACKey: []byte("short")}, ErrInvalidConfig},
	} {
		got, err := AppendRecord(prefix, key, tc.obj, tc.opt)
		if !errors.Is(err, tc.want) || !bytes.Equal(got, prefix) {
			t.Errorf("%s: AppendRecord = %q, %v; want the prefix back and an error wrapping %v", name, got, err, tc.want)
		}
	}
}

// BenchmarkAppendRecord times AppendRecord into a reused buffer and
// EncodeRecord (a fresh record each time) beside the baseline, in the
// same loop: the record's check alone (CRC-32C, HMAC-SHA-256 with a
// fresh keyed hash, or AES-GMAC with its per-record key) over the same
// record bytes, the one pass over the
// code that a record cannot do without. append-better-than-check-x and
// encode-better-than-check-x (the check's time over the side's) show what
// the copy of the code, the header and, for EncodeRecord, the allocation
// cost beyond it: at most 1, except for AES-GMAC where internal/gmac
// copies the code as it hashes it.
func BenchmarkAppendRecord(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10, 1 << 20} {
		for _, opt := range []RecordOptions{{}, {MACKey: bytes.Repeat([]byte{7}, 32), MAC: MACHash}, {MACKey: bytes.Repeat([]byte{7}, 32)}} {
			name := map[byte]string{checkCRC32C: "crc", checkHMACSHA256: "hmac", checkGMAC: "gmac"}[opt.check()]
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, name), func(b *testing.B) {
				obj := sampleObject()
				obj.Code = bytes.Repeat([]byte{0xC0, 0xDE}, size/2)
				rec, err := EncodeRecord(Key{1}, obj, opt)
				if err != nil {
					b.Fatal(err)
				}
				buf := make([]byte, 0, len(rec))
				sides := []struct {
					name string
					run  func()
					took time.Duration
				}{
					{name: "append", run: func() { buf, _ = AppendRecord(buf[:0], Key{1}, obj, opt) }},
					{name: "encode", run: func() { _, _ = EncodeRecord(Key{1}, obj, opt) }},
					{name: "check", run: func() {
						switch opt.check() {
						case checkHMACSHA256:
							h := hmac.New(sha256.New, opt.MACKey)
							h.Write(rec)
							h.Sum(nil)
						case checkGMAC:
							// The key derivation and the hash.
							k, n := gmacKeyOf(opt.MACKey).derive(rec[RecordHeaderSize : RecordHeaderSize+gmacNonceSize])
							k.Tag(n, rec)
						default:
							crc32.Checksum(rec, castagnoli)
						}
					}},
				}
				b.SetBytes(int64(len(rec)))
				for b.Loop() {
					for i := range sides {
						t0 := time.Now()
						sides[i].run()
						sides[i].took += time.Since(t0)
					}
				}
				check := sides[len(sides)-1].took
				for _, side := range sides {
					b.ReportMetric(float64(side.took.Nanoseconds())/float64(b.N), side.name+"-ns/op")
					if side.name != "check" {
						b.ReportMetric(float64(check)/float64(side.took), side.name+"-better-than-check-x")
					}
				}
			})
		}
	}
}
