package progcache

// Key inputs: what names a compilation, and canonicalize, which checks it
// and normalises everything but the options (key_options.go) into the
// canonical form that key_preimage.go encodes.

import (
	"fmt"
	"slices"
	"strings"
)

// Source is one source input of a compilation.
type Source struct {
	// Name is the source's name as the compiler sees it (NVRTC's program
	// name). A name with a directory part makes the compiler search that
	// directory for quoted includes, an input the key cannot see, so it
	// needs KeyInput.ExtraDigest.
	Name string
	// Code is the source text or IR bytes.
	Code []byte
}

// Component is one piece of the toolchain that produced the object, such as
// the compiler ("nvrtc", "12.8") or the driver ("cuda-driver", "13.0").
type Component struct {
	Name    string
	Version string
}

// Define is one command-line macro operation: a definition (-DName=Value)
// or, with Undef set, an undefinition (-UName). "-DX" is the same as
// Define{Name: "X", Value: "1"}. A function-like macro carries its
// parameter list in Name: "-DX(a,b)=a+b" is Define{Name: "X(a,b)", Value:
// "a+b"}, and it defines X, so it replaces an earlier definition of X
// whatever that one's parameters were.
type Define struct {
	Name  string
	Value string
	Undef bool
}

// Options are the compile options, typed so that equal meanings give equal
// keys. The zero value means "no options".
type Options struct {
	// Arch is the target architecture, e.g. "sm_90" (-arch,
	// --gpu-architecture).
	Arch string
	// Std is the language dialect, e.g. "c++17" (-std).
	Std string
	// Defines in command-line order; a later operation on a name overrides
	// an earlier one (-D, --define-macro, -U, --undefine-macro).
	Defines []Define
	// IncludePaths in search order (-I, --include-path). Needs ExtraDigest.
	IncludePaths []string
	// PreIncludes in inclusion order (-include, --pre-include). Needs
	// ExtraDigest.
	PreIncludes []string
	// Debug generates device debug information (-G, --device-debug).
	Debug bool
	// LineInfo generates line-number information (-lineinfo,
	// --generate-line-info).
	LineInfo bool
	// FastMath enables fast math (-use_fast_math, --use_fast_math).
	FastMath bool
	// Relocatable generates relocatable device code (-rdc=true,
	// --relocatable-device-code=true, -dc).
	Relocatable bool
	// MaxRegisters limits registers per thread (-maxrregcount); 0 means
	// unset.
	MaxRegisters int
	// Extra holds raw flags, one command-line argument per element. Flags
	// that a field above covers are parsed into it. A recognised flag that
	// takes a value consumes it (the next element, or after '='), so the
	// value of a pass-through flag (-Xptxas, -Xcompiler, -Xnvlink,
	// -Xlinker, -Xarchive, -Xcudafe, -Xfatbin and their long names) is
	// never read as a flag. Other flags are hashed verbatim and in order.
	// Flags that read files the key cannot see (-I, -isystem, -include,
	// -optf, -ldir, PCH use, and include options inside -Xcompiler) need
	// ExtraDigest; flags with side outputs (-keep, -save-temps, -M, -MD,
	// -MF, -time, PCH creation, ...) are refused.
	Extra []string
}

// KeyInput is everything that names a compiled program. See MakeKey.
type KeyInput struct {
	// Sources in order; at least one. Their order is kept.
	Sources []Source
	// CodeType is the input language, e.g. "c++", "ptx", "nvvm".
	CodeType string
	// Target is the output kind, e.g. "cubin", "ptx", "ltoir".
	Target string
	// Options are the compile options.
	Options Options
	// NameExpressions are the names looked up after compiling (NVRTC name
	// expressions). Their order and repeats do not matter.
	NameExpressions []string
	// Toolchain names the compiler, driver and anything else whose version
	// changes the output. Order does not matter; names must be unique.
	Toolchain []Component
	// ExtraDigest is a caller-made fingerprint of inputs the key cannot
	// see: included headers, pre-included files, precompiled headers. It
	// is required when the options pull in such inputs. An empty slice
	// counts as none.
	ExtraDigest []byte
	// Digest is the hash of the key: zero or DigestSHA256 for SHA-256 (the
	// default), or DigestBlake2b256. The kind is part of the preimage, so
	// keys of different kinds never collide.
	Digest DigestKind
}

// canonicalize checks in and returns its canonical form: name expressions
// sorted and deduplicated, toolchain components sorted by name, and the
// options normalised by parseOptions.
func canonicalize(in KeyInput) (*canonical, error) {
	d, err := in.Digest.resolve("KeyInput.Digest", ErrInvalidInput)
	if err != nil {
		return nil, err
	}
	c := &canonical{digest: d}
	if len(in.Sources) == 0 {
		return nil, fmt.Errorf("progcache: no sources: give at least one Source: %w", ErrInvalidInput)
	}
	if in.CodeType == "" {
		return nil, fmt.Errorf("progcache: empty CodeType: name the input language, e.g. \"c++\", \"ptx\", \"nvvm\": %w", ErrInvalidInput)
	}
	if in.Target == "" {
		return nil, fmt.Errorf("progcache: empty Target: name the output kind, e.g. \"cubin\", \"ptx\", \"ltoir\": %w", ErrInvalidInput)
	}
	c.sources, c.codeType, c.target = in.Sources, in.CodeType, in.Target
	hasExtra := len(in.ExtraDigest) > 0
	for _, s := range in.Sources {
		if strings.ContainsAny(s.Name, `/\`) && !hasExtra {
			return nil, fmt.Errorf("progcache: source name %q has a directory part, so the compiler searches that directory for includes the key cannot see: pass an ExtraDigest over them, or use a bare name: %w", s.Name, ErrNeedsExtraDigest)
		}
	}
	if err := c.parseOptions(in.Options); err != nil {
		return nil, err
	}
	if c.needDigest != "" && !hasExtra {
		return nil, fmt.Errorf("progcache: %s: pass an ExtraDigest that fingerprints those files, or drop the option: %w", c.needDigest, ErrNeedsExtraDigest)
	}
	c.names = slices.Clone(in.NameExpressions)
	slices.Sort(c.names)
	c.names = slices.Compact(c.names)
	c.toolchain = slices.Clone(in.Toolchain)
	slices.SortFunc(c.toolchain, func(a, b Component) int { return strings.Compare(a.Name, b.Name) })
	for i, t := range c.toolchain {
		if t.Name == "" {
			return nil, fmt.Errorf("progcache: toolchain component with version %q has no name: %w", t.Version, ErrInvalidInput)
		}
		if i > 0 && c.toolchain[i-1].Name == t.Name {
			return nil, fmt.Errorf("progcache: toolchain component %q given twice: give each component once: %w", t.Name, ErrInvalidInput)
		}
	}
	c.extraDig = in.ExtraDigest
	return c, nil
}
