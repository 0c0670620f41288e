package release

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// A Rehearsal is a module proxy in a directory (served as GOPROXY=file://…)
// that holds every released module of the work tree at its versions.yaml
// version, zipped the way the module proxy zips a tagged module, and a
// module cache of its own. Resolving in-repo requirements through it is
// what a consumer will get once the tags exist, tested before they do.
//
// The module cache is separate from the user's because the zips change with
// the work tree while their versions do not: in the user's cache a stale
// v0.1.0 would be served forever. Third-party modules still come from the
// user's cache first (its download folder is a valid proxy), then from the
// user's GOPROXY, so a rehearsal costs no extra download once warm.
type Rehearsal struct {
	Repo     string
	Dir      string // the rehearsal's own folder: proxy/, modcache/ and a marker
	Versions *Versions
	Zips     map[string]ZipInfo // module folder -> what was zipped

	userEnv goEnv
	unlock  func()
}

// ZipInfo describes one module zip of a Rehearsal.
type ZipInfo struct {
	Path, Version string
	Files         int
	License       string   // "module" when the module has its own LICENSE, "root" when the repository's was added
	Commands      []string // import paths of its main packages, outside internal/ and testdata/
}

// markerName marks a folder as a rehearsal folder: NewRehearsal only empties
// folders that carry it, so a mistyped -dir never deletes someone's files.
const markerName = ".accelkit-release-rehearsal"

// DefaultRehearsalDir is the folder NewRehearsal uses when given none: the
// user's cache folder, so the module cache survives between runs.
func DefaultRehearsalDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache folder for the rehearsal (%v); pass a folder explicitly", err)
	}
	return filepath.Join(dir, "accelkit", "release-rehearsal"), nil
}

// NewRehearsal prepares dir (created if missing; refused if it holds files
// but no rehearsal marker) and builds the proxy from the work tree at repo.
// Every released module's zip must carry a license file; the repository's
// root LICENSE is added to a module that has none, as the go command does
// for a module in a subdirectory of its repository.
func NewRehearsal(repo, dir string) (*Rehearsal, error) {
	vers, err := ReadVersions(repo)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		if dir, err = DefaultRehearsalDir(); err != nil {
			return nil, err
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if err := claimDir(dir); err != nil {
		return nil, err
	}
	env, err := readGoEnv()
	if err != nil {
		return nil, err
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	r := &Rehearsal{Repo: repo, Dir: dir, Versions: vers, Zips: map[string]ZipInfo{}, userEnv: env, unlock: unlock}
	if err := r.reset(); err != nil {
		r.Close()
		return nil, err
	}
	for _, m := range SortedKeys(vers.Modules) {
		info, err := r.addModule(m, vers.Modules[m])
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("zipping %s: %w", m, err)
		}
		r.Zips[m] = info
	}
	return r, nil
}

// Close releases the rehearsal folder; the proxy and module cache stay for
// the next run.
func (r *Rehearsal) Close() {
	if r.unlock != nil {
		r.unlock()
		r.unlock = nil
	}
}

// claimDir creates dir with the marker, or accepts it when it is empty or
// already carries the marker.
func claimDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("rehearsal folder %s: %w", dir, err)
	case len(entries) > 0:
		if _, err := os.Lstat(filepath.Join(dir, markerName)); err != nil {
			return fmt.Errorf("rehearsal folder %s holds files but no %s marker: it is not a rehearsal folder, so it is left alone; name an empty or new folder", dir, markerName)
		}
		return nil
	}
	return os.WriteFile(filepath.Join(dir, markerName), []byte("accelkit release rehearsal: proxy/ and modcache/ are rebuilt by tools/cmd/release\n"), 0o644)
}

// ProxyDir is the folder of the rehearsal's module proxy, which the go
// command reads as GOPROXY=file://<ProxyDir>.
func (r *Rehearsal) ProxyDir() string    { return filepath.Join(r.Dir, "proxy") }
func (r *Rehearsal) modcacheDir() string { return filepath.Join(r.Dir, "modcache") }

// reset empties the proxy and removes the repository's modules from the
// rehearsal's module cache (their content changes under a fixed version);
// third-party modules stay cached.
func (r *Rehearsal) reset() error {
	stale := []string{
		r.ProxyDir(),
		filepath.Join(r.modcacheDir(), filepath.FromSlash(strings.TrimSuffix(ModulePrefix, "/"))),
		filepath.Join(r.modcacheDir(), "cache", "download", filepath.FromSlash(strings.TrimSuffix(ModulePrefix, "/"))),
	}
	for _, p := range stale {
		if err := removeAllWritable(p); err != nil {
			return err
		}
	}
	return os.MkdirAll(r.ProxyDir(), 0o755)
}

