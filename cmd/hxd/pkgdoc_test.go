package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pkgdocRoots are the trees (relative to the module root) whose every
// package must have a doc.go carrying its package comment (STYLE.md G3).
var pkgdocRoots = []string{"api", "internal", "migrations"}

// pkgdocFiles are the files that may carry the package comment, by package
// directory; the default is doc.go. internal/http/api holds generated code
// and generate.go only (STYLE.md G4), so its comment may sit in generate.go.
var pkgdocFiles = map[string][]string{
	"internal/http/api": {"doc.go", "generate.go"},
}

func TestPkgdoc(t *testing.T) {
	t.Parallel()
	root := pkgdocModuleRoot(t)
	var dirs []string
	for _, top := range pkgdocRoots {
		found, err := pkgdocPackageDirs(root, top)
		if err != nil {
			t.Fatalf("walk %s: %v", top, err)
		}
		dirs = append(dirs, found...)
	}
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			files := pkgdocFiles[dir]
			if files == nil {
				files = []string{"doc.go"}
			}
			var problems []string
			for _, name := range files {
				problem := pkgdocCheck(filepath.Join(root, filepath.FromSlash(dir), name))
				if problem == "" {
					return
				}
				problems = append(problems, problem)
			}
			t.Errorf("package %s needs a package comment (\"// Package <name> …\": what it owns, what it must not import) in %s: %s",
				dir, strings.Join(files, " or "), strings.Join(problems, "; "))
		})
	}
}

// pkgdocCheck returns "" if the file exists and carries a package comment
// of the form "Package <name> …", else what is wrong.
func pkgdocCheck(path string) string {
	if _, err := os.Stat(path); err != nil {
		return filepath.Base(path) + " missing"
	}
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		return err.Error()
	}
	text := ""
	if f.Doc != nil {
		text = strings.TrimSpace(f.Doc.Text())
	}
	switch {
	case text == "":
		return filepath.Base(path) + " has no package comment"
	case !strings.HasPrefix(text, "Package "+f.Name.Name+" "):
		return filepath.Base(path) + ` comment does not start with "Package ` + f.Name.Name + ` "`
	}
	return ""
}

// pkgdocPackageDirs returns the module-relative, slash-separated
// directories under top that hold a non-test Go file, skipping what the go
// command skips (testdata, and names starting with "." or "_").
func pkgdocPackageDirs(root, top string) ([]string, error) {
	var dirs []string
	base := filepath.Join(root, top)
	if _, err := os.Stat(base); err != nil {
		return nil, nil // the tree does not exist yet
	}
	err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != base && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") &&
			!strings.HasPrefix(name, ".") && !strings.HasPrefix(name, "_") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			if rel = filepath.ToSlash(rel); !slices.Contains(dirs, rel) {
				dirs = append(dirs, rel)
			}
		}
		return nil
	})
	return dirs, err
}

// pkgdocModuleRoot finds the directory holding go.mod, walking up from the
// test's working directory (cmd/hxd).
func pkgdocModuleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the working directory")
		}
		dir = parent
	}
}
