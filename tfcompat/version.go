package tfcompat

// This file parses and orders TensorFlow release versions.
//
// TensorFlow publishes its wheels with PEP 440 version strings, so ordering
// follows PEP 440 rather than semver: for one release, X.devN sorts below
// X's pre-releases, which sort below X, which sorts below X.postN; a local
// label (+nv23.08) sorts above the same version without one. Only the
// subset of PEP 440 that TensorFlow builds use is accepted: no epochs, and
// the pre-release spellings a, alpha, b, beta, c, rc (normalised to a, b,
// rc). Separators "-", "_" and "." before pre, post and dev segments are
// accepted as PEP 440's normalisation allows ("2.17.0-rc0").

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalidVersion is returned (wrapped) by ParseVersion for a string that
// is not a version in an accepted form.
var ErrInvalidVersion = errors.New("tfcompat: invalid version")

// acceptedForms lists the version forms ParseVersion accepts; error messages
// quote it so a user can see what was expected.
const acceptedForms = `accepted forms: 2.12, 2.6.1, 2.16.0rc1, 2.17.0-rc0, 2.15.0.dev20240101, 2.13.0+nv23.08, 2.6.1.post1`

// maxVersionLen bounds the input ParseVersion looks at; no published
// version comes close, and the bound keeps hostile input cheap.
const maxVersionLen = 256

// maxReleaseParts bounds the number of dot-separated release components.
const maxReleaseParts = 8

// Phase is a pre-release phase.
type Phase int8

// Pre-release phases in PEP 440 order; PhaseNone marks a version that is
// not a pre-release.
const (
	PhaseNone  Phase = iota
	PhaseAlpha       // a, alpha
	PhaseBeta        // b, beta
	PhaseRC          // rc, c
)

func (p Phase) String() string {
	switch p {
	case PhaseAlpha:
		return "a"
	case PhaseBeta:
		return "b"
	case PhaseRC:
		return "rc"
	}
	return ""
}

// Version is a parsed TensorFlow version. The zero Version is not valid;
// obtain one from ParseVersion or MustParseVersion. Version is a value type
// and safe for concurrent use.
type Version struct {
	// Release holds the numeric components, e.g. [2 16 0]; at least one.
	Release []int
	// Pre is the pre-release phase and PreN its number (2.16.0rc1: PhaseRC, 1).
	Pre  Phase
	PreN int
	// Post is the post-release number; HasPost tells whether there is one.
	Post    int
	HasPost bool
	// Dev is the development release number; HasDev tells whether there is one.
	Dev    int
	HasDev bool
	// Local is the local label after '+', lowercased, e.g. "nv23.08".
	Local string
}

// ParseVersion parses a TensorFlow version string such as "2.6.1",
// "2.16.0rc1", "2.17.0-rc0", "2.15.0.dev20240101", "2.13.0+nv23.08" or
// "2.12". A leading "v" and surrounding spaces are ignored. Malformed input
// yields an error wrapping ErrInvalidVersion that lists the accepted forms.
func ParseVersion(s string) (Version, error) {
	orig := s
	if len(s) > maxVersionLen {
		return Version{}, fmt.Errorf("%w: %d bytes is longer than the %d allowed; %s", ErrInvalidVersion, len(s), maxVersionLen, acceptedForms)
	}
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, "v")
	bad := func(why string) (Version, error) {
		return Version{}, fmt.Errorf("%w %q: %s; %s", ErrInvalidVersion, orig, why, acceptedForms)
	}
	var v Version
	if i := strings.IndexByte(s, '+'); i >= 0 {
		local := s[i+1:]
		s = s[:i]
		if local == "" {
			return bad("empty local label after '+'")
		}
		for _, seg := range strings.FieldsFunc(local, isLocalSep) {
			if !isAlnum(seg) {
				return bad("local label may hold only letters, digits and . - _")
			}
		}
		if strings.Trim(local, ".-_") != local || strings.ContainsAny(local, "+") || hasEmptyLocalSeg(local) {
			return bad("local label segments must be non-empty")
		}
		v.Local = strings.Map(func(r rune) rune {
			if r == '-' || r == '_' {
				return '.'
			}
			return r
		}, local)
	}
	// Release: digits and dots up to the first non-release character.
	end := 0
	for end < len(s) && (isDigit(s[end]) || (s[end] == '.' && end+1 < len(s) && isDigit(s[end+1]))) {
		end++
	}
	if end == 0 {
		return bad("missing release number")
	}
	for _, p := range strings.Split(s[:end], ".") {
		n, err := atoi(p)
		if err != nil {
			return bad("release component " + strconv.Quote(p) + " is not a number")
		}
		v.Release = append(v.Release, n)
		if len(v.Release) > maxReleaseParts {
			return bad(fmt.Sprintf("more than %d release components", maxReleaseParts))
		}
	}
	rest := s[end:]
	// Pre-release.
	if pre, n, tail, ok := takeSegment(rest, []string{"alpha", "beta", "rc", "a", "b", "c"}); ok {
		switch pre {
		case "a", "alpha":
			v.Pre = PhaseAlpha
		case "b", "beta":
			v.Pre = PhaseBeta
		default:
			v.Pre = PhaseRC
		}
		if n < 0 {
			n = 0
		}
		v.PreN, rest = n, tail
	}
	if _, n, tail, ok := takeSegment(rest, []string{"post"}); ok {
		if n < 0 {
			n = 0
		}
		v.Post, v.HasPost, rest = n, true, tail
	}
	if _, n, tail, ok := takeSegment(rest, []string{"dev"}); ok {
		if n < 0 {
			n = 0
		}
		v.Dev, v.HasDev, rest = n, true, tail
	}
	if rest != "" {
		return bad("unexpected " + strconv.Quote(rest))
	}
	return v, nil
}

