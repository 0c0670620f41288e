package sim

import (
	"fmt"
	"strconv"

	"github.com/accelkit/accelkit/driver"
)

// The sim reads of a PTX module only what a launch needs: the names of its
// kernels (.entry) and the sizes and offsets of their parameters. The code
// of a kernel is a Go function registered under its name (RegisterKernel),
// so the instructions are skipped, not checked.

// maxParamBytes is the most parameter memory a kernel may declare: CUDA
// 12.1's limit on Volta and later (4 KiB before), so PTX the sim accepts
// is not refused by a GPU for its parameter size.
const maxParamBytes = 32764

// ptxEntry is one kernel of a PTX module.
type ptxEntry struct {
	name   string
	params []driver.Param
}

// ptxTypeSizes are the sizes of the scalar types a kernel parameter may
// have.
var ptxTypeSizes = map[string]uint32{
	".b8": 1, ".u8": 1, ".s8": 1,
	".b16": 2, ".u16": 2, ".s16": 2, ".f16": 2, ".bf16": 2,
	".b32": 4, ".u32": 4, ".s32": 4, ".f32": 4, ".f16x2": 4, ".bf16x2": 4,
	".b64": 8, ".u64": 8, ".s64": 8, ".f64": 8,
}

// ptxToken is a word or punctuation of PTX text and the line it is on.
type ptxToken struct {
	text string
	line int
}

// parsePTX returns the kernels of the PTX module src in order. It refuses
// text without .version and .target directives, an .entry without a valid
// name or with a malformed parameter list, two kernels of one name, and
// unbalanced braces or parentheses, naming the line.
func parsePTX(src []byte) ([]ptxEntry, error) {
	toks, err := lexPTX(src)
	if err != nil {
		return nil, err
	}
	var (
		entries         []ptxEntry
		seen            = map[string]bool{}
		depth           int
		version, target bool
	)
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch t.text {
		case "{":
			depth++
		case "}":
			if depth == 0 {
				return nil, fmt.Errorf("line %d: '}' without a matching '{'", t.line)
			}
			depth--
		case ".version":
			version = version || depth == 0
		case ".target":
			target = target || depth == 0
		case ".entry":
			if depth != 0 {
				return nil, fmt.Errorf("line %d: .entry inside a function body", t.line)
			}
			e, next, err := parseEntry(toks, i+1)
			if err != nil {
				return nil, err
			}
			if seen[e.name] {
				return nil, fmt.Errorf("line %d: a second .entry named %s", t.line, e.name)
			}
			seen[e.name] = true
			entries = append(entries, e)
			i = next - 1
		}
	}
	switch {
	case depth != 0:
		return nil, fmt.Errorf("unbalanced braces: %d '{' not closed at the end of the text", depth)
	case !version:
		return nil, fmt.Errorf("no .version directive (PTX begins with one, such as .version 7.0)")
	case !target:
		return nil, fmt.Errorf("no .target directive (such as .target sm_50)")
	}
	return entries, nil
}

// parseEntry reads an entry's name and parameter list from toks[i:] and
// returns it and the index of the first token after it.
func parseEntry(toks []ptxToken, i int) (ptxEntry, int, error) {
	line := toks[i-1].line
	if i >= len(toks) || !validIdent(toks[i].text) {
		got := "the end of the text"
		if i < len(toks) {
			got, line = strconv.Quote(toks[i].text), toks[i].line
		}
		return ptxEntry{}, 0, fmt.Errorf("line %d: .entry is followed by %s, not a kernel name", line, got)
	}
	e := ptxEntry{name: toks[i].text}
	i++
	if i >= len(toks) || toks[i].text != "(" { // a kernel without parameters
		return e, i, nil
	}
	i++
	var off uint32
	for n := 0; ; n++ {
		if i < len(toks) && toks[i].text == ")" && n == 0 {
			return e, i + 1, nil // "()"
		}
		p, align, next, err := parseParam(toks, i, e.name, n)
		if err != nil {
			return ptxEntry{}, 0, err
		}
		off = (off + align - 1) / align * align
		p.Offset = off
		if uint64(off)+uint64(p.Size) > maxParamBytes {
			return ptxEntry{}, 0, fmt.Errorf("line %d: kernel %s: parameters take more than %d bytes, the most a kernel may have", toks[i].line, e.name, maxParamBytes)
		}
		off += p.Size
		e.params = append(e.params, p)
		i = next
		if i >= len(toks) {
			return ptxEntry{}, 0, fmt.Errorf("line %d: kernel %s: parameter list not closed with ')'", toks[len(toks)-1].line, e.name)
		}
		switch toks[i].text {
		case ")":
			return e, i + 1, nil
		case ",":
			i++
		default:
			return ptxEntry{}, 0, fmt.Errorf("line %d: kernel %s: %q after parameter %d; want ',' or ')'", toks[i].line, e.name, toks[i].text, n)
		}
	}
}

