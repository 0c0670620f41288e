package progcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/blake2b"
)

func baseInput() KeyInput {
	return KeyInput{
		Sources:   []Source{{Name: "k.cu", Code: []byte("__global__ void k(){}")}},
		CodeType:  "c++",
		Target:    "cubin",
		Options:   Options{Arch: "sm_90"},
		Toolchain: []Component{{"nvrtc", "12.8"}, {"cuda-driver", "13.0"}},
	}
}

func mustKey(t *testing.T, in KeyInput) Key {
	t.Helper()
	k, err := MakeKey(in)
	if err != nil {
		t.Fatalf("MakeKey: %v", err)
	}
	return k
}

func TestMakeKeyEquivalent(t *testing.T) {
	with := func(f func(*KeyInput)) KeyInput { in := baseInput(); f(&in); return in }
	cases := []struct {
		name string
		a, b KeyInput
	}{
		{"-G = --device-debug = Debug", with(func(in *KeyInput) { in.Options.Extra = []string{"-G"} }), with(func(in *KeyInput) { in.Options.Debug = true })},
		{"--device-debug", with(func(in *KeyInput) { in.Options.Extra = []string{"--device-debug"} }), with(func(in *KeyInput) { in.Options.Debug = true })},
		{"-DX=1 = --define-macro=X=1", with(func(in *KeyInput) { in.Options.Extra = []string{"-DX=1"} }), with(func(in *KeyInput) { in.Options.Extra = []string{"--define-macro=X=1"} })},
		{"-D X=1 = typed", with(func(in *KeyInput) { in.Options.Extra = []string{"-D", "X=1"} }), with(func(in *KeyInput) { in.Options.Defines = []Define{{Name: "X", Value: "1"}} })},
		{"-DX = -DX=1", with(func(in *KeyInput) { in.Options.Extra = []string{"-DX"} }), with(func(in *KeyInput) { in.Options.Extra = []string{"-DX=1"} })},
		{"define order of distinct names", with(func(in *KeyInput) { in.Options.Defines = []Define{{"A", "1", false}, {"B", "2", false}} }), with(func(in *KeyInput) { in.Options.Defines = []Define{{"B", "2", false}, {"A", "1", false}} })},
		{"later define wins", with(func(in *KeyInput) { in.Options.Extra = []string{"-DA=1", "-DA=2"} }), with(func(in *KeyInput) { in.Options.Extra = []string{"-DA=2"} })},
		{"undef after define", with(func(in *KeyInput) { in.Options.Extra = []string{"-DA=1", "-UA"} }), with(func(in *KeyInput) { in.Options.Extra = []string{"--undefine-macro=A"} })},
		{"arch spellings", with(func(in *KeyInput) { in.Options = Options{Extra: []string{"-arch=sm_90"}} }), with(func(in *KeyInput) { in.Options = Options{Extra: []string{"--gpu-architecture", "sm_90"}} })},
		{"arch typed = extra same value", with(func(in *KeyInput) { in.Options.Extra = []string{"-arch=sm_90"} }), baseInput()},
		{"-std", with(func(in *KeyInput) { in.Options.Extra = []string{"-std=c++17"} }), with(func(in *KeyInput) { in.Options.Std = "c++17" })},
		{"lineinfo", with(func(in *KeyInput) { in.Options.Extra = []string{"--generate-line-info"} }), with(func(in *KeyInput) { in.Options.LineInfo = true })},
		{"fast math", with(func(in *KeyInput) { in.Options.Extra = []string{"-use_fast_math"} }), with(func(in *KeyInput) { in.Options.FastMath = true })},
		{"rdc", with(func(in *KeyInput) { in.Options.Extra = []string{"-rdc=true"} }), with(func(in *KeyInput) { in.Options.Extra = []string{"--relocatable-device-code", "true"} })},
		{"rdc typed", with(func(in *KeyInput) { in.Options.Extra = []string{"-dc"} }), with(func(in *KeyInput) { in.Options.Relocatable = true })},
		{"rdc=false is default", with(func(in *KeyInput) { in.Options.Extra = []string{"-rdc=false"} }), baseInput()},
		{"maxrregcount", with(func(in *KeyInput) { in.Options.Extra = []string{"-maxrregcount", "64"} }), with(func(in *KeyInput) { in.Options.MaxRegisters = 64 })},
		{"flag order", with(func(in *KeyInput) { in.Options.Extra = []string{"-G", "-lineinfo"} }), with(func(in *KeyInput) { in.Options.Extra = []string{"-lineinfo", "-G"} })},
		{"include spellings", with(func(in *KeyInput) { in.Options.Extra = []string{"-I/inc"}; in.ExtraDigest = []byte{1} }), with(func(in *KeyInput) { in.Options.IncludePaths = []string{"/inc"}; in.ExtraDigest = []byte{1} })},
		{"include spellings 2", with(func(in *KeyInput) { in.Options.Extra = []string{"--include-path", "/inc"}; in.ExtraDigest = []byte{1} }), with(func(in *KeyInput) { in.Options.Extra = []string{"--include-path=/inc"}; in.ExtraDigest = []byte{1} })},
		{"name expression order and repeats", with(func(in *KeyInput) { in.NameExpressions = []string{"b", "a", "b"} }), with(func(in *KeyInput) { in.NameExpressions = []string{"a", "b"} })},
		{"toolchain order", with(func(in *KeyInput) { slices.Reverse(in.Toolchain) }), baseInput()},
		{"nil and empty extra digest", with(func(in *KeyInput) { in.ExtraDigest = []byte{} }), baseInput()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if a, b := mustKey(t, tc.a), mustKey(t, tc.b); a != b {
				t.Errorf("equivalent inputs gave different keys %v and %v", a, b)
			}
		})
	}
}

