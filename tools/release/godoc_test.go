package release

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// internalDoc matches what belongs to the source, not to users' godoc:
// locking notes, lock and mutex field names, source file names.
var internalDoc = regexp.MustCompile(`Locking( rule)?:|(?i:\block order\b)|\bmu\b|\b[a-z]\w*Mu\b|\b\w+\.go\b|\bguards\b`)

// TestGodocIsAboutUse: the godoc of every module's packages (the package
// doc, exported types, their exported fields, functions and methods) says
// how to use them, not how they lock. The locking rule of each concurrent
// type is a comment at the top of its body instead, which godoc does not
// show; godoc says what is safe to call concurrently. Internal and command
// packages are left out: no user reads their godoc.
func TestGodocIsAboutUse(t *testing.T) {
	root := repoRoot(t)
	for _, m := range workspaceModules(t, root) {
		if strings.HasPrefix(m, "tools/") {
			continue
		}
		checkModuleGodoc(t, filepath.Join(root, m))
	}
}

// checkModuleGodoc checks the packages of the module in modDir, not those
// of modules nested in it.
func checkModuleGodoc(t *testing.T, modDir string) {
	t.Helper()
	err := filepath.WalkDir(modDir, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if dir != modDir {
			if n := d.Name(); n == "testdata" || n == "internal" || n == "cmd" || strings.HasPrefix(n, ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, p := range pkgs {
			if p.Name == "main" {
				continue
			}
			checkGodoc(t, dir, doc.New(p, dir, 0))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkGodoc(t *testing.T, dir string, p *doc.Package) {
	t.Helper()
	check := func(what, text string, fields []string) {
		for _, line := range strings.Split(text, "\n") {
			if m := internalDoc.FindString(line); m != "" {
				t.Errorf("%s: godoc of %s mentions %q, which is for the source: %q", dir, what, m, line)
			}
			for _, f := range fields {
				if regexp.MustCompile(`\b` + f + `\b`).MatchString(line) {
					t.Errorf("%s: godoc of %s names the unexported field %s: %q", dir, what, f, line)
				}
			}
		}
	}
	check("package "+p.Name, p.Doc, nil)
	for _, f := range p.Funcs {
		check(f.Name, f.Doc, nil)
	}
	for _, typ := range p.Types {
		// Unexported fields with a camelCase name cannot be mistaken for
		// words of the prose.
		var hidden []string
		for _, spec := range typ.Decl.Specs {
			st, ok := spec.(*ast.TypeSpec).Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, f := range st.Fields.List {
				for _, n := range f.Names {
					if !n.IsExported() && strings.ToLower(n.Name) != n.Name {
						hidden = append(hidden, n.Name)
					}
					if n.IsExported() && f.Doc != nil {
						check(typ.Name+"."+n.Name, f.Doc.Text(), nil)
					}
				}
			}
		}
		check(typ.Name, typ.Doc, hidden)
		for _, f := range typ.Funcs {
			check(f.Name, f.Doc, nil)
		}
		for _, m := range typ.Methods {
			check(typ.Name+"."+m.Name, m.Doc, hidden)
		}
	}
}
