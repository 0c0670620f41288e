package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

const ptxHead = ".version 7.0\n.target sm_50\n.address_size 64\n"

func TestParsePTX(t *testing.T) {
	src := ptxHead + `
.file 1 "/src//kernel.cu" // a path with "//" in a string
/* a block
   comment with .entry fake( */
.func helper(.param .u64 p) { ret; }
.visible .entry first(
	.param .u64 first_param_0,
	.param .f32 first_param_1,
	.param .u32 first_param_2,
	.param .u64 .ptr .global .align 16 first_param_3,
	.param .align 4 .b8 first_param_4[12],
	.param .u8 first_param_5,
	.param .f64 first_param_6
)
{
	.reg .b32 %r<2>;
	ret;
}
.entry noparams()
{ ret; }
.weak .entry bare
{ { ret; } }
`
	got, err := parsePTX([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []ptxEntry{
		{"first", []driver.Param{{Offset: 0, Size: 8}, {Offset: 8, Size: 4}, {Offset: 12, Size: 4}, {Offset: 16, Size: 8}, {Offset: 24, Size: 12}, {Offset: 36, Size: 1}, {Offset: 40, Size: 8}}},
		{"noparams", nil},
		{"bare", nil},
	}
	if len(got) != len(want) {
		t.Fatalf("parsePTX = %+v; want %+v", got, want)
	}
	for i := range want {
		if got[i].name != want[i].name || !slices.Equal(got[i].params, want[i].params) {
			t.Errorf("entry %d = %+v; want %+v", i, got[i], want[i])
		}
	}
}

func TestParsePTXErrors(t *testing.T) {
	for _, tt := range []struct{ name, src, want string }{
		{"no version", ".target sm_50\n.entry k() {}", "no .version"},
		{"no target", ".version 7.0\n.entry k() {}", "no .target"},
		{"unclosed brace", ptxHead + ".entry k() {", "unbalanced braces"},
		{"stray brace", ptxHead + "}", "without a matching"},
		{"entry in body", ptxHead + ".entry k() { .entry j() }", "inside a function body"},
		{"no name", ptxHead + ".entry (", "not a kernel name"},
		{"name at end", ptxHead + ".entry", "not a kernel name"},
		{"duplicate", ptxHead + ".entry k() {}\n.entry k() {}", "a second .entry named k"},
		{"unclosed params", ptxHead + ".entry k(.param .u64 a", "not closed"},
		{"bad separator", ptxHead + ".entry k(.param .u64 a; .param .u32 b) {}", `";" after parameter 0`},
		{"not param", ptxHead + ".entry k(.reg .u64 a) {}", "want .param"},
		{"no type", ptxHead + ".entry k(.param a) {}", "no type"},
		{"two types", ptxHead + ".entry k(.param .u32 .u64 a) {}", "a second type"},
		{"unknown type", ptxHead + ".entry k(.param .pred a) {}", "unknown attribute or type .pred"},
		{"no name", ptxHead + ".entry k(.param .u64) {}", "no parameter name"},
		{"bad align", ptxHead + ".entry k(.param .align 3 .b8 a[4]) {}", ".align \"3\""},
		{"bad count", ptxHead + ".entry k(.param .b8 a[0]) {}", "array size \"0\""},
		{"unclosed array", ptxHead + ".entry k(.param .b8 a[4) {}", "not closed with ']'"},
		{"too big", ptxHead + ".entry k(.param .b64 a[5000]) {}", "at most 32764"},
		{"too many", ptxHead + ".entry k(.param .b8 a[32764], .param .u32 b) {}", "more than 32764"},
		{"unclosed comment", ptxHead + "/* x", "comment not closed"},
		{"unclosed string", ptxHead + ".file 1 \"x\n", "string not closed"},
		{"nul", ptxHead + "\x00", "NUL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parsePTX([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parsePTX(%q) = %v; want an error containing %q", tt.src, err, tt.want)
			}
		})
	}
}

// FuzzParsePTX checks that no text panics the parser and that what it
// accepts is sound: named, unique kernels whose parameters are laid out in
// order without overlap within the parameter limit.
func FuzzParsePTX(f *testing.F) {
	for _, s := range []string{
		ptxHead + ".visible .entry k(.param .u64 a, .param .f32 b, .param .u32 c) { ret; }",
		ptxHead + ".entry k(.param .align 8 .b8 s[24], .param .u8 c) {}\n.entry j {}",
		ptxHead + ".entry k(.param .u64 .ptr .global .align 4 p) { { } }",
		ptxHead + "// c\n/* c */ .file 1 \"a//b\"\n.entry k() {}",
		".version 7.0 .entry k(",
		".entry k(.param .b8 a[99999]",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		entries, err := parsePTX(src)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, e := range entries {
			if !validIdent(e.name) || seen[e.name] {
				t.Fatalf("kernel name %q invalid or repeated", e.name)
			}
			seen[e.name] = true
			var end uint32
			for i, p := range e.params {
				if p.Size == 0 || p.Offset < end || uint64(p.Offset)+uint64(p.Size) > maxParamBytes {
					t.Fatalf("kernel %s parameter %d = %+v after end %d", e.name, i, p, end)
				}
				end = p.Offset + p.Size
			}
		}
	})
}

func TestValidIdent(t *testing.T) {
	for s, want := range map[string]bool{
		"k": true, "_Z3fooPf": true, "$L": true, "%r1": true, "a$b_9": true,
		"": false, "_": false, "9a": false, "a.b": false, "a-b": false, "a b": false,
	} {
		if validIdent(s) != want {
			t.Errorf("validIdent(%q) = %v; want %v", s, !want, want)
		}
	}
}
