package inspect

// Decoding of what a plugin hands back: strings, PJRT_NamedValue arrays.
// Every length a plugin supplies is capped before it is read, and every
// string is made printable before it reaches a report; the decoders read
// through a reader so the fuzz targets can hand them arbitrary memory.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/accelkit/accelkit/tfcompat"
)

// Caps on plugin-supplied lengths.
const (
	maxAttributes = 1024     // PJRT_Plugin_Attributes_Args.num_attributes
	maxStringLen  = 64 << 10 // a name or string value, and a C string
	maxListLen    = 4096     // an int64 list value
	maxCString    = 4096     // platform names and device types
)

// reader reads n bytes at addr of the process whose structs are decoded.
type reader func(addr uintptr, n int) ([]byte, error)

var errNullPointer = errors.New("NULL pointer")

// cleanString renders bytes a plugin supplied as printable UTF-8: invalid
// bytes become \xNN, control and other non-graphic runes \uNNNN, and a
// backslash \\, so nothing can forge a line of a report or a terminal
// escape. multiline keeps newlines and tabs (for stderr).
func cleanString(b []byte, multiline bool) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&sb, `\x%02x`, b[0])
		case r == '\\':
			sb.WriteString(`\\`)
		case multiline && (r == '\n' || r == '\t'):
			sb.WriteRune(r)
		case !unicode.IsGraphic(r):
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	return sb.String()
}

// readCString reads a NUL-terminated string at addr, one byte at a time (a
// longer read could cross into an unmapped page), up to maxCString bytes.
func readCString(read reader, addr uintptr) ([]byte, error) {
	if addr == 0 {
		return nil, errNullPointer
	}
	var out []byte
	for i := 0; i < maxCString; i++ {
		b, err := read(addr+uintptr(i), 1)
		if err != nil {
			return out, err
		}
		if b[0] == 0 {
			return out, nil
		}
		out = append(out, b[0])
	}
	return out, fmt.Errorf("no NUL within %d bytes", maxCString)
}

// validDeviceType applies TensorFlow's rule for SP_Platform.name and .type
// (stream_executor.h: "must start with a capital letter and consist of
// capital letters and underscores"; device_utils::ValidateDeviceType).
func validDeviceType(s []byte) bool {
	if len(s) == 0 || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for _, c := range s {
		if (c < 'A' || c > 'Z') && c != '_' {
			return false
		}
	}
	return true
}

func le64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
func le32(b []byte, off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }

// decodeAttributes decodes num PJRT_NamedValue records at arr. It stops at
// the first record it cannot read and returns what it decoded with the
// error naming the record.
func decodeAttributes(read reader, arr uintptr, num uint64) ([]Attribute, error) {
	if num == 0 {
		return nil, nil
	}
	if arr == 0 {
		return nil, fmt.Errorf("num_attributes is %d but attributes is NULL", num)
	}
	if num > maxAttributes {
		return nil, fmt.Errorf("num_attributes %d exceeds the %d this inspector reads", num, maxAttributes)
	}
	var out []Attribute
	for i := uint64(0); i < num; i++ {
		a, err := decodeNamedValue(read, arr+uintptr(i)*pjrtNamedValueSize)
		if err != nil {
			return out, fmt.Errorf("attribute %d: %w", i, err)
		}
		out = append(out, a)
	}
	return out, nil
}

func decodeNamedValue(read reader, at uintptr) (Attribute, error) {
	rec, err := read(at, pjrtNamedValueSize)
	if err != nil {
		return Attribute{}, err
	}
	if err := tfcompat.CheckStructSize("PJRT_NamedValue", int(min(le64(rec, 0), math.MaxInt32)), pjrtNamedValueSize); err != nil {
		return Attribute{}, err
	}
	name, err := readSized(read, uintptr(le64(rec, pjrtNamedValueNameOff)), le64(rec, pjrtNamedValueNameLen), "name")
	if err != nil {
		return Attribute{}, err
	}
	a := Attribute{Name: cleanString(name, false)}
	union := le64(rec, pjrtNamedValueUnionOff)
	n := le64(rec, pjrtNamedValueValLenOff)
	switch typ := int32(le32(rec, pjrtNamedValueTypeOff)); typ {
	case namedString:
		a.Type = "string"
		v, err := readSized(read, uintptr(union), n, "string value")
		if err != nil {
			return a, fmt.Errorf("%s: %w", a.Name, err)
		}
		a.Value = cleanString(v, false)
	case namedInt64:
		a.Type = "int64"
		a.Value = strconv.FormatInt(int64(union), 10)
	case namedInt64List:
		a.Type = "int64_list"
		if n > maxListLen {
			return a, fmt.Errorf("%s: value_size %d exceeds %d", a.Name, n, maxListLen)
		}
		if n > 0 && union == 0 {
			return a, fmt.Errorf("%s: %w with value_size %d", a.Name, errNullPointer, n)
		}
		var vals []string
		if n > 0 {
			raw, err := read(uintptr(union), int(n)*8)
			if err != nil {
				return a, fmt.Errorf("%s: %w", a.Name, err)
			}
			for j := range int(n) {
				vals = append(vals, strconv.FormatInt(int64(le64(raw, j*8)), 10))
			}
		}
		a.Value = "[" + strings.Join(vals, " ") + "]"
	case namedFloat:
		a.Type = "float"
		a.Value = strconv.FormatFloat(float64(math.Float32frombits(uint32(union))), 'g', -1, 32)
	case namedBool:
		a.Type = "bool"
		a.Value = strconv.FormatBool(union&0xff != 0)
	default:
		return a, fmt.Errorf("%s: unknown PJRT_NamedValue_Type %d (valid: 0 string, 1 int64, 2 int64 list, 3 float, 4 bool)", a.Name, typ)
	}
	return a, nil
}

// readSized reads n bytes at addr for a (pointer, size) pair.
func readSized(read reader, addr uintptr, n uint64, what string) ([]byte, error) {
	if n > maxStringLen {
		return nil, fmt.Errorf("%s size %d exceeds %d", what, n, maxStringLen)
	}
	if n == 0 {
		return nil, nil
	}
	if addr == 0 {
		return nil, fmt.Errorf("%s: %w with size %d", what, errNullPointer, n)
	}
	return read(addr, int(n))
}
