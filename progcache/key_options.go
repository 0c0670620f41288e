package progcache

// Option normalisation.
//
// Options are canonicalised before encoding: an Extra flag that a typed field
// covers is parsed into that field, so equivalent spellings give one key.
// Order is kept only where it changes meaning (include search order,
// pre-include order, the untyped Extra flags); defines are reduced to the
// final state of each macro (a later -D or -U of a name overrides an earlier
// one) and sorted, because command-line macros of different names commute.
//
// A recognised flag that takes a value consumes it, whatever it looks like:
// in "-Xptxas -G" the -G is ptxas's, not the compiler's device-debug flag,
// and in "-odir -G" it is a directory. Flags without a typed field (the
// pass-through flags such as -Xptxas, and nvcc's other value-taking
// options) are bound to their value as "--long-name=value" and stay in
// command-line order among the untyped flags. Flags that read files the key
// cannot see need an ExtraDigest; flags whose side output or side effect a
// cache hit would skip are refused. The tables below list them.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Bits of canonical.flags: the boolean options.
const (
	flagDebug = 1 << iota
	flagLineInfo
	flagFastMath
	flagRelocatable
)

// optState gathers the typed fields and what Extra flags say about them, so
// conflicts between the two can be reported.
type optState struct {
	arch, std string
	maxRegs   int
	defines   []Define
	includes  []string
	preIncl   []string
	flags     uint8
	noRDC     bool
	extra     []string
	// needDigest says what first pulled in files the key cannot see; empty
	// when nothing did.
	needDigest string
}

// need records why an ExtraDigest is required, keeping the first reason.
func (st *optState) need(why string) {
	if st.needDigest == "" {
		st.needDigest = why
	}
}

// setString sets *dst to v, failing when a different value is already set.
func setString(dst *string, v, what string) error {
	if v == "" {
		return fmt.Errorf("progcache: option %s has an empty value: %w", what, ErrInvalidInput)
	}
	if *dst != "" && *dst != v {
		return fmt.Errorf("progcache: conflicting %s values %q and %q: give one: %w", what, *dst, v, ErrInvalidInput)
	}
	*dst = v
	return nil
}

// flagSpec describes one recognised Extra flag. A recognised flag is typed
// (apply parses it into a field), bound (it has no field, so it is hashed
// as names[0]+"="+value among the unrecognised flags, in command-line
// order), or refused. Either way a flag that takes a value consumes it, so
// a value such as the -G of "-Xptxas -G" is never read as a flag.
type flagSpec struct {
	names []string // spellings, the canonical one first
	value bool     // takes a value: "-f v" or "-f=v"
	glue  bool     // a one-letter short name may also glue its value: -DX=1, -I/inc
	apply func(st *optState, v string) error
	bind  bool   // hash names[0]+"="+value in Extra order
	needs string // non-empty: reads files the key cannot see, so needs ExtraDigest
	// refuse is non-empty for a side output or side effect that a cache
	// hit would skip; such a flag is refused even with an ExtraDigest.
	refuse string
	host   bool // the value goes to the host compiler: checkHostValue reads it
}

// The recognised Extra flags. Spellings are NVRTC's and nvcc's; per the
// nvcc guide ("Command Option Types and Notation"), a long name (--x) and
// its short name (-x) are the same option, and a value follows its option
// after a space or an '='.
var flagSpecs = slices.Concat(typedFlags, passThroughFlags, inputFlags, boundValueFlags(nvccValueOptions), refusedFlags)

