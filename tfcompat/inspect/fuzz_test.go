package inspect

import (
	"encoding/binary"
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func FuzzCleanString(f *testing.F) {
	for _, s := range []string{"", "MY_DEVICE", "fake\x1b[2J", "a\\b", "\xff\xfe", "line\nnext\ttab", "\u202egnp.exe", "日本"} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, multiline bool) {
		s := cleanString(b, multiline)
		if !utf8.ValidString(s) {
			t.Fatalf("cleanString(%q) = %q: invalid UTF-8", b, s)
		}
		for _, r := range s {
			if multiline && (r == '\n' || r == '\t') {
				continue
			}
			if !unicode.IsGraphic(r) {
				t.Fatalf("cleanString(%q) = %q holds %U", b, s, r)
			}
		}
		plain := true
		for _, c := range b {
			plain = plain && c >= 0x20 && c < 0x7f && c != '\\'
		}
		if plain && s != string(b) {
			t.Fatalf("printable ASCII %q changed to %q", b, s)
		}
	})
}

var deviceTypeRE = regexp.MustCompile(`^[A-Z][A-Z_]*$`)

func FuzzValidDeviceType(f *testing.F) {
	for _, s := range []string{"GPU", "MY_DEVICE", "_GPU", "gpu", "", "A", "XPU1", "MY DEVICE"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validDeviceType(b), deviceTypeRE.Match(b); got != want {
			t.Fatalf("validDeviceType(%q) = %v, want %v", b, got, want)
		}
	})
}

// fakeMemory is a plugin's memory for the decoders: one region at base.
type fakeMemory struct {
	base uintptr
	data []byte
}

func (m fakeMemory) read(addr uintptr, n int) ([]byte, error) {
	if addr < m.base || n < 0 || addr-m.base > uintptr(len(m.data)) || uintptr(n) > uintptr(len(m.data))-(addr-m.base) {
		return nil, errors.New("unmapped")
	}
	off := addr - m.base
	return m.data[off : off+uintptr(n)], nil
}

// namedValues lays out PJRT_NamedValue records at base followed by their
// strings, as a plugin would.
func namedValues(base uintptr, recs [][3]uint64, strs string) []byte {
	out := make([]byte, len(recs)*pjrtNamedValueSize)
	for i, r := range recs {
		b := out[i*pjrtNamedValueSize:]
		binary.LittleEndian.PutUint64(b, pjrtNamedValueSize)
		binary.LittleEndian.PutUint64(b[pjrtNamedValueNameOff:], uint64(base)+uint64(len(out))+r[0])
		binary.LittleEndian.PutUint64(b[pjrtNamedValueNameLen:], r[1])
		binary.LittleEndian.PutUint32(b[pjrtNamedValueTypeOff:], uint32(r[2]))
		binary.LittleEndian.PutUint64(b[pjrtNamedValueUnionOff:], uint64(base)+uint64(len(out)))
		binary.LittleEndian.PutUint64(b[pjrtNamedValueValLenOff:], r[1])
	}
	return append(out, strs...)
}

func TestDecodeAttributes(t *testing.T) {
	const base = 0x10000
	mem := fakeMemory{base, namedValues(base, [][3]uint64{{0, 4, namedString}, {0, 2, namedInt64}}, "gpu\n")}
	got, err := decodeAttributes(mem.read, base, 2)
	if err != nil || len(got) != 2 || got[0] != (Attribute{`gpu\u000a`, "string", `gpu\u000a`}) || got[1].Type != "int64" {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, tt := range []struct {
		arr  uintptr
		num  uint64
		want string
	}{
		{0, 1, "attributes is NULL"},
		{base, maxAttributes + 1, "exceeds"},
		{base + 1000, 1, "unmapped"},
	} {
		if _, err := decodeAttributes(mem.read, tt.arr, tt.num); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("decodeAttributes(%#x, %d) = %v, want %q", tt.arr, tt.num, err, tt.want)
		}
	}
	bad := namedValues(base, [][3]uint64{{0, 4, 9}}, "name")
	if _, err := decodeAttributes(fakeMemory{base, bad}.read, base, 1); err == nil || !strings.Contains(err.Error(), "unknown PJRT_NamedValue_Type 9") {
		t.Errorf("unknown type: %v", err)
	}
	binary.LittleEndian.PutUint64(bad, 24) // an older or wrong struct_size
	if _, err := decodeAttributes(fakeMemory{base, bad}.read, base, 1); err == nil || !strings.Contains(err.Error(), "PJRT_NamedValue struct_size 24 < 56") {
		t.Errorf("short struct_size: %v", err)
	}
}

