// Package crosscheck type-checks a module's packages from source for another GOOS/GOARCH, without
// compiling anything: it catches what a cross build of the module's own code would refuse (a Unix-only
// call such as unix.Setns or syscall.Kill in a file that is built on Windows, a package that does not
// exist on the target), for a small part of a build's cost. `go list -deps` chooses the files as the
// build would (build tags, GOOS/GOARCH file names, CGO_ENABLED=0); go/types then checks every package
// in dependency order. The dependencies (the standard library and other modules) are checked for
// their declarations only (their function bodies are skipped: they are not this module's to break);
// the main module's packages are checked whole.
//
// What it does not catch, and the release job (scripts/release-check) does: the compiler's and the
// linker's own limits on a target (none has been seen in hangar's history), and the build script.
package crosscheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// A Target is one GOOS/GOARCH pair.
type Target struct{ OS, Arch string }

func (t Target) String() string { return t.OS + "/" + t.Arch }

// listed is what `go list -json` says of one package (the fields used here).
type listed struct {
	ImportPath string
	Name       string
	Dir        string
	Standard   bool
	GoFiles    []string
	CgoFiles   []string
	ImportMap  map[string]string
	Match      []string // the patterns that named it (none for a dependency)
	Module     *struct {
		Path      string
		Main      bool
		GoVersion string
	}
	Error *struct{ Err string }
}

// Check type-checks the packages that patterns name (as `go list` reads them, in dir) and all
// their dependencies, for target. It returns one line per problem, "file:line:col: message" for a
// type error (file relative to dir when it is under it), or "package P: message" when go list could
// not load a package; nil when the main module's code would compile for target. The error is for a
// failure to run the check at all.
func Check(ctx context.Context, dir string, target Target, patterns ...string) ([]string, error) {
	args := append([]string{"list", "-e", "-deps", "-json=ImportPath,Name,Dir,Standard,GoFiles,CgoFiles,ImportMap,Match,Module,Error"}, patterns...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS="+target.OS, "GOARCH="+target.Arch, "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list for %s: %v\n%s", target, err, stderr.Bytes())
	}
	var pkgs []*listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list for %s: %w", target, err)
		}
		pkgs = append(pkgs, &p)
	}

	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	sizes := types.SizesFor("gc", target.Arch)
	if sizes == nil {
		return nil, fmt.Errorf("crosscheck: no type sizes for GOARCH %s", target.Arch)
	}
	fset := token.NewFileSet()
	done := map[string]*types.Package{"unsafe": types.Unsafe}
	failed := map[string]string{} // import path -> why it could not be loaded
	var problems []string
	// go list -deps prints every package after the packages it imports.
	for _, p := range pkgs {
		if p.ImportPath == "unsafe" {
			continue
		}
		main := p.Module != nil && p.Module.Main || len(p.Match) > 0
		if p.Error != nil {
			failed[p.ImportPath] = p.Error.Err
			if main {
				problems = append(problems, fmt.Sprintf("package %s: %s", p.ImportPath, relative(p.Error.Err, absDir)))
			}
			if main || len(p.GoFiles) == 0 {
				// A dependency that go list could not load is reported where a package of the main
				// module imports it (the importer below returns go list's error).
				continue
			}
		}
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			files = append(files, f)
		}
		var pkgProblems []string
		conf := types.Config{
			Importer: importerFunc(func(path string) (*types.Package, error) {
				if m, ok := p.ImportMap[path]; ok {
					path = m
				}
				if tp, ok := done[path]; ok {
					return tp, nil
				}
				if why, ok := failed[path]; ok {
					return nil, errors.New(why)
				}
				return nil, fmt.Errorf("package %s was not loaded for %s", path, target)
			}),
			Sizes:            sizes,
			IgnoreFuncBodies: !main,
			Error: func(err error) {
				if len(pkgProblems) < 20 {
					pkgProblems = append(pkgProblems, relative(err.Error(), absDir))
				}
			},
		}
		if p.Module != nil && p.Module.GoVersion != "" {
			conf.GoVersion = "go" + p.Module.GoVersion
		}
		tp, _ := conf.Check(p.ImportPath, fset, files, nil) // errors go to conf.Error
		done[p.ImportPath] = tp
		if len(pkgProblems) > 0 {
			problems = append(problems, pkgProblems...)
		}
	}
	return problems, nil
}

type importerFunc func(string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// relative shortens a go/types message's file name to one relative to dir.
func relative(msg, dir string) string {
	return strings.ReplaceAll(msg, dir+string(filepath.Separator), "")
}