// typedFlags are parsed into Options fields.
var typedFlags = []flagSpec{
	{names: []string{"-arch", "--gpu-architecture"}, value: true, apply: func(st *optState, v string) error { return setString(&st.arch, v, "architecture") }},
	{names: []string{"-std", "--std"}, value: true, apply: func(st *optState, v string) error { return setString(&st.std, v, "language standard") }},
	{names: []string{"-G", "--device-debug"}, apply: func(st *optState, _ string) error { st.flags |= flagDebug; return nil }},
	{names: []string{"-lineinfo", "--generate-line-info"}, apply: func(st *optState, _ string) error { st.flags |= flagLineInfo; return nil }},
	{names: []string{"-use_fast_math", "--use_fast_math"}, apply: func(st *optState, _ string) error { st.flags |= flagFastMath; return nil }},
	{names: []string{"-dc"}, apply: func(st *optState, _ string) error { st.flags |= flagRelocatable; return nil }},
	{names: []string{"-rdc", "--relocatable-device-code"}, value: true, apply: func(st *optState, v string) error {
		switch v {
		case "true":
			st.flags |= flagRelocatable
			st.noRDC = false
		case "false":
			st.flags &^= flagRelocatable
			st.noRDC = true
		default:
			return fmt.Errorf("progcache: -rdc value %q: want true or false: %w", v, ErrInvalidInput)
		}
		return nil
	}},
	{names: []string{"-maxrregcount", "--maxrregcount"}, value: true, apply: func(st *optState, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("progcache: -maxrregcount value %q: want a positive integer: %w", v, ErrInvalidInput)
		}
		if st.maxRegs != 0 && st.maxRegs != n {
			return fmt.Errorf("progcache: conflicting -maxrregcount values %d and %d: give one: %w", st.maxRegs, n, ErrInvalidInput)
		}
		st.maxRegs = n
		return nil
	}},
	{names: []string{"-D", "--define-macro"}, value: true, glue: true, apply: func(st *optState, v string) error {
		name, val, ok := strings.Cut(v, "=")
		if !ok {
			val = "1"
		}
		st.defines = append(st.defines, Define{Name: name, Value: val})
		return nil
	}},
	{names: []string{"-U", "--undefine-macro"}, value: true, glue: true, apply: func(st *optState, v string) error {
		st.defines = append(st.defines, Define{Name: v, Undef: true})
		return nil
	}},
	{names: []string{"-I", "--include-path"}, value: true, glue: true,
		needs: "adds an include search path; the key cannot see the headers found there",
		apply: func(st *optState, v string) error {
			st.includes = append(st.includes, v)
			return nil
		}},
	{names: []string{"-include", "--pre-include"}, value: true,
		needs: "pre-includes a header the key cannot see",
		apply: func(st *optState, v string) error {
			st.preIncl = append(st.preIncl, v)
			return nil
		}},
}

// passThroughFlags hand their value to another tool (the nvcc guide's
// "Options for Passing Specific Phase Options", and nvcc's -Xcudafe and
// -Xfatbin). The value is that tool's option list: opaque to the key, bound
// to its flag and kept in order. It is not split at commas, so
// "-Xptxas -v,-O3" and "-Xptxas -v -Xptxas -O3" get different keys although
// nvcc treats them alike: a miss, never a wrong hit. Only -Xcompiler values
// are read, for the host compiler's include and side-output options.
var passThroughFlags = []flagSpec{
	{names: []string{"--compiler-options", "-Xcompiler"}, value: true, bind: true, host: true},
	{names: []string{"--linker-options", "-Xlinker"}, value: true, bind: true},
	{names: []string{"--archive-options", "-Xarchive"}, value: true, bind: true},
	{names: []string{"--ptxas-options", "-Xptxas"}, value: true, bind: true},
	{names: []string{"--nvlink-options", "-Xnvlink"}, value: true, bind: true},
	{names: []string{"-Xcudafe"}, value: true, bind: true},
	{names: []string{"-Xfatbin"}, value: true, bind: true},
}

// inputFlags read files the key cannot see: they are bound, and they need
// an ExtraDigest that fingerprints those files. An options file is treated
// the same way (as sccache does): the digest must cover the file and
// whatever its options read, and MakeKey cannot check the options inside it
// for side outputs, so a file that asks for one makes the key unsafe.
var inputFlags = []flagSpec{
	{names: []string{"--system-include", "-isystem"}, value: true, bind: true,
		needs: "adds a system include path; the key cannot see the headers found there"},
	{names: []string{"--options-file", "-optf"}, value: true, bind: true,
		needs: "reads more options from a file the key cannot see (fingerprint the file and everything its options read; MakeKey cannot check those options for side outputs)"},
	{names: []string{"--libdevice-directory", "-ldir"}, value: true, bind: true,
		needs: "reads libdevice from a directory the key cannot see"},
	{names: []string{"--use-pch", "-use-pch"}, value: true, bind: true,
		needs: "reads a precompiled header the key cannot see"},
	{names: []string{"--pch-dir", "-pch-dir"}, value: true, bind: true,
		needs: "reads precompiled headers from a directory the key cannot see"},
}