func TestMakeKeyDistinct(t *testing.T) {
	with := func(f func(*KeyInput)) KeyInput { in := baseInput(); f(&in); return in }
	inputs := map[string]KeyInput{
		"base":                baseInput(),
		"source boundary 1":   with(func(in *KeyInput) { in.Sources = []Source{{"a", []byte("xy")}, {"b", []byte("z")}} }),
		"source boundary 2":   with(func(in *KeyInput) { in.Sources = []Source{{"a", []byte("x")}, {"b", []byte("yz")}} }),
		"name/code boundary":  with(func(in *KeyInput) { in.Sources = []Source{{"ax", []byte("y")}} }),
		"name/code boundary2": with(func(in *KeyInput) { in.Sources = []Source{{"a", []byte("xy")}} }),
		"source order":        with(func(in *KeyInput) { in.Sources = []Source{{"b", []byte("z")}, {"a", []byte("xy")}} }),
		"extra empty source":  with(func(in *KeyInput) { in.Sources = append(in.Sources, Source{}) }),
		"code type":           with(func(in *KeyInput) { in.CodeType = "ptx" }),
		"target":              with(func(in *KeyInput) { in.Target = "ptx" }),
		"code type/target":    with(func(in *KeyInput) { in.CodeType = "c++c"; in.Target = "ubin" }),
		"arch":                with(func(in *KeyInput) { in.Options.Arch = "sm_80" }),
		"no arch":             with(func(in *KeyInput) { in.Options.Arch = "" }),
		"std":                 with(func(in *KeyInput) { in.Options.Std = "c++17" }),
		"debug":               with(func(in *KeyInput) { in.Options.Debug = true }),
		"lineinfo":            with(func(in *KeyInput) { in.Options.LineInfo = true }),
		"fastmath":            with(func(in *KeyInput) { in.Options.FastMath = true }),
		"rdc":                 with(func(in *KeyInput) { in.Options.Relocatable = true }),
		"maxregs":             with(func(in *KeyInput) { in.Options.MaxRegisters = 32 }),
		"define":              with(func(in *KeyInput) { in.Options.Defines = []Define{{Name: "X", Value: "1"}} }),
		"define empty":        with(func(in *KeyInput) { in.Options.Defines = []Define{{Name: "X", Value: ""}} }),
		"undef":               with(func(in *KeyInput) { in.Options.Defines = []Define{{Name: "X", Undef: true}} }),
		"define last wins":    with(func(in *KeyInput) { in.Options.Extra = []string{"-DA=2", "-DA=1"} }),
		"includes ab":         with(func(in *KeyInput) { in.Options.IncludePaths = []string{"a", "b"}; in.ExtraDigest = []byte{1} }),
		"includes ba":         with(func(in *KeyInput) { in.Options.IncludePaths = []string{"b", "a"}; in.ExtraDigest = []byte{1} }),
		"preinclude a":        with(func(in *KeyInput) { in.Options.PreIncludes = []string{"a"}; in.ExtraDigest = []byte{1} }),
		"extra digest":        with(func(in *KeyInput) { in.ExtraDigest = []byte{1} }),
		"extra digest 2":      with(func(in *KeyInput) { in.ExtraDigest = []byte{2} }),
		"extra xy":            with(func(in *KeyInput) { in.Options.Extra = []string{"--foo", "--bar"} }),
		"extra yx":            with(func(in *KeyInput) { in.Options.Extra = []string{"--bar", "--foo"} }),
		"extra joined":        with(func(in *KeyInput) { in.Options.Extra = []string{"--foo--bar"} }),
		"names":               with(func(in *KeyInput) { in.NameExpressions = []string{"k"} }),
		"names empty string":  with(func(in *KeyInput) { in.NameExpressions = []string{""} }),
		"toolchain version":   with(func(in *KeyInput) { in.Toolchain[0].Version = "12.9" }),
		"toolchain missing":   with(func(in *KeyInput) { in.Toolchain = in.Toolchain[:1] }),
		"blake2b":             with(func(in *KeyInput) { in.Digest = DigestBlake2b256 }),
	}
	seen := map[Key]string{}
	for name, in := range inputs {
		k := mustKey(t, in)
		if other, dup := seen[k]; dup {
			t.Errorf("inputs %q and %q share key %v", name, other, k)
		}
		seen[k] = name
	}
}

