package tfcompat

// Detection of an installed TensorFlow.
//
// pip records each installed distribution in <site-packages>/<name>-
// <version>.dist-info/METADATA, an RFC 822-style header block whose Name:
// and Version: fields identify it. TensorFlow ships under several
// distribution names (CPU-only, vendor and nightly builds), while companions
// such as tensorflow-estimator, tensorflow-io or tensorboard share the
// prefix without being TensorFlow; matching is therefore against an exact
// list of build names after PEP 503 normalisation, never by prefix.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Errors returned (wrapped) by DetectTF and ReadMetadata.
var (
	ErrNotFound         = errors.New("tfcompat: no tensorflow distribution found")
	ErrConflict         = errors.New("tfcompat: several tensorflow distributions found")
	ErrMetadata         = errors.New("tfcompat: malformed METADATA")
	errMetadataTooLarge = errors.New("header block larger than the limit")
)

// maxMetadataHeader bounds how much of a METADATA file is read: the header
// block is a few KiB; the body (the long description) is never needed.
const maxMetadataHeader = 1 << 20

// TFBuilds lists the PEP 503-normalised distribution names of TensorFlow
// builds. Names were taken from the builds the issue lists and from
// TensorFlow's install documentation as remembered, not re-checked on PyPI
// in this session. Callers may pass their own list to DetectTFBuilds.
var TFBuilds = []string{
	"tensorflow",
	"tensorflow-cpu",
	"tensorflow-gpu",
	"tensorflow-intel",
	"tensorflow-macos",
	"tensorflow-aarch64",
	"tensorflow-cpu-aws",
	"tensorflow-rocm",
	"tf-nightly",
	"tf-nightly-cpu",
	"tf-nightly-gpu",
	"tf-nightly-macos",
	"intel-tensorflow",
	"intel-tensorflow-avx512",
}

// NormalizeName applies PEP 503: lowercase, and every run of '-', '_' and
// '.' becomes a single '-'.
func NormalizeName(name string) string {
	var b strings.Builder
	inRun := false
	for _, r := range strings.ToLower(strings.TrimSpace(name)) {
		if r == '-' || r == '_' || r == '.' {
			if !inRun {
				b.WriteByte('-')
			}
			inRun = true
			continue
		}
		inRun = false
		b.WriteRune(r)
	}
	return b.String()
}

// Metadata is what DetectTF reads from a METADATA file.
type Metadata struct {
	Name    string
	Version string
}

// ReadMetadata reads the header block of a core-metadata file (up to the
// first blank line) and returns its Name and Version. A missing field,
// a header block over 1 MiB, or a line that is not "Key: value" or a
// continuation is an error wrapping ErrMetadata.
func ReadMetadata(r io.Reader) (Metadata, error) {
	var md Metadata
	br := bufio.NewReader(io.LimitReader(r, maxMetadataHeader+1))
	read := 0
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadString('\n')
		read += len(line)
		if read > maxMetadataHeader {
			return Metadata{}, fmt.Errorf("%w: %w (%d bytes)", ErrMetadata, errMetadataTooLarge, maxMetadataHeader)
		}
		trimmed := strings.TrimRight(line, "\r\n")
		if trimmed == "" {
			break // end of headers (or of file)
		}
		if trimmed[0] == ' ' || trimmed[0] == '\t' {
			// continuation of the previous field
		} else {
			key, val, ok := strings.Cut(trimmed, ":")
			if !ok {
				return Metadata{}, fmt.Errorf("%w: line %d %q is not \"Key: value\"", ErrMetadata, lineNo, truncate(trimmed, 60))
			}
			val = strings.TrimSpace(val)
			switch strings.ToLower(key) {
			case "name":
				if md.Name == "" {
					md.Name = val
				}
			case "version":
				if md.Version == "" {
					md.Version = val
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return Metadata{}, fmt.Errorf("%w: %w", ErrMetadata, err)
		}
	}
	switch {
	case md.Name == "":
		return Metadata{}, fmt.Errorf("%w: no Name: field", ErrMetadata)
	case md.Version == "":
		return Metadata{}, fmt.Errorf("%w: no Version: field", ErrMetadata)
	}
	return md, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Install is a detected TensorFlow distribution.
type Install struct {
	Name     string  // the Name: field as written
	Version  Version // parsed Version: field
	Metadata string  // path of the METADATA file
}

// DetectTF looks for a TensorFlow build in sitePackagesDir using TFBuilds.
func DetectTF(sitePackagesDir string) (Install, error) {
	return DetectTFBuilds(sitePackagesDir, TFBuilds)
}

// DetectTFBuilds reads every *.dist-info/METADATA under sitePackagesDir and
// returns the one distribution whose normalised Name: is in builds.
//
// A dist-info directory named like a build whose METADATA is missing,
// malformed, or has an unparsable version is an error naming the file;
// other distributions' broken METADATA is ignored. No match is ErrNotFound;
// matches with different names or versions are ErrConflict listing them.
func DetectTFBuilds(sitePackagesDir string, builds []string) (Install, error) {
	norm := make([]string, len(builds))
	for i, b := range builds {
		norm[i] = NormalizeName(b)
	}
	isBuild := func(name string) bool { return slices.Contains(norm, NormalizeName(name)) }

	entries, err := os.ReadDir(sitePackagesDir) // sorted by name
	if err != nil {
		return Install{}, fmt.Errorf("tfcompat: site-packages directory: %w", err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && strings.HasSuffix(e.Name(), ".dist-info") {
			dirs = append(dirs, filepath.Join(sitePackagesDir, e.Name()))
		}
	}
	var found []Install
	for _, dir := range dirs {
		base := strings.TrimSuffix(filepath.Base(dir), ".dist-info")
		distName, _, _ := strings.Cut(base, "-") // wheel names escape '-' in the name as '_'
		namedLikeTF := isBuild(distName)
		file := filepath.Join(dir, "METADATA")
		md, err := readMetadataFile(file)
		if err != nil {
			if namedLikeTF {
				return Install{}, fmt.Errorf("%s: %w", file, err)
			}
			continue
		}
		if !isBuild(md.Name) {
			continue
		}
		v, err := ParseVersion(md.Version)
		if err != nil {
			return Install{}, fmt.Errorf("%s: %w", file, err)
		}
		found = append(found, Install{Name: md.Name, Version: v, Metadata: file})
	}
	switch len(found) {
	case 0:
		return Install{}, fmt.Errorf("%w in %s (looked for %s)", ErrNotFound, sitePackagesDir, strings.Join(norm, ", "))
	case 1:
		return found[0], nil
	}
	first := found[0]
	for _, f := range found[1:] {
		if NormalizeName(f.Name) != NormalizeName(first.Name) || Compare(f.Version, first.Version) != 0 {
			var list []string
			for _, g := range found {
				list = append(list, fmt.Sprintf("%s %s (%s)", g.Name, g.Version, g.Metadata))
			}
			return Install{}, fmt.Errorf("%w in %s: %s; uninstall all but one", ErrConflict, sitePackagesDir, strings.Join(list, "; "))
		}
	}
	return first, nil
}

func readMetadataFile(path string) (Metadata, error) {
	f, err := os.Open(path)
	if err != nil {
		return Metadata{}, fmt.Errorf("%w: %w", ErrMetadata, err)
	}
	defer f.Close()
	return ReadMetadata(f)
}
