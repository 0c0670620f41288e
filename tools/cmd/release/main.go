// Command release checks and tags the modules of the accelkit monorepo.
//
//	release list                     modules, next versions, last tags
//	release check MODULE...          is each module ready to tag? (dry run)
//	release tag [-create] MODULE...  check in dependency order, then print or create <module>/vX.Y.Z tags
//	release apidiff [MODULE...]      compare exported API with the last tag (all released modules by default)
//	release replaces [-check]        keep each in-repo requirement replaced by its folder
//	release bump                     set in-repo requirements to the versions in versions.yaml
//
// Run at the repository root, usually through the Taskfile
// (`go tool task release:check MODULE=driver`).
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/accelkit/accelkit/tools/release"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

const usage = "usage: release [-C repo] list | check MODULE... | tag [-create] MODULE... | apidiff [MODULE...] | replaces [-check] | bump"

func run(args []string) error {
	fl := flag.NewFlagSet("release", flag.ContinueOnError)
	repo := fl.String("C", ".", "repository root")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() == 0 {
		return fmt.Errorf("%s", usage)
	}
	cmd, rest := fl.Arg(0), fl.Args()[1:]
	logf := func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
	switch cmd {
	case "list":
		v, err := release.ReadVersions(*repo)
		if err != nil {
			return err
		}
		mods := sortedKeys(v.Modules)
		for _, m := range mods {
			last, err := release.LastTag(*repo, m)
			if err != nil {
				return err
			}
			if last == "" {
				last = "(none)"
			}
			fmt.Printf("%-12s next %-8s last %s\n", m, v.Modules[m], last)
		}
		for _, m := range v.Unreleased {
			fmt.Printf("%-12s never released\n", m)
		}
		return nil
	case "check":
		if len(rest) == 0 {
			return fmt.Errorf("check needs a module; %s", usage)
		}
		_, err := release.Tag(*repo, rest, false, release.Options{Log: logf})
		if err == nil {
			fmt.Println("ready:", strings.Join(rest, " "))
		}
		return err
	case "tag":
		tf := flag.NewFlagSet("tag", flag.ContinueOnError)
		create := tf.Bool("create", false, "create the tags (default: print what would be tagged)")
		if err := tf.Parse(rest); err != nil {
			return err
		}
		if tf.NArg() == 0 {
			return fmt.Errorf("tag needs a module; %s", usage)
		}
		tags, err := release.Tag(*repo, tf.Args(), *create, release.Options{Log: logf})
		verb := "would tag"
		if *create {
			verb = "tagged"
		}
		for _, t := range tags {
			fmt.Println(verb, t)
		}
		return err
	case "apidiff":
		v, err := release.ReadVersions(*repo)
		if err != nil {
			return err
		}
		mods := rest
		if len(mods) == 0 {
			mods = sortedKeys(v.Modules)
		}
		failed := 0
		for _, m := range mods {
			next, err := v.Next(m)
			if err != nil {
				return err
			}
			rep, err := release.CompareAPI(*repo, m, next)
			if err != nil {
				return err
			}
			fmt.Println(rep)
			if !rep.Allowed {
				failed++
			}
		}
		if failed > 0 {
			return fmt.Errorf("%d module(s) change their API beyond what their next version allows", failed)
		}
		return nil
	case "replaces":
		rf := flag.NewFlagSet("replaces", flag.ContinueOnError)
		check := rf.Bool("check", false, "fail instead of rewriting when a replace is missing or wrong")
		if err := rf.Parse(rest); err != nil {
			return err
		}
		mods, err := moduleDirs(*repo)
		if err != nil {
			return err
		}
		var stale []string
		for _, m := range mods {
			if *check {
				f, err := release.ReadGoMod(*repo, m)
				if err != nil {
					return err
				}
				if probs := release.CheckReplaces(f, m); len(probs) > 0 {
					stale = append(stale, m+": "+strings.Join(probs, "; "))
				}
				continue
			}
			changed, err := release.SyncReplaces(*repo, m)
			if err != nil {
				return err
			}
			if changed {
				fmt.Println("updated", m+"/go.mod")
			}
		}
		if len(stale) > 0 {
			return fmt.Errorf("replace directives out of sync:\n%s", strings.Join(stale, "\n"))
		}
		return nil
	case "bump":
		v, err := release.ReadVersions(*repo)
		if err != nil {
			return err
		}
		mods, err := moduleDirs(*repo)
		if err != nil {
			return err
		}
		for _, m := range mods {
			for dep, ver := range v.Modules {
				changed, err := release.SetRequire(*repo, m, dep, ver)
				if err != nil {
					return err
				}
				if changed {
					fmt.Printf("%s/go.mod: require %s%s %s\n", m, release.ModulePrefix, dep, ver)
				}
			}
		}
		return nil
	}
	return fmt.Errorf("unknown command %q; %s", cmd, usage)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
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
