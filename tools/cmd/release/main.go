// Command release checks, rehearses and tags the modules of the accelkit
// monorepo.
//
//	release list                      modules, next versions, last tags
//	release check MODULE...           is each module ready to tag? (dry run)
//	release tag [-create] MODULE...   check in dependency order, then print or create <module>/vX.Y.Z tags
//	release apidiff [MODULE...]       compare exported API with the last tag (all released modules by default)
//	release rehearse [MODULE...]      zip every module at its next version into a file:// proxy, then be a fresh consumer of each
//	release proxy-env                 build that proxy and print, for eval, the environment that uses it from any module
//	release alone [flags] MODULE...   build, vet and test modules alone (GOWORK=off) through that proxy
//	release tidy [-check] [MODULE...] go mod tidy alone, through that proxy (all go.work modules by default)
//	release deps                      fail when a module's dependency versions differ inside the workspace and alone
//	release workspace [-check]        no replace in any go.mod; go.work replaces each module at its next version
//	release bump                      set in-repo requirements and go.work to the versions in versions.yaml
//	release steps STEP[,STEP]...      run `go tool task STEP`s (a,b: at once), then print each one's time and the skipped checks
//	release gotest                    filter `go test -json` on stdin into go test's plain output, noting skipped tests
//
// Run at the repository root, usually through the Taskfile
// (`go tool task release:check MODULE=driver`). The rehearsal keeps its
// proxy and module cache in the user cache folder; -dir names another.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/accelkit/accelkit/tools/release"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: release [-C repo] [-dir rehearsal-folder] COMMAND [ARGS]

commands:
  list                             modules, next versions, last tags
  check MODULE...                  is each module ready to tag? (dry run)
  tag [-create] MODULE...          check in dependency order, then print (or create) the tags
  apidiff [MODULE...]              compare exported API with the last tag
  rehearse [MODULE...]             zip modules into a file:// proxy and be a fresh consumer of each
  proxy-env                        build that proxy; print the environment that uses it (eval "$(...)")
  alone [-race] [-cross] [-fuzz D] MODULE...
                                   tidy check, vet, tests, CGO_ENABLED=0 build of modules alone (GOWORK=off)
  tidy [-check] [MODULE...]        go mod tidy alone, through the rehearsal proxy (-check: report only)
  deps                             dependency versions inside the workspace equal those alone
  workspace [-check]               no replace in any go.mod; go.work replaces each module at its next version
  bump                             set in-repo requirements and go.work to versions.yaml
  steps STEP[,STEP]...             run go tool task STEP, one argument after the other (a,b: at once);
                                   then print each step's wall time and what skipped for want of a program
  gotest                           read go test -json on stdin, print go test's plain output, note skipped tests
