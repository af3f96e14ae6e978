// Package starters holds the starter templates `hangar templates init` writes: one directory per
// starter, named after it, with a description.txt (its one-line description, not written out) and
// the template's files. Adding a starter is adding a directory (and naming it in the embed line).
package starters

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

//go:embed all:kubernetes all:terraform-kubernetes-pod
var files embed.FS

// descriptionFile is each starter's one-line description; it is not part of the template.
const descriptionFile = "description.txt"

// A Starter is a template to begin from.
type Starter struct {
	Name        string
	Description string
	// Files are the template's paths (slash-separated, relative to its directory), sorted.
	Files []string
}

// List returns the starters, sorted by name.
func List() []Starter {
	dirs, err := fs.ReadDir(files, ".")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	var out []Starter
	for _, d := range dirs {
		if d.IsDir() {
			s, err := Get(d.Name())
			if err != nil {
				panic(err)
			}
			out = append(out, s)
		}
	}
	return out
}

// Names returns the starters' names.
func Names() []string {
	var names []string
	for _, s := range List() {
		names = append(names, s.Name)
	}
	return names
}

// Get returns the starter called name.
func Get(name string) (Starter, error) {
	unknown := func() error {
		return fmt.Errorf("no starter is named %q (starters: %s)", name, strings.Join(Names(), ", "))
	}
	if name == "" || strings.ContainsAny(name, `/\.`) {
		return Starter{}, unknown()
	}
	desc, err := fs.ReadFile(files, path.Join(name, descriptionFile))
	if err != nil {
		return Starter{}, unknown()
	}
	s := Starter{Name: name, Description: strings.TrimSpace(string(desc))}
	err = fs.WalkDir(files, name, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if rel := strings.TrimPrefix(p, name+"/"); rel != descriptionFile {
			s.Files = append(s.Files, rel)
		}
		return nil
	})
	slices.Sort(s.Files)
	return s, err
}

// File returns the content of one of the starter's files.
func (s Starter) File(rel string) ([]byte, error) {
	return fs.ReadFile(files, path.Join(s.Name, rel))
}

// Write writes the starter's files into dir (created if missing). It refuses, writing nothing, when
// any of them exists already.
func (s Starter) Write(dir string) ([]string, error) {
	var paths []string
	for _, rel := range s.Files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if _, err := os.Lstat(p); err == nil {
			return nil, fmt.Errorf("%s exists already: the starter %s writes nothing over files (remove it, or give another --directory)", p, s.Name)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		paths = append(paths, p)
	}
	for i, rel := range s.Files {
		b, err := s.File(rel)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(paths[i]), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(paths[i], b, 0o644); err != nil {
			return nil, err
		}
	}
	return paths, nil
}