// nvccValueOptions are nvcc's other value-taking options (long, short),
// from the nvcc guide's option tables. None has a typed field; binding them
// keeps "-odir -G -lineinfo" apart from "-G -odir -lineinfo".
var nvccValueOptions = [][2]string{
	{"--output-file", "-o"},
	{"--output-directory", "-odir"},
	{"--library", "-l"},
	{"--library-path", "-L"},
	{"--compiler-bindir", "-ccbin"},
	{"--archiver-binary", "-arbin"},
	{"--cudart", "-cudart"},
	{"--cudadevrt", "-cudadevrt"},
	{"--target-directory", "-target-dir"},
	{"--dependency-target-name", "-MT"},
	{"--threads", "-t"},
	{"--run-args", "-run-args"},
	{"--input-drive-prefix", "-idp"},
	{"--dependency-drive-prefix", "-ddp"},
	{"--drive-prefix", "-dp"},
	{"--default-stream", "-default-stream"},
	{"--gpu-code", "-code"},
	{"--generate-code", "-gencode"},
	{"--entries", "-e"},
	{"--ftz", "-ftz"},
	{"--prec-div", "-prec-div"},
	{"--prec-sqrt", "-prec-sqrt"},
	{"--fmad", "-fmad"},
	{"--split-compile", "-split-compile"},
	{"--dopt", "-dopt"},
	{"--x", "-x"},
	{"--diag-error", "-diag-error"},
	{"--diag-suppress", "-diag-suppress"},
	{"--diag-warn", "-diag-warn"},
	{"--brief-diagnostics", "-brief-diag"},
	{"--optimization-info", "-opt-info"},
	{"--host-linker-script", "-hls"},
	{"--ftemplate-backtrace-limit", "-ftemplate-backtrace-limit"},
	{"--ftemplate-depth", "-ftemplate-depth"},
	{"--version-ident", "-dQ"},
}

func boundValueFlags(opts [][2]string) []flagSpec {
	specs := make([]flagSpec, len(opts))
	for i, o := range opts {
		specs[i] = flagSpec{names: []string{o[0], o[1]}, value: true, bind: true}
	}
	return specs
}

// refusedFlags write a side output, or have a side effect, that a cache hit
// would skip.
var refusedFlags = []flagSpec{
	{names: []string{"--pch", "-pch"}, refuse: "creates precompiled headers as a side output"},
	{names: []string{"--create-pch", "-create-pch"}, refuse: "creates a precompiled header as a side output"},
	{names: []string{"--time", "-time"}, refuse: "writes a timing file as a side output"},
	{names: []string{"--fdevice-time-trace", "-fdevice-time-trace"}, refuse: "writes a device time trace as a side output"},
	{names: []string{"--keep", "-keep"}, refuse: "keeps the intermediate files as a side output"},
	{names: []string{"--keep-dir", "-keep-dir"}, value: true, refuse: "keeps the intermediate files in a directory as a side output"},
	{names: []string{"--save-temps", "-save-temps"}, refuse: "keeps the intermediate files as a side output"},
	{names: []string{"--generate-dependencies", "-M"}, refuse: "generates make dependencies as a side output"},
	{names: []string{"--generate-nonsystem-dependencies", "-MM"}, refuse: "generates make dependencies as a side output"},
	{names: []string{"--generate-dependencies-with-compile", "-MD"}, refuse: "writes a dependency file as a side output"},
	{names: []string{"--generate-nonsystem-dependencies-with-compile", "-MMD"}, refuse: "writes a dependency file as a side output"},
	{names: []string{"--dependency-output", "-MF"}, value: true, refuse: "writes a dependency file as a side output"},
	{names: []string{"--run", "-run"}, refuse: "runs the compiled program, a side effect"},
	{names: []string{"--clean-targets", "-clean"}, refuse: "deletes what the compilation would write, a side effect"},
}

// flagIndex maps every spelling to its spec.
var flagIndex = indexFlags(flagSpecs)

