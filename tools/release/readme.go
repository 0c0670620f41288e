package release

import (
	"bufio"
	"fmt"
	"slices"
	"strings"
)

// ReadmeProgram returns the consumer program of a module README: the first
// fenced code block whose info string is exactly "go" and whose body starts
// with "package main". ok is false when there is none.
func ReadmeProgram(readme string) (program string, ok bool) {
	sc := bufio.NewScanner(strings.NewReader(readme))
	sc.Buffer(nil, 1<<20)
	var (
		in, isGo bool
		fence    string
		body     strings.Builder
	)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if !in {
			if f, info, ok := openFence(trimmed); ok {
				in, fence, isGo = true, f, info == "go"
				body.Reset()
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
			in = false
			if src := body.String(); isGo && strings.HasPrefix(strings.TrimSpace(src), "package main") {
				return src, true
			}
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	return "", false
}

// openFence recognises a CommonMark code fence opener (``` or ~~~, three or
// more) and returns the fence and its info string.
func openFence(line string) (fence, info string, ok bool) {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n >= 3 {
			return line[:n], strings.TrimSpace(line[n:]), true
		}
	}
	return "", "", false
}

// SumHeading is the heading text under which a module README names what a
// consumer's go.sum holds; the rehearsal checks the list under it.
const SumHeading = "What a consumer's go.sum holds"

// ReadmeSums returns the "module version" entries listed under the
// SumHeading heading of a README (list items like "- `golang.org/x/sys` v0.49.0"),
// and whether the heading exists. "none" as the only item means an empty
// list.
func ReadmeSums(readme string) (entries []string, found bool) {
	lines := strings.Split(readme, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "#") || !strings.Contains(l, SumHeading) {
			continue
		}
		found = true
		for _, item := range lines[i+1:] {
			if strings.HasPrefix(item, "#") {
				break
			}
			rest, ok := strings.CutPrefix(strings.TrimSpace(item), "- ")
			if !ok {
				continue
			}
			f := strings.Fields(strings.ReplaceAll(rest, "`", ""))
			switch {
			case len(f) == 1 && f[0] == "none":
			case len(f) >= 2:
				entries = append(entries, f[0]+" "+f[1])
			}
		}
		break
	}
	slices.Sort(entries)
	return entries, found
}

// SumModules returns the "module version" entries of a go.sum whose code a
// build downloads (lines for the zip, not the go.mod alone), leaving out the
// repository's own modules.
func SumModules(gosum string) []string {
	_, third := sumZips(gosum)
	return third
}

// sumZips splits the "module version" entries of a go.sum's zip lines (not
// the go.mod-only ones) into the repository's own modules, as folders, and
// the rest; both sorted, without repeats.
func sumZips(gosum string) (inRepo, third []string) {
	for _, line := range strings.Split(gosum, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || strings.HasSuffix(f[1], "/go.mod") {
			continue
		}
		if folder := folderOf(f[0]); folder != "" {
			inRepo = append(inRepo, folder)
		} else {
			third = append(third, f[0]+" "+f[1])
		}
	}
	slices.Sort(inRepo)
	slices.Sort(third)
	return slices.Compact(inRepo), slices.Compact(third)
}

// SumSection formats entries as the README section the rehearsal expects.
func SumSection(entries []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", SumHeading)
	if len(entries) == 0 {
		b.WriteString("- none\n")
	}
	for _, e := range entries {
		mod, ver, _ := strings.Cut(e, " ")
		fmt.Fprintf(&b, "- `%s` %s\n", mod, ver)
	}
	return b.String()
}