// FuzzDecodeAttributes hands the decoder arbitrary plugin memory: it must
// not panic, must not read outside what the reader allows, and every
// string it returns must be printable.
func FuzzDecodeAttributes(f *testing.F) {
	const base = 0x10000
	f.Add(namedValues(base, [][3]uint64{{0, 11, namedInt64}, {0, 3, namedString}}, "xla_version"), uint64(2))
	f.Add(namedValues(base, [][3]uint64{{0, 2, namedInt64List}}, "abcdefghijklmnop"), uint64(1))
	f.Add(namedValues(base, [][3]uint64{{0, 1, namedFloat}, {0, 1, namedBool}}, "\x00"), uint64(2))
	f.Add([]byte{}, uint64(0))
	f.Add(make([]byte, 56), uint64(1))
	f.Fuzz(func(t *testing.T, data []byte, num uint64) {
		mem := fakeMemory{base, data}
		attrs, _ := decodeAttributes(mem.read, base, num)
		for _, a := range attrs {
			for _, s := range []string{a.Name, a.Value} {
				if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsGraphic(r) }) {
					t.Fatalf("unprintable %q", s)
				}
			}
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{"library_path": "/opt/pjrt/libtpu.so"}`,
		`{"library_path": "a.so", "create_options": {"n": 1, "s": "x", "l": [1, 2], "f": 0.5, "b": true}}`,
		`{"library_path": 3}`, `{"create_options": {}}`, `[]`, `null`, `{"library_path": "a.so"} {}`,
		`{"library_path": "a.so", "create_options": {"l": [1.5]}}`, `{"library_path": ""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			return
		}
		if c.LibraryPath == "" {
			t.Fatalf("accepted %q with an empty library_path", data)
		}
	})
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`{"library_path": "/opt/x.so", "create_options": {"visible_devices": [0, 1], "name": "a"}}`))
	if err != nil || c.LibraryPath != "/opt/x.so" || len(c.CreateOptions) != 2 {
		t.Fatalf("%+v %v", c, err)
	}
	for in, want := range map[string]string{
		`[]`:                   "not a JSON object",
		`{"path": "x"}`:        `no "library_path"`,
		`{"library_path": 3}`:  "is a number, not a string",
		`{"library_path": ""}`: "is empty",
		`{"library_path": "a", "create_options": []}`:           "not an object",
		`{"library_path": "a", "create_options": {"l": [1.5]}}`: "not a 64-bit integer",
		`{"library_path": "a", "create_options": {"o": {}}}`:    "an object is not a string",
		`{"library_path": "a"} x`:                               "after the JSON object",
	} {
		if _, err := ParseConfig([]byte(in)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseConfig(%s) = %v, want %q", in, err, want)
		}
	}
}

func TestGoSignal(t *testing.T) {
	for in, want := range map[string]string{
		"SIGSEGV: segmentation violation\nPC=0x7f m=0 sigcode=1 addr=0x0\n":                     "SIGSEGV: segmentation violation",
		"fatal error: unexpected signal\n[signal SIGBUS: bus error code=0x2 addr=0x0 pc=0x1]\n": "SIGBUS: bus error",
		"plugin says SIGSEGV: no\n": "",
		"":                          "",
	} {
		if got := goSignal(in); got != want {
			t.Errorf("goSignal(%q) = %q, want %q", in, got, want)
		}
	}
}