func indexFlags(specs []flagSpec) map[string]*flagSpec {
	m := make(map[string]*flagSpec)
	for i := range specs {
		sp := &specs[i]
		if (sp.bind || sp.glue || sp.host) && !sp.value || sp.host && !sp.bind {
			panic("progcache: inconsistent flag spec " + sp.names[0])
		}
		for _, n := range sp.names {
			if _, dup := m[n]; dup {
				panic("progcache: flag " + n + " listed twice")
			}
			m[n] = sp
		}
	}
	return m
}

// matchFlag finds the spec for args[i]; it returns the spec, the flag's
// value and how many args it consumed (nil spec: not recognised). A whole
// spelling wins over "-f=v", which wins over a glued "-fv".
func matchFlag(args []string, i int) (*flagSpec, string, int, error) {
	a := args[i]
	if sp := flagIndex[a]; sp != nil {
		if !sp.value || sp.refuse != "" {
			return sp, "", 1, nil
		}
		if i+1 >= len(args) {
			return nil, "", 0, fmt.Errorf("progcache: option %q needs a value: give it as the next Extra element or after '=': %w", a, ErrInvalidInput)
		}
		return sp, args[i+1], 2, nil
	}
	// "-f=v"; a refused flag matches with any value (-time=file).
	if eq := strings.IndexByte(a, '='); eq > 0 {
		if sp := flagIndex[a[:eq]]; sp != nil && (sp.value || sp.refuse != "") {
			return sp, a[eq+1:], 1, nil
		}
	}
	if len(a) > 2 {
		if sp := flagIndex[a[:2]]; sp != nil && sp.glue {
			return sp, a[2:], 1, nil
		}
	}
	return nil, "", 0, nil
}

// hostInputs are host-compiler options (GCC and Clang spellings, and
// MSVC's /I and /FI) that read files the key cannot see. Each matches an
// element of a -Xcompiler value by prefix.
var hostInputs = []string{"-I", "-isystem", "-iquote", "-idirafter", "-include", "-imacros", "-iwithprefix", "-isysroot", "--sysroot", "@", "/I", "-FI", "/FI"}

// hostSideOutputs are GCC and Clang options that write a side output; each
// matches by prefix. -MD is left out on purpose: MSVC reads -MD as its
// runtime-library option, and MakeKey cannot tell which host compiler runs.
var hostSideOutputs = []string{"-MF", "-MMD", "-save-temps", "--save-temps", "-ftime-trace"}

// checkHostValue reads the value of a -Xcompiler flag (arg) the way nvcc
// and the shell split it, at commas and blanks, for host-compiler options
// that read files the key cannot see or write side outputs.
func checkHostValue(st *optState, arg, v string) error {
	for _, e := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		for _, p := range hostSideOutputs {
			if strings.HasPrefix(e, p) {
				return fmt.Errorf("progcache: option %q passes %q to the host compiler, which writes a side output that a cache hit would skip: drop the option, or compile without the cache: %w", arg, e, ErrUncacheable)
			}
		}
		if st.needDigest != "" {
			continue
		}
		for _, p := range hostInputs {
			if strings.HasPrefix(e, p) {
				st.need(fmt.Sprintf("option %q passes %q to the host compiler, which reads files the key cannot see", arg, e))
				break
			}
		}
	}
	return nil
}