func TestMakeKeyRefused(t *testing.T) {
	with := func(f func(*KeyInput)) KeyInput { in := baseInput(); f(&in); return in }
	cases := []struct {
		name string
		in   KeyInput
		want error
	}{
		{"no sources", with(func(in *KeyInput) { in.Sources = nil }), ErrInvalidInput},
		{"no code type", with(func(in *KeyInput) { in.CodeType = "" }), ErrInvalidInput},
		{"no target", with(func(in *KeyInput) { in.Target = "" }), ErrInvalidInput},
		{"include path", with(func(in *KeyInput) { in.Options.IncludePaths = []string{"/x"} }), ErrNeedsExtraDigest},
		{"-I", with(func(in *KeyInput) { in.Options.Extra = []string{"-I/x"} }), ErrNeedsExtraDigest},
		{"pre-include", with(func(in *KeyInput) { in.Options.Extra = []string{"--pre-include=x.h"} }), ErrNeedsExtraDigest},
		{"use pch", with(func(in *KeyInput) { in.Options.Extra = []string{"--use-pch=x.pch"} }), ErrNeedsExtraDigest},
		{"pch dir", with(func(in *KeyInput) { in.Options.Extra = []string{"-pch-dir", "/p"} }), ErrNeedsExtraDigest},
		{"source dir", with(func(in *KeyInput) { in.Sources[0].Name = "src/k.cu" }), ErrNeedsExtraDigest},
		{"pch", with(func(in *KeyInput) { in.Options.Extra = []string{"--pch"}; in.ExtraDigest = []byte{1} }), ErrUncacheable},
		{"create pch", with(func(in *KeyInput) { in.Options.Extra = []string{"--create-pch=x"}; in.ExtraDigest = []byte{1} }), ErrUncacheable},
		{"time", with(func(in *KeyInput) { in.Options.Extra = []string{"-time", "t.csv"} }), ErrUncacheable},
		{"time=", with(func(in *KeyInput) { in.Options.Extra = []string{"--time=t.csv"} }), ErrUncacheable},
		{"time trace", with(func(in *KeyInput) { in.Options.Extra = []string{"--fdevice-time-trace=t.json"} }), ErrUncacheable},
		{"conflicting arch", with(func(in *KeyInput) { in.Options.Extra = []string{"-arch=sm_80"} }), ErrInvalidInput},
		{"flag without value", with(func(in *KeyInput) { in.Options.Extra = []string{"-arch"} }), ErrInvalidInput},
		{"bad maxrregcount", with(func(in *KeyInput) { in.Options.Extra = []string{"-maxrregcount=x"} }), ErrInvalidInput},
		{"negative maxregs", with(func(in *KeyInput) { in.Options.MaxRegisters = -1 }), ErrInvalidInput},
		{"bad rdc", with(func(in *KeyInput) { in.Options.Extra = []string{"-rdc=maybe"} }), ErrInvalidInput},
		{"empty macro", with(func(in *KeyInput) { in.Options.Extra = []string{"-D", "=1"} }), ErrInvalidInput},
		{"dup toolchain", with(func(in *KeyInput) { in.Toolchain = append(in.Toolchain, Component{"nvrtc", "1"}) }), ErrInvalidInput},
		{"unnamed toolchain", with(func(in *KeyInput) { in.Toolchain = append(in.Toolchain, Component{"", "1"}) }), ErrInvalidInput},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := MakeKey(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("MakeKey error = %v, want %v", err, tc.want)
			}
		})
	}
	// With an ExtraDigest, the external-input options are accepted.
	in := with(func(in *KeyInput) {
		in.Options.Extra = []string{"-I/x", "--use-pch=a.pch"}
		in.Sources[0].Name = "src/k.cu"
		in.ExtraDigest = []byte("headers")
	})
	mustKey(t, in)
}