`

// errUsage marks errors that are the caller's: exit status 2.
var errUsage = errors.New("usage")

func run(args []string, stdout, stderr io.Writer) int {
	err := dispatch(args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "release:", strings.TrimSuffix(err.Error(), ": "+errUsage.Error()))
		fmt.Fprint(stderr, usage)
		return 2
	default:
		fmt.Fprintln(stderr, "release:", err)
		return 1
	}
}

func usageErr(format string, a ...any) error {
	return fmt.Errorf(format+": %w", append(a, errUsage)...)
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fl := flag.NewFlagSet(name, flag.ContinueOnError)
	fl.SetOutput(stderr)
	return fl
}

// parse parses fl; a bad flag is a usage error, -h is not an error.
func parse(fl *flag.FlagSet, args []string) error {
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErr("%s: %v", fl.Name(), err)
	}
	return nil
}

func dispatch(args []string, stdout, stderr io.Writer) error {
	fl := newFlags("release", stderr)
	fl.Usage = func() { fmt.Fprint(stderr, usage) }
	repo := fl.String("C", ".", "repository root")
	dir := fl.String("dir", "", "rehearsal folder (default: accelkit/release-rehearsal in the user cache folder)")
	if err := parse(fl, args); err != nil {
		return err
	}
	if fl.NArg() == 0 {
		return usageErr("no command given")
	}
	cmd, rest := fl.Arg(0), fl.Args()[1:]
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	rehearsal := func() (*release.Rehearsal, error) { return release.NewRehearsal(*repo, *dir) }
	modules := func(sub *flag.FlagSet, atLeastOne bool) ([]string, error) {
		v, err := release.ReadVersions(*repo)
		if err != nil {
			return nil, err
		}
		if sub.NArg() == 0 {
			if atLeastOne {
				return nil, usageErr("%s needs at least one module (released modules: %s)", cmd, strings.Join(release.SortedKeys(v.Modules), " "))
			}
			return release.SortedKeys(v.Modules), nil
		}
		return sub.Args(), nil
	}
	sub := newFlags(cmd, stderr)
	switch cmd {
	case "list":
		if err := parse(sub, rest); err != nil {
			return err
		}
		v, err := release.ReadVersions(*repo)
		if err != nil {
			return err
		}
		for _, m := range release.SortedKeys(v.Modules) {
			last, err := release.LastTag(*repo, m)
			if err != nil {
				return err
			}
			if last == "" {
				last = "(none)"
			}
			fmt.Fprintf(stdout, "%-12s next %-8s last %s\n", m, v.Modules[m], last)
		}
		for _, m := range v.Unreleased {
			fmt.Fprintf(stdout, "%-12s never released\n", m)
		}
		return nil
	case "check", "tag":
		create := sub.Bool("create", false, "create the tags (tag only; default: print what would be tagged)")
		if err := parse(sub, rest); err != nil {
			return err
		}
		if *create && cmd == "check" {
			return usageErr("check never creates tags; use tag -create")
		}
		mods, err := modules(sub, true)
		if err != nil {
			return err
		}
		tags, err := release.Tag(*repo, mods, *create, release.Options{Log: logf, RehearsalDir: *dir})
		verb := "would tag"
		if *create {
			verb = "tagged"
		}
		for _, t := range tags {
			fmt.Fprintln(stdout, verb, t)
		}
		if err == nil && cmd == "check" {
			fmt.Fprintln(stdout, "ready:", strings.Join(mods, " "))
		}
		return err
	case "apidiff":
		if err := parse(sub, rest); err != nil {
			return err
		}
		v, err := release.ReadVersions(*repo)
		if err != nil {
			return err
		}
		mods, err := modules(sub, false)
		if err != nil {
			return err
		}
		r, err := rehearsal()
		if err != nil {
			return err
		}
		defer r.Close()
		failed := 0
		for _, m := range mods {
			next, err := v.Next(m)
			if err != nil {
				return err
			}
			alone, err := r.Alone(m)
			if err != nil {
				return err
			}
			rep, err := release.CompareAPI(*repo, m, next, alone)
			alone.Close()
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, rep)
			if !rep.Allowed {
				failed++
			}
		}
		if failed > 0 {
			return fmt.Errorf("%d module(s) change their API beyond what their next version allows", failed)
		}
		return nil
	case "rehearse":
		if err := parse(sub, rest); err != nil {
			return err
		}
		mods, err := modules(sub, false)
		if err != nil {
			return err
		}
		return rehearse(*repo, *dir, mods, stdout, logf)
	case "proxy-env":
		if err := parse(sub, rest); err != nil {
			return err
		}
		if sub.NArg() > 0 {
			return usageErr("proxy-env takes no arguments (it zips every released module)")
		}
		r, err := rehearsal()
		if err != nil {
			return err
		}
		defer r.Close()
		fmt.Fprint(stdout, r.ShellEnv())
		var mods []string
		for _, m := range release.SortedKeys(r.Zips) {
			mods = append(mods, m+"@"+r.Zips[m].Version)
		}
		logf("proxy-env: the rehearsal proxy %s holds the work tree's %s.\n"+
			"A module's go.sum records these zips' hashes: after the work tree changes, run proxy-env again and drop the github.com/accelkit lines from go.sum.",
			r.ProxyDir(), strings.Join(mods, " "))
		return nil
	case "gotest":
		if err := parse(sub, rest); err != nil {
			return err
		}
		return gotest(os.Stdin, stdout)
	case "steps":
		if err := parse(sub, rest); err != nil {
			return err
		}
		if sub.NArg() == 0 {
			return usageErr("steps needs at least one task name")
		}
		return steps(*repo, sub.Args(), stdout, stderr)
	case "alone":
		race := sub.Bool("race", false, "run the tests with -race")
		cross := sub.Bool("cross", false, "also build and vet (tests included) for darwin and windows with CGO_ENABLED=0")
		fuzz := sub.Duration("fuzz", 0, "run each fuzz target this long (0: none)")
		if err := parse(sub, rest); err != nil {
			return err
		}
		if sub.NArg() == 0 {
			return usageErr("alone needs at least one module folder (e.g. driver, bench/sqlitepeer)")
		}
		r, err := rehearsal()
		if err != nil {
			return err
		}
		defer r.Close()
		failed := 0
		for _, m := range sub.Args() {
			if err := alone(r, m, *race, *cross, *fuzz, logf); err != nil {
				fmt.Fprintf(stderr, "FAIL %s: %v\n", m, err)
				failed++
			}
		}
		if failed > 0 {
			return fmt.Errorf("%d module(s) failed alone", failed)
		}
		return nil
	case "tidy":
		check := sub.Bool("check", false, "report what tidy would change instead of writing it")
		if err := parse(sub, rest); err != nil {
			return err
		}
		mods := sub.Args()
		if len(mods) == 0 {
			var err error
			if mods, err = release.WorkModules(*repo); err != nil {
				return err
			}
		}
		r, err := rehearsal()
		if err != nil {
			return err
		}
		defer r.Close()
		var diffs []string
		for _, m := range mods {
			a, err := r.Alone(m)
			if err != nil {
				return err
			}
			diff, err := a.Tidy(!*check)
			a.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", m, err)
			}
			if diff != "" {
				diffs = append(diffs, diff)
			}
		}
		if len(diffs) > 0 {
			return fmt.Errorf("go mod tidy is not a no-op (run `go tool task tidy`):\n%s", strings.Join(diffs, "\n"))
		}
		return nil
	case "deps":
		if err := parse(sub, rest); err != nil {
			return err
		}
		r, err := rehearsal()
		if err != nil {
			return err
		}
		defer r.Close()
		diffs, err := r.CompareWorkspace()
		if err != nil {
			return err
		}
		if len(diffs) == 0 {
			fmt.Fprintln(stdout, "every workspace module builds alone with the dependency versions the workspace tests")
			return nil
		}
		for _, d := range diffs {
			fmt.Fprintln(stdout, d)
		}
		return fmt.Errorf("%d dependency version(s) differ between the workspace and a module alone: align the requirements (go get PATH@VERSION in the module, then `go tool task tidy`)", len(diffs))
	case "workspace":
		check := sub.Bool("check", false, "report problems instead of rewriting go.work")
		if err := parse(sub, rest); err != nil {
			return err
		}
		v, err := release.ReadVersions(*repo)
		if err != nil {
			return err
		}
		if !*check {
			changed, err := release.SyncWork(*repo, v)
			if changed {
				fmt.Fprintln(stdout, "updated go.work")
			}
			return err
		}
		problems, err := workspaceProblems(*repo, v)
		if err != nil {
			return err
		}
		if len(problems) > 0 {
			return fmt.Errorf("the workspace is not set up for release:\n  - %s", strings.Join(problems, "\n  - "))
		}
		fmt.Fprintln(stdout, "no replace in any go.mod; go.work replaces every released module at its next version")
		return nil
	case "bump":
		if err := parse(sub, rest); err != nil {
			return err
		}
		v, err := release.ReadVersions(*repo)
		if err != nil {
			return err
		}
		mods, err := moduleDirs(*repo)
		if err != nil {
			return err
		}
		for _, m := range mods {
			for _, dep := range release.SortedKeys(v.Modules) {
				changed, err := release.SetRequire(*repo, m, dep, v.Modules[dep])
				if err != nil {
					return err
				}
				if changed {
					fmt.Fprintf(stdout, "%s/go.mod: require %s%s %s\n", m, release.ModulePrefix, dep, v.Modules[dep])
				}
			}
		}
		changed, err := release.SyncWork(*repo, v)
		if changed {
			fmt.Fprintln(stdout, "updated go.work")
		}
		return err
	}
	return usageErr("unknown command %q (valid: list, check, tag, apidiff, rehearse, proxy-env, alone, tidy, deps, workspace, bump, steps, gotest)", cmd)
}

// workspaceProblems lists replace directives in any module's go.mod, in-repo
// requirements at versions that are neither next nor tagged, and go.work
// problems.
func workspaceProblems(repo string, v *release.Versions) ([]string, error) {
	problems, err := release.CheckWork(repo, v)
	if err != nil {
		return nil, err
	}
	mods, err := moduleDirs(repo)
	if err != nil {
		return nil, err
	}
	for _, m := range mods {
		f, err := release.ReadGoMod(repo, m)
		if err != nil {
			return nil, err
		}
		problems = append(problems, release.CheckNoReplace(f, m)...)
		for _, r := range f.Require {
			dep, ok := strings.CutPrefix(r.Mod.Path, release.ModulePrefix)
			if !ok {
				continue
			}
			if v.Modules[dep] == r.Mod.Version {
				continue
			}
			tags, err := release.Tags(repo, dep)
			if err != nil {
				return nil, err
			}
			if !slices.Contains(tags, r.Mod.Version) {
				problems = append(problems, fmt.Sprintf("%s/go.mod requires %s %s, which is neither tagged nor its next version %q (`go tool task release:bump`)", m, r.Mod.Path, r.Mod.Version, v.Modules[dep]))
			}
		}
	}
	return problems, nil
}

// rehearse builds the proxy, checks each module's zip at HEAD carries a
// license, and is a fresh consumer of each module.
func rehearse(repo, dir string, mods []string, stdout io.Writer, logf func(string, ...any)) error {
	start := time.Now()
	r, err := release.NewRehearsal(repo, dir)
	if err != nil {
		return err
	}
	defer r.Close()
	var problems []string
	for _, m := range mods {
		z, ok := r.Zips[m]
		if !ok {
			return usageErr("%s is not a released module (versions.yaml: %s)", m, strings.Join(release.SortedKeys(r.Versions.Modules), " "))
		}
		fmt.Fprintf(stdout, "zip %s@%s: %d files, LICENSE from the %s\n", z.Path, z.Version, z.Files, z.License)
		if err := release.CheckVCSLicense(repo, m, "HEAD"); err != nil {
			problems = append(problems, err.Error())
		}
	}
	for _, m := range mods {
		logf("rehearse: consumer of %s", m)
		rep, err := r.Consumer(m)
		if err != nil {
			return err
		}
		if rep.Built {
			cgo := "none"
			if len(rep.Cgo) > 0 {
				cgo = strings.Join(rep.Cgo, " ")
			}
			fmt.Fprintf(stdout, "\n%s: go.sum records accelkit %s and %d third-party module(s); cgo packages: %s\n", m, strings.Join(rep.Accelkit, ", "), len(rep.Sums), cgo)
		} else {
			fmt.Fprintf(stdout, "\n%s: the consumer did not build (see the problems below)\n", m)
		}
		for _, c := range rep.Commands {
			fmt.Fprintf(stdout, "  go install %s@%s: ok, -h exits 0\n", c, r.Zips[m].Version)
		}
		if rep.Output != "" {
			fmt.Fprintf(stdout, "  README program:\n    %s\n", strings.ReplaceAll(rep.Output, "\n", "\n    "))
		}
		if rep.Stderr > 0 && len(rep.Problems) == 0 {
			fmt.Fprintf(stdout, "    (%d stderr line(s) not shown: it exited 0)\n", rep.Stderr)
		}
		problems = append(problems, rep.Problems...)
	}
	fmt.Fprintf(stdout, "\nrehearsal of %d module(s) in %v; proxy %s (`go tool task proxy-env` prints the environment that uses it from any module)\n", len(mods), time.Since(start).Round(time.Second), r.ProxyDir())
	if len(problems) > 0 {
		return fmt.Errorf("the rehearsal found %d problem(s):\n  - %s", len(problems), strings.Join(problems, "\n  - "))
	}
	return nil
}

// alone runs one module's CI leg: tidy check, vet, tests, the CGO_ENABLED=0
// build, and optionally the darwin/windows cross-build and short fuzz runs.
func alone(r *release.Rehearsal, m string, race, cross bool, fuzz time.Duration, logf func(string, ...any)) error {
	a, err := r.Alone(m)
	if err != nil {
		return err
	}
	defer a.Close()
	logf("== %s: go mod tidy is a no-op", m)
	diff, err := a.Tidy(false)
	if err != nil {
		return err
	}
	if diff != "" {
		return fmt.Errorf("go mod tidy is not a no-op (run `go tool task tidy`):\n%s", diff)
	}
	steps := [][]string{{"vet", "./..."}}
	test := []string{"test", "-count=1"}
	if race {
		test = append(test, "-race")
	}
	steps = append(steps, append(test, "./..."))
	for _, s := range steps {
		logf("== %s: go %s", m, strings.Join(s, " "))
		if out, err := a.Run(nil, s...); err != nil {
			return fmt.Errorf("go %s:\n%s", strings.Join(s, " "), out)
		} else if strings.TrimSpace(out) != "" {
			logf("%s", strings.TrimRight(out, "\n"))
		}
	}
	envs := [][]string{{"CGO_ENABLED=0"}}
	if cross {
		envs = append(envs, []string{"CGO_ENABLED=0", "GOOS=darwin", "GOARCH=arm64"}, []string{"CGO_ENABLED=0", "GOOS=windows", "GOARCH=amd64"})
	}
	for _, env := range envs {
		for _, s := range [][]string{{"build", "./..."}, {"vet", "./..."}} {
			logf("== %s: %s go %s", m, strings.Join(env, " "), strings.Join(s, " "))
			if out, err := a.Run(env, s...); err != nil {
				return fmt.Errorf("%s go %s:\n%s", strings.Join(env, " "), strings.Join(s, " "), out)
			}
		}
	}
	if fuzz > 0 {
		out, err := a.Run(nil, "list", "./...")
		if err != nil {
			return err
		}
		for _, pkg := range strings.Fields(out) {
			list, err := a.Run(nil, "test", "-list", "^Fuzz", pkg)
			if err != nil {
				return err
			}
			for _, f := range strings.Fields(list) {
				if !strings.HasPrefix(f, "Fuzz") {
					continue
				}
				logf("== %s: fuzz %s %s for %v", m, pkg, f, fuzz)
				if out, err := a.Run(nil, "test", "-run", "^$", "-fuzz", "^"+f+"$", "-fuzztime", fuzz.String(), pkg); err != nil {
					return fmt.Errorf("fuzz %s %s:\n%s", pkg, f, out)
				}
			}
		}
	}
	return nil
}

// moduleDirs lists the folders under repo holding a go.mod, relative to
// repo, skipping testdata and hidden folders.
func moduleDirs(repo string) ([]string, error) {
	var mods []string
	err := filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != repo && (strings.HasPrefix(name, ".") || name == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && name == "go.mod" {
			rel, err := filepath.Rel(repo, filepath.Dir(path))
			if err != nil {
				return err
			}
			if rel != "." {
				mods = append(mods, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	return mods, err
}

// gotest filters `go test -json` from in. The tests that skipped go to the
// folder RecordEnv names, for the test command's summary; run alone, it
// prints the summary of absent programs itself.
func gotest(in io.Reader, stdout io.Writer) error {
	skips, failed, err := release.FilterTestJSON(in, stdout)
	if err != nil {
		return err
	}
	if dir := os.Getenv(release.RecordEnv); dir != "" {
		if err := release.WriteSkips(dir, skips); err != nil {
			return err
		}
	} else if absent, _ := release.ClientReport(exec.LookPath, skips); slices.ContainsFunc(absent, func(a release.AbsentClient) bool { return len(a.Skipped) > 0 }) {
		release.WriteClientReport(stdout, absent, nil)
	}
	if failed {
		return errors.New("tests failed")
	}
	return nil
}

// outerGOWORK names the variable through which the Taskfile hands steps
// the user's GOWORK: the release tool itself runs with GOWORK=off, which
// `go tool task` must not inherit.
const outerGOWORK = "ACCELKIT_GOWORK"

// steps runs `go tool task STEP` for each step (comma-separated steps at
// once), then prints each step's wall time, the machine's load and the
// checks that skipped for want of a program, whether the steps passed or
// not.
func steps(repo string, args []string, stdout, stderr io.Writer) error {
	root, err := filepath.Abs(repo)
	if err != nil {
		return err
	}
	var groups [][]string
	for _, a := range args {
		g := strings.Split(a, ",")
		if slices.Contains(g, "") {
			return usageErr("steps: empty task name in %q", a)
		}
		groups = append(groups, g)
	}
	record, err := os.MkdirTemp("", "accelkit-test-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(record)
	env := []string{release.RecordEnv + "=" + record}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOWORK=") && !strings.HasPrefix(kv, release.RecordEnv+"=") {
			env = append(env, kv)
		}
	}
	if w := os.Getenv(outerGOWORK); w != "" {
		env = append(env, "GOWORK="+w)
	}
	loadBefore := release.LoadAverage()
	start := time.Now()
	times, runErr := release.RunSteps(groups, func(step string) *exec.Cmd {
		cmd := exec.Command("go", "tool", "task", step)
		cmd.Dir, cmd.Env = root, env
		return cmd
	}, stdout, stderr)
	total := time.Since(start)
	fmt.Fprintln(stdout)
	release.WriteStepTimes(stdout, times, total)
	fmt.Fprintf(stdout, "  machine: %d CPU(s); load average %s at the start, %s at the end\n", runtime.NumCPU(), loadBefore, release.LoadAverage())
	skips, err := release.ReadSkips(record)
	if err != nil {
		return err
	}
	absent, other := release.ClientReport(exec.LookPath, skips)
	release.WriteClientReport(stdout, absent, other)
	return runErr
}