// parseOptions normalises o into c: the typed fields merged with what the
// Extra flags say (conflicts are errors), untyped flags bound or kept in
// order, refused flags refused, and the defines reduced to their final
// state per name and sorted.
func (c *canonical) parseOptions(o Options) error {
	st := optState{}
	if o.Arch != "" {
		st.arch = o.Arch
	}
	st.std = o.Std
	st.maxRegs = o.MaxRegisters
	if o.MaxRegisters < 0 {
		return fmt.Errorf("progcache: MaxRegisters %d is negative: want 0 (unset) or a positive count: %w", o.MaxRegisters, ErrInvalidInput)
	}
	st.defines = slices.Clone(o.Defines)
	st.includes = slices.Clone(o.IncludePaths)
	st.preIncl = slices.Clone(o.PreIncludes)
	if len(o.IncludePaths) > 0 {
		st.need("Options.IncludePaths adds include search paths; the key cannot see the headers found there")
	}
	if len(o.PreIncludes) > 0 {
		st.need("Options.PreIncludes pre-includes headers the key cannot see")
	}
	if o.Debug {
		st.flags |= flagDebug
	}
	if o.LineInfo {
		st.flags |= flagLineInfo
	}
	if o.FastMath {
		st.flags |= flagFastMath
	}
	if o.Relocatable {
		st.flags |= flagRelocatable
	}
	for i := 0; i < len(o.Extra); {
		arg := o.Extra[i]
		sp, v, n, err := matchFlag(o.Extra, i)
		if err != nil {
			return err
		}
		if sp == nil {
			st.extra = append(st.extra, arg)
			i++
			continue
		}
		if sp.refuse != "" {
			return fmt.Errorf("progcache: option %q %s that a cache hit would skip: drop the option, or compile without the cache: %w", arg, sp.refuse, ErrUncacheable)
		}
		if sp.value && v == "" {
			return fmt.Errorf("progcache: option %q has an empty value: %w", arg, ErrInvalidInput)
		}
		if sp.needs != "" && st.needDigest == "" {
			st.need(fmt.Sprintf("option %q %s", arg, sp.needs))
		}
		if sp.host {
			if err := checkHostValue(&st, arg, v); err != nil {
				return err
			}
		}
		if sp.apply != nil {
			if err := sp.apply(&st, v); err != nil {
				return err
			}
		}
		if sp.bind {
			st.extra = append(st.extra, sp.names[0]+"="+v)
		}
		i += n
	}
	if o.Relocatable && st.noRDC {
		return fmt.Errorf("progcache: Relocatable is set but Extra has -rdc=false: give one: %w", ErrInvalidInput)
	}
	c.arch, c.std, c.maxRegs, c.flags = st.arch, st.std, st.maxRegs, st.flags
	c.includes, c.preIncl, c.extra = st.includes, st.preIncl, st.extra
	// Final state per macro name, then sorted: macros of different names
	// commute, and a later operation on a name wins.
	// The map is keyed by the macro's name alone: "-DX(a)=a -DX(b)=2"
	// redefines X, so only the last definition counts. The stored Define
	// keeps its parameter list, which is part of the definition.
	final := map[string]Define{}
	for _, d := range st.defines {
		name, err := macroName(d)
		if err != nil {
			return err
		}
		if d.Undef {
			d.Value = ""
		}
		final[name] = d
	}
	c.defines = make([]Define, 0, len(final))
	for _, d := range final {
		c.defines = append(c.defines, d)
	}
	// Sorting by the whole spelling sorts by name: names are distinct, and
	// '(' sorts before every character a name may hold.
	slices.SortFunc(c.defines, func(a, b Define) int { return strings.Compare(a.Name, b.Name) })
	c.needDigest = st.needDigest
	return nil
}

// macroName returns the name of the macro that d defines or undefines: the
// whole of d.Name for an object-like macro, the part before '(' for a
// function-like one ("X(a,b)" names X). As with -D on GCC's and nvcc's
// command lines, a parameter list goes before the '=' and closes the name.
func macroName(d Define) (string, error) {
	spelling := d.Name
	if d.Undef {
		spelling = "-U" + d.Name
	}
	name, params, fn := strings.Cut(d.Name, "(")
	switch {
	case name == "":
		return "", fmt.Errorf("progcache: macro %q has an empty name: want a name such as X or X(a,b): %w", spelling, ErrInvalidInput)
	case strings.ContainsAny(d.Name, "= \t\n\r\v\f"):
		return "", fmt.Errorf("progcache: macro %q contains '=' or blanks in its name: give the name (and any parameter list) before '=': %w", spelling, ErrInvalidInput)
	case strings.ContainsRune(name, ')'):
		return "", fmt.Errorf("progcache: macro %q has ')' in its name: want a name such as X or X(a,b): %w", spelling, ErrInvalidInput)
	case fn && d.Undef:
		return "", fmt.Errorf("progcache: -U%s: an undefinition takes a macro name, not a parameter list: give -U%s: %w", d.Name, name, ErrInvalidInput)
	case fn && (!strings.HasSuffix(params, ")") || strings.ContainsAny(params[:len(params)-1], "()")):
		return "", fmt.Errorf("progcache: macro %q has a malformed parameter list: want NAME(a,b) ending the name, without nested parentheses: %w", spelling, ErrInvalidInput)
	}
	return name, nil
}

// encoder writes the preimage: tags, lengths and counts as uvarints, so the