// TestMakeKeyFunctionLikeMacro: a function-like macro is named by the
// identifier before '(', so a later definition of X replaces an earlier
// one whatever their parameter lists. With source "int y = X(1);",
// -DX(a)=a -DX(b)=2 preprocesses to "int y = 2;" and the other order to
// "int y = 1;": the keys must differ.
func TestMakeKeyFunctionLikeMacro(t *testing.T) {
	key := func(extra ...string) Key {
		t.Helper()
		in := baseInput()
		in.Sources[0].Code = []byte("int y = X(1);")
		in.Options.Extra = extra
		return mustKey(t, in)
	}
	if a, b := key("-DX(a)=a", "-DX(b)=2"), key("-DX(b)=2", "-DX(a)=a"); a == b {
		t.Error("-DX(a)=a -DX(b)=2 and the other order share a key; the last definition of X wins, so they differ")
	}
	// The last definition is all that counts.
	if a, b := key("-DX(a)=a", "-DX(b)=2"), key("-DX(b)=2"); a != b {
		t.Error("-DX(a)=a -DX(b)=2 and -DX(b)=2 differ; the first is redefined")
	}
	if a, b := key("-DX=3", "-DX(a)=a"), key("-DX(a)=a"); a != b {
		t.Error("an object-like X redefined as a function-like X keeps the first")
	}
	if a, b := key("-DX(a)=a", "-UX"), key("-UX"); a != b {
		t.Error("-UX after -DX(a)=a does not undefine X")
	}
	if a, b := key("-UX", "-DX(a)=a"), key("-DX(a)=a"); a != b {
		t.Error("-DX(a)=a after -UX does not define X")
	}
	if a, b := key("-DX(a)=a"), key("-DX=a"); a == b {
		t.Error("function-like and object-like X share a key")
	}
	if a, b := key("-DX(a)=a", "-DY(b)=b"), key("-DY(b)=b", "-DX(a)=a"); a != b {
		t.Error("function-like macros of different names do not commute")
	}
	if a, b := key("-DX(a)"), key("-DX(a)=1"); a != b {
		t.Error("-DX(a) is not -DX(a)=1")
	}
	// Typed Defines follow the same rule.
	in := baseInput()
	in.Sources[0].Code = []byte("int y = X(1);")
	in.Options.Defines = []Define{{Name: "X(b)", Value: "2"}, {Name: "X(a)", Value: "a"}}
	if mustKey(t, in) != key("-DX(a)=a") {
		t.Error("typed Defines: X(a) after X(b) does not replace it")
	}
	for _, bad := range [][]string{{"-D(a)=1"}, {"-DX(a=1"}, {"-DX(a)b=1"}, {"-DX((a))=1"}, {"-DX)=1"}, {"-UX(a)"}} {
		in := baseInput()
		in.Options.Extra = bad
		if _, err := MakeKey(in); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("MakeKey(%q) error = %v, want ErrInvalidInput", bad, err)
		}
	}
}

func TestKeyStringParse(t *testing.T) {
	k := mustKey(t, baseInput())
	s := k.String()
	if len(s) != 64 {
		t.Fatalf("String() length %d", len(s))
	}
	p, err := ParseKey(s)
	if err != nil || p != k {
		t.Fatalf("ParseKey(%q) = %v, %v; want %v", s, p, err, k)
	}
	for _, bad := range []string{"", "zz", s[:63], s + "0", "g" + s[1:]} {
		if _, err := ParseKey(bad); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParseKey(%q) error = %v, want ErrInvalidKey", bad, err)
		}
	}
}