// MustParseVersion is ParseVersion for constants known to be valid; it
// panics on error and is meant for package-level tables and tests.
func MustParseVersion(s string) Version {
	v, err := ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

// takeSegment consumes an optional separator, one of the words, and an
// optional number (with its own optional separator). n is -1 when absent.
func takeSegment(s string, words []string) (word string, n int, rest string, ok bool) {
	t := s
	if t != "" && (t[0] == '.' || t[0] == '-' || t[0] == '_') {
		t = t[1:]
	}
	for _, w := range words {
		if strings.HasPrefix(t, w) {
			word, t = w, t[len(w):]
			break
		}
	}
	if word == "" {
		return "", 0, s, false
	}
	u := t
	if u != "" && (u[0] == '.' || u[0] == '-' || u[0] == '_') {
		u = u[1:]
	}
	j := 0
	for j < len(u) && isDigit(u[j]) {
		j++
	}
	if j == 0 {
		return word, -1, t, true
	}
	num, err := atoi(u[:j])
	if err != nil {
		return "", 0, s, false
	}
	return word, num, u[j:], true
}

// atoi parses a non-negative decimal that fits an int32-sized budget of
// digits (dev numbers such as 20240101 are the largest seen).
func atoi(s string) (int, error) {
	if s == "" || len(s) > 18 {
		return 0, errors.New("bad number")
	}
	return strconv.Atoi(s)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isLocalSep(r rune) bool { return r == '.' || r == '-' || r == '_' }

func hasEmptyLocalSeg(s string) bool {
	prevSep := true
	for i := 0; i < len(s); i++ {
		sep := s[i] == '.' || s[i] == '-' || s[i] == '_'
		if sep && prevSep {
			return true
		}
		prevSep = sep
	}
	return prevSep
}

func isAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isDigit(c) && (c < 'a' || c > 'z') {
			return false
		}
	}
	return s != ""
}

// IsPreRelease reports whether v is a pre-release or a development release.
func (v Version) IsPreRelease() bool { return v.Pre != PhaseNone || v.HasDev }

// String renders v in normalised PEP 440 form, e.g. "2.17.0rc0".
func (v Version) String() string {
	var b strings.Builder
	for i, n := range v.Release {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.Itoa(n))
	}
	if v.Pre != PhaseNone {
		b.WriteString(v.Pre.String())
		b.WriteString(strconv.Itoa(v.PreN))
	}
	if v.HasPost {
		b.WriteString(".post")
		b.WriteString(strconv.Itoa(v.Post))
	}
	if v.HasDev {
		b.WriteString(".dev")
		b.WriteString(strconv.Itoa(v.Dev))
	}
	if v.Local != "" {
		b.WriteByte('+')
		b.WriteString(v.Local)
	}
	return b.String()
}

// Compare orders a and b by PEP 440 and returns -1, 0 or +1. Release
// components compare with trailing zeros ignored, so 2.12 equals 2.12.0.
func Compare(a, b Version) int {
	if c := compareRelease(a.Release, b.Release); c != 0 {
		return c
	}
	if c := cmp.Compare(preKey(a), preKey(b)); c != 0 {
		return c
	}
	if a.Pre != PhaseNone && b.Pre != PhaseNone {
		if c := cmp.Compare(a.PreN, b.PreN); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(postKey(a), postKey(b)); c != 0 {
		return c
	}
	if c := cmp.Compare(devKey(a), devKey(b)); c != 0 {
		return c
	}
	return compareLocal(a.Local, b.Local)
}

// Keys with sentinels for "absent", as PEP 440 defines them.
const (
	keyNegInf = -1 << 62
	keyPosInf = 1 << 62
)

func preKey(v Version) int {
	switch {
	case v.Pre != PhaseNone:
		return int(v.Pre)
	case v.HasDev && !v.HasPost:
		return keyNegInf // X.devN sorts before X's pre-releases
	default:
		return keyPosInf
	}
}

func postKey(v Version) int {
	if v.HasPost {
		return v.Post
	}
	return keyNegInf
}

func devKey(v Version) int {
	if v.HasDev {
		return v.Dev
	}
	return keyPosInf
}

func compareRelease(a, b []int) int {
	n := max(len(a), len(b))
	for i := range n {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
	}
	return 0
}

// compareLocal follows PEP 440: no label < any label; segments compare
// numerically when both are numbers, a number beats a string, strings
// compare lexically, and a shorter matching prefix sorts first.
func compareLocal(a, b string) int {
	if a == b {
		return 0
	}
	if a == "" {
		return -1
	}
	if b == "" {
		return 1
	}
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, xerr := strconv.Atoi(as[i])
		y, yerr := strconv.Atoi(bs[i])
		switch {
		case xerr == nil && yerr == nil:
			if c := cmp.Compare(x, y); c != 0 {
				return c
			}
		case xerr == nil:
			return 1
		case yerr == nil:
			return -1
		default:
			if c := strings.Compare(as[i], bs[i]); c != 0 {
				return c
			}
		}
	}
	return cmp.Compare(len(as), len(bs))
}