// removeAllWritable removes p like os.RemoveAll, first making folders
// writable: the go command leaves module cache folders read-only.
func removeAllWritable(p string) error {
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o755)
		}
		return nil
	})
	return os.RemoveAll(p)
}

// addModule zips module at version into the proxy.
func (r *Rehearsal) addModule(folder, version string) (ZipInfo, error) {
	f, err := ReadGoMod(r.Repo, folder)
	if err != nil {
		return ZipInfo{}, err
	}
	modPath := f.Module.Mod.Path
	if want := ModulePrefix + folder; modPath != want {
		return ZipInfo{}, fmt.Errorf("%s/go.mod declares module %s, want %s", folder, modPath, want)
	}
	mv := module.Version{Path: modPath, Version: version}
	files, license, err := workTreeFiles(r.Repo, folder)
	if err != nil {
		return ZipInfo{}, err
	}
	if license == "" {
		return ZipInfo{}, fmt.Errorf("no license: neither %s/LICENSE nor the repository's LICENSE exists, and a module without one may not be used", folder)
	}
	esc, err := module.EscapePath(modPath)
	if err != nil {
		return ZipInfo{}, err
	}
	vdir := filepath.Join(r.ProxyDir(), filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return ZipInfo{}, err
	}
	var buf bytes.Buffer
	if err := modzip.Create(&buf, mv, files); err != nil {
		return ZipInfo{}, err
	}
	n, err := zipHasLicense(buf.Bytes(), mv)
	if err != nil {
		return ZipInfo{}, err
	}
	gomod, err := os.ReadFile(filepath.Join(r.Repo, folder, "go.mod"))
	if err != nil {
		return ZipInfo{}, err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	for name, data := range map[string][]byte{
		version + ".zip":  buf.Bytes(),
		version + ".mod":  gomod,
		version + ".info": info,
		"list":            []byte(version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return ZipInfo{}, err
		}
	}
	cmds, err := mainPackages(modPath, files)
	if err != nil {
		return ZipInfo{}, err
	}
	return ZipInfo{Path: modPath, Version: version, Files: n, License: license, Commands: cmds}, nil
}

// mainPackages returns the import paths of the folders of files that hold
// a non-test Go file of package main: the commands a user can `go install
// path@version`. Folders under internal/ or testdata/, and those of nested
// modules, are left out.
func mainPackages(modPath string, files []modzip.File) ([]string, error) {
	nested := map[string]bool{}
	for _, f := range files {
		if dir, base := path.Split(f.Path()); base == "go.mod" && dir != "" {
			nested[strings.TrimSuffix(dir, "/")] = true
		}
	}
	inNested := func(dir string) bool {
		for d := dir; d != "." && d != ""; d = path.Dir(d) {
			if nested[d] {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	var cmds []string
	fset := token.NewFileSet()
	for _, f := range files {
		p := f.Path()
		dir := path.Dir(p)
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || seen[dir] || inNested(dir) ||
			strings.Contains("/"+dir+"/", "/internal/") || strings.Contains("/"+dir+"/", "/testdata/") {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		af, err := parser.ParseFile(fset, p, rc, parser.PackageClauseOnly)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if af.Name.Name == "main" {
			seen[dir] = true
			cmds = append(cmds, path.Join(modPath, dir))
		}
	}
	slices.Sort(cmds)
	return cmds, nil
}

// zipHasLicense returns the number of files in a module zip, or an error
// when it has no LICENSE at its root.
func zipHasLicense(data []byte, mv module.Version) (int, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return 0, err
	}
	want := mv.Path + "@" + mv.Version + "/LICENSE"
	for _, f := range zr.File {
		if f.Name == want {
			return len(zr.File), nil
		}
	}
	return 0, errors.New("the module zip carries no LICENSE file")
}

// workTreeFiles lists the files a commit of the work tree would put in
// module folder's zip: tracked and untracked-but-not-ignored files, as
// `git archive` of that commit would hold them. When the module has no
// LICENSE of its own, the repository's root LICENSE is added, as the go
// command (cmd/go/internal/modfetch) and x/mod/zip.CreateFromVCS do for a
// module in a subdirectory. license says which was used ("" for none).
func workTreeFiles(repo, folder string) (files []modzip.File, license string, err error) {
	out, err := run(filepath.Join(repo, folder), nil, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--full-name", ".")
	if err != nil {
		return nil, "", err
	}
	prefix := folder + "/"
	for _, name := range strings.Split(out, "\x00") {
		rel, ok := strings.CutPrefix(name, prefix)
		if !ok || rel == "" {
			continue
		}
		full := filepath.Join(repo, filepath.FromSlash(name))
		info, err := os.Lstat(full)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			return nil, "", err
		}
		files = append(files, diskFile{rel: rel, full: full, info: info})
		if rel == "LICENSE" {
			license = "module"
		}
	}
	if license == "" {
		full := filepath.Join(repo, "LICENSE")
		if info, err := os.Lstat(full); err == nil && info.Mode().IsRegular() {
			files = append(files, diskFile{rel: "LICENSE", full: full, info: info})
			license = "root"
		}
	}
	return files, license, nil
}

type diskFile struct {
	rel, full string
	info      fs.FileInfo
}

func (f diskFile) Path() string                 { return f.rel }
func (f diskFile) Lstat() (fs.FileInfo, error)  { return f.info, nil }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.full) }

// CheckVCSLicense builds module folder's zip from commit rev with
// x/mod/zip.CreateFromVCS, the way the module proxy builds it from a tag,
// and reports an error when that zip carries no LICENSE.
func CheckVCSLicense(repo, folder, rev string) error {
	var buf bytes.Buffer
	mv := module.Version{Path: ModulePrefix + folder, Version: "v0.0.0-rehearsal"}
	if err := modzip.CreateFromVCS(&buf, mv, repo, rev, folder); err != nil {
		return fmt.Errorf("%s at %s: %w", folder, rev, err)
	}
	if _, err := zipHasLicense(buf.Bytes(), mv); err != nil {
		return fmt.Errorf("%s at %s: %w (commit a LICENSE at the repository root or in %s/)", folder, rev, err, folder)
	}
	return nil
}

// goEnv is the part of the user's go environment a rehearsal builds on.
type goEnv struct {
	GOPROXY, GOMODCACHE, GOFLAGS, GONOSUMDB string
}

func readGoEnv() (goEnv, error) {
	out, err := run("", []string{"GOWORK=off"}, "go", "env", "-json", "GOPROXY", "GOMODCACHE", "GOFLAGS", "GONOSUMDB")
	if err != nil {
		return goEnv{}, err
	}
	var e goEnv
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		return goEnv{}, fmt.Errorf("go env -json: %w", err)
	}
	return e, nil
}

// fileURL is dir as a file:// URL the go command accepts in GOPROXY.
func fileURL(dir string) string {
	p := filepath.ToSlash(dir)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // C:/x -> /C:/x
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}

// Env is the environment, added to the process's, under which the go
// command resolves the repository's modules through the rehearsal: no
// workspace, the rehearsal proxy first, its own module cache, and no
// checksum database lookups for the repository's modules (the sum database
// knows only real tags).
func (r *Rehearsal) Env() []string {
	proxy := []string{fileURL(r.ProxyDir())}
	if r.userEnv.GOMODCACHE != "" {
		proxy = append(proxy, fileURL(filepath.Join(r.userEnv.GOMODCACHE, "cache", "download")))
	}
	if r.userEnv.GOPROXY != "" {
		proxy = append(proxy, r.userEnv.GOPROXY)
	}
	nosum := strings.TrimSuffix(ModulePrefix, "/")
	if r.userEnv.GONOSUMDB != "" {
		nosum = r.userEnv.GONOSUMDB + "," + nosum
	}
	// The go command indexes module cache folders by path alone, trusting
	// that a module version never changes; here it does, between runs.
	godebug := "goindex=0"
	if d := os.Getenv("GODEBUG"); d != "" {
		godebug = d + "," + godebug
	}
	return []string{
		"GODEBUG=" + godebug,
		"GOWORK=off",
		"GOPROXY=" + strings.Join(proxy, ","),
		"GOMODCACHE=" + r.modcacheDir(),
		"GONOSUMDB=" + nosum,
		// GOPRIVATE or GONOPROXY covering the repository would send its
		// modules around the rehearsal proxy.
		"GOPRIVATE=",
		"GONOPROXY=",
		"GOFLAGS=" + strings.TrimSpace(r.userEnv.GOFLAGS+" -modcacherw"),
	}
}

// inRepoSumLine reports whether a go.sum line is for one of the
// repository's modules: those lines are never committed, because an
// untagged module's hash changes with every commit.
func inRepoSumLine(line string) bool {
	return strings.HasPrefix(line, ModulePrefix)
}

// ShellEnv is Env as POSIX shell `export` lines, for `eval "$(...)"`: a
// module anywhere on the machine then resolves the repository's modules
// through this rehearsal, as it will through the module proxy once they are
// tagged. The module cache is the rehearsal's own, so the untagged zips
// never reach the user's cache, where a stale v0.1.0 would outlive the
// real tag and fail its checksum.
func (r *Rehearsal) ShellEnv() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# the accelkit release rehearsal's proxy, %q: run in a subshell, or a shell you then close\n", r.ProxyDir())
	for _, kv := range r.Env() {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(v))
	}
	return b.String()
}

// shellQuote quotes s for a POSIX shell: in single quotes, each quote in s
// closing the string, escaped, and reopening it.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