func TestKeyDigestKind(t *testing.T) {
	in := baseInput()
	c0, _ := canonicalize(in)
	in.Digest = DigestSHA256
	c1, _ := canonicalize(in)
	in.Digest = DigestBlake2b256
	c2, _ := canonicalize(in)
	if c0.digest != DigestSHA256 || c1.digest != DigestSHA256 || c2.digest != DigestBlake2b256 {
		t.Fatalf("digests: zero value %v, DigestSHA256 %v, DigestBlake2b256 %v", c0.digest, c1.digest, c2.digest)
	}
	if !bytes.Equal(c0.preimage(), c1.preimage()) {
		t.Fatal("the zero Digest and DigestSHA256 give different preimages; the zero value must mean the default")
	}
	if bytes.Equal(c1.preimage(), c2.preimage()) {
		t.Fatal("SHA-256 and blake2b preimages are equal; the digest kind must be part of the schema")
	}
	// The key is the named hash of the preimage, nothing else.
	in.Digest = 0
	if k := mustKey(t, in); k != Key(sha256.Sum256(c0.preimage())) {
		t.Fatalf("default key %v is not SHA-256 of the preimage", k)
	}
	in.Digest = DigestBlake2b256
	if k := mustKey(t, in); k != Key(blake2b.Sum256(c2.preimage())) {
		t.Fatalf("blake2b key %v is not blake2b-256 of the preimage", k)
	}
	in.Digest = 7
	if _, err := MakeKey(in); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "DigestSHA256") {
		t.Fatalf("unknown digest kind: err = %v, want ErrInvalidInput naming the valid kinds", err)
	}
}

// decodePreimage parses a preimage back into canonical fields. That a
// decoder exists is what makes the encoding injective: FuzzKeyEncoding
// checks decode(encode(c)) == c.
func decodePreimage(b []byte) (*canonical, error) {
	p := &preimageReader{b: b}
	c := &canonical{}
	if p.str() != keyMagic || p.uv() != KeySchemaVersion {
		return nil, fmt.Errorf("bad header")
	}
	switch p.str() {
	case DigestBlake2b256.String():
		c.digest = DigestBlake2b256
	case DigestSHA256.String():
		c.digest = DigestSHA256
	}
	p.tag(tagSources)
	for n := p.uv(); n > 0 && p.err == nil; n-- {
		c.sources = append(c.sources, Source{Name: p.str(), Code: []byte(p.str())})
	}
	p.tag(tagCodeType)
	c.codeType = p.str()
	p.tag(tagTarget)
	c.target = p.str()
	p.tag(tagArch)
	c.arch = p.str()
	p.tag(tagStd)
	c.std = p.str()
	p.tag(tagDefines)
	for n := p.uv(); n > 0 && p.err == nil; n-- {
		d := Define{Name: p.str()}
		if p.uv() == 1 {
			d.Value = p.str()
		} else {
			d.Undef = true
		}
		c.defines = append(c.defines, d)
	}
	c.includes = p.strs(tagIncludes)
	c.preIncl = p.strs(tagPreIncl)
	p.tag(tagFlags)
	c.flags = uint8(p.uv())
	p.tag(tagMaxRegs)
	c.maxRegs = int(p.uv())
	c.extra = p.strs(tagExtra)
	c.names = p.strs(tagNames)
	p.tag(tagToolchain)
	for n := p.uv(); n > 0 && p.err == nil; n-- {
		c.toolchain = append(c.toolchain, Component{p.str(), p.str()})
	}
	p.tag(tagExtraDig)
	c.extraDig = []byte(p.str())
	if p.err == nil && len(p.b) != 0 {
		p.err = fmt.Errorf("%d trailing bytes", len(p.b))
	}
	return c, p.err
}

type preimageReader struct {
	b   []byte
	err error
}

func (p *preimageReader) uv() uint64 {
	if p.err != nil {
		return 0
	}
	v, n := binary.Uvarint(p.b)
	if n <= 0 {
		p.err = fmt.Errorf("bad uvarint")
		return 0
	}
	p.b = p.b[n:]
	return v
}

func (p *preimageReader) str() string {
	n := p.uv()
	if p.err != nil || n > uint64(len(p.b)) {
		p.err = fmt.Errorf("short")
		return ""
	}
	s := string(p.b[:n])
	p.b = p.b[n:]
	return s
}

func (p *preimageReader) tag(want uint64) {
	if got := p.uv(); p.err == nil && got != want {
		p.err = fmt.Errorf("tag %d, want %d", got, want)
	}
}