// parseParam reads parameter n of kernel from toks[i:]: .param, a type,
// optional .ptr, state space and .align attributes, a name and an optional
// [count]. It returns the parameter (its size), its alignment and the index
// of the token after it.
func parseParam(toks []ptxToken, i int, kernel string, n int) (driver.Param, uint32, int, error) {
	errAt := func(j int, format string, args ...any) error {
		line := toks[len(toks)-1].line
		if j < len(toks) {
			line = toks[j].line
		}
		return fmt.Errorf("line %d: kernel %s parameter %d: %s", line, kernel, n, fmt.Sprintf(format, args...))
	}
	if i >= len(toks) || toks[i].text != ".param" {
		return driver.Param{}, 0, 0, errAt(i, "want .param (a kernel's parameters are .param declarations)")
	}
	i++
	var size, align uint32
	for ; i < len(toks) && len(toks[i].text) > 0 && toks[i].text[0] == '.'; i++ {
		switch w := toks[i].text; {
		case ptxTypeSizes[w] != 0:
			if size != 0 {
				return driver.Param{}, 0, 0, errAt(i, "a second type %s", w)
			}
			size = ptxTypeSizes[w]
		case w == ".align":
			if i+1 >= len(toks) {
				return driver.Param{}, 0, 0, errAt(i, ".align without a value")
			}
			a, err := strconv.ParseUint(toks[i+1].text, 10, 32)
			if err != nil || a == 0 || a&(a-1) != 0 || a > 256 {
				return driver.Param{}, 0, 0, errAt(i+1, ".align %q: want a power of two up to 256", toks[i+1].text)
			}
			align = uint32(a)
			i++
		case w == ".ptr", w == ".global", w == ".const", w == ".local", w == ".shared":
			// Pointer attributes: they say what the parameter points to,
			// not its size.
		default:
			return driver.Param{}, 0, 0, errAt(i, "unknown attribute or type %s; valid types are .b8-.b64, .u8-.u64, .s8-.s64, .f16, .f32, .f64", w)
		}
	}
	if size == 0 {
		return driver.Param{}, 0, 0, errAt(i, "no type (such as .u64 or .f32)")
	}
	if i >= len(toks) || !validIdent(toks[i].text) {
		return driver.Param{}, 0, 0, errAt(i, "no parameter name")
	}
	i++
	if i < len(toks) && toks[i].text == "[" {
		if i+2 >= len(toks) || toks[i+2].text != "]" {
			return driver.Param{}, 0, 0, errAt(i, "array size not closed with ']'")
		}
		count, err := strconv.ParseUint(toks[i+1].text, 10, 32)
		if err != nil || count == 0 || count > maxParamBytes {
			return driver.Param{}, 0, 0, errAt(i+1, "array size %q: want 1 to %d", toks[i+1].text, maxParamBytes)
		}
		if uint64(size)*count > maxParamBytes {
			return driver.Param{}, 0, 0, errAt(i+1, "array of %d bytes: a kernel's parameters take at most %d", uint64(size)*count, maxParamBytes)
		}
		size *= uint32(count)
		i += 3
	}
	if align == 0 {
		align = min(size, 8) // a scalar is aligned to its size
		for align&(align-1) != 0 {
			align &= align - 1
		}
	}
	return driver.Param{Size: size}, align, i, nil
}

// validIdent reports whether s is a PTX identifier: a letter followed by
// letters, digits, '_' and '$', or '_', '$' or '%' followed by at least one
// of those.
func validIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		switch {
		case letter:
		case i > 0 && (c >= '0' && c <= '9' || c == '_' || c == '$'):
		case i == 0 && (c == '_' || c == '$' || c == '%') && len(s) > 1:
		default:
			return false
		}
	}
	return true
}

// lexPTX splits src into words (runs of letters, digits, '.', '_', '$',
// '%') and single punctuation characters, dropping comments, white space
// and quoted strings (a .file directive's path may hold "//").
func lexPTX(src []byte) ([]ptxToken, error) {
	var toks []ptxToken
	line := 1
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			start := line
			i += 2
			for ; i+1 < len(src) && (src[i] != '*' || src[i+1] != '/'); i++ {
				if src[i] == '\n' {
					line++
				}
			}
			if i+1 >= len(src) {
				return nil, fmt.Errorf("line %d: comment not closed with */", start)
			}
			i += 2
		case c == '"':
			start := line
			for i++; i < len(src) && src[i] != '"'; i++ {
				if src[i] == '\n' {
					return nil, fmt.Errorf("line %d: string not closed on its line", start)
				}
			}
			if i >= len(src) {
				return nil, fmt.Errorf("line %d: string not closed", start)
			}
			i++
		case wordByte(c):
			j := i
			for j < len(src) && wordByte(src[j]) {
				j++
			}
			toks = append(toks, ptxToken{string(src[i:j]), line})
			i = j
		case c == 0:
			return nil, fmt.Errorf("line %d: NUL byte in PTX text", line)
		default:
			toks = append(toks, ptxToken{string(src[i : i+1]), line})
			i++
		}
	}
	return toks, nil
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '$' || c == '%'
}