func (p *preimageReader) strs(tag uint64) []string {
	p.tag(tag)
	var ss []string
	for n := p.uv(); n > 0 && p.err == nil; n-- {
		ss = append(ss, p.str())
	}
	return ss
}

// sameCanonical compares canonical forms, treating nil and empty alike.
func sameCanonical(a, b *canonical) bool {
	eqSrc := slices.EqualFunc(a.sources, b.sources, func(x, y Source) bool { return x.Name == y.Name && bytes.Equal(x.Code, y.Code) })
	return a.digest == b.digest && eqSrc && a.codeType == b.codeType && a.target == b.target &&
		a.arch == b.arch && a.std == b.std && slices.Equal(a.defines, b.defines) &&
		slices.Equal(a.includes, b.includes) && slices.Equal(a.preIncl, b.preIncl) &&
		a.flags == b.flags && a.maxRegs == b.maxRegs && slices.Equal(a.extra, b.extra) &&
		slices.Equal(a.names, b.names) && slices.Equal(a.toolchain, b.toolchain) && bytes.Equal(a.extraDig, b.extraDig)
}

// splitFuzz turns fuzz bytes into a list of strings (0x00-separated).
func splitFuzz(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings0(b)
}

func strings0(b []byte) []string {
	var out []string
	for _, p := range bytes.Split(b, []byte{0}) {
		out = append(out, string(p))
	}
	return out
}

func FuzzKeyEncoding(f *testing.F) {
	f.Add([]byte("__global__ void k(){}"), "c++", "cubin", []byte("-G\x00-DX=1\x00--foo"), []byte("k"), []byte("x"), false)
	f.Add([]byte("a\x00b"), "ptx", "ptx", []byte("-I\x00/inc\x00-arch=sm_90"), []byte("a\x00b\x00a"), []byte{}, true)
	f.Add([]byte(""), "nvvm", "ltoir", []byte("-maxrregcount=32\x00-rdc=true\x00-UX"), []byte(""), []byte("\x00"), false)
	f.Add([]byte("k"), "c++", "cubin", []byte("-Xptxas\x00-G\x00-lineinfo\x00--ptxas-options=-v\x00-odir\x00-G"), []byte(""), []byte(""), false)
	f.Add([]byte("k"), "c++", "cubin", []byte("-Xcompiler=-I/x,-fPIC\x00-isystem\x00/y\x00-optf=o\x00-DX"), []byte(""), []byte("d"), false)
	f.Add([]byte("int y = X(1);"), "c++", "cubin", []byte("-DX(a)=a\x00-DX(b)=2"), []byte(""), []byte(""), false)
	f.Add([]byte("int y = X(1);"), "c++", "cubin", []byte("-DX(b)=2\x00-UX\x00--define-macro=X(a,b)=a\x00-D\x00X"), []byte(""), []byte(""), false)
	f.Fuzz(func(t *testing.T, src []byte, codeType, target string, extra, names, extraDig []byte, blake bool) {
		var sources []Source
		for i, s := range bytes.Split(src, []byte{0}) {
			sources = append(sources, Source{Name: fmt.Sprint(i % 2), Code: s})
		}
		in := KeyInput{
			Sources: sources, CodeType: codeType, Target: target,
			Options:         Options{Extra: splitFuzz(extra)},
			NameExpressions: splitFuzz(names),
			ExtraDigest:     extraDig,
		}
		if blake {
			in.Digest = DigestBlake2b256
		}
		c, err := canonicalize(in)
		if err != nil {
			return
		}
		// One entry per macro: a later operation on a name replaces the
		// earlier ones, whatever their parameter lists.
		seen := map[string]bool{}
		for _, d := range c.defines {
			name, _, _ := strings.Cut(d.Name, "(")
			if seen[name] {
				t.Fatalf("macro %q has two entries in %+v", name, c.defines)
			}
			seen[name] = true
		}
		pre := c.preimage()
		back, err := decodePreimage(pre)
		if err != nil {
			t.Fatalf("preimage does not decode: %v", err)
		}
		if !sameCanonical(c, back) {
			t.Fatalf("decode(encode(c)) != c:\n%+v\n%+v", c, back)
		}
		if _, err := MakeKey(in); err != nil {
			t.Fatalf("MakeKey failed after canonicalize succeeded: %v", err)
		}
	})
}
