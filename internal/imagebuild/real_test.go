//go:build linux

package imagebuild

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/dockerfiles.golden")

// renderReal is render with each file's content as its size and hash: the golden stays short.
func renderReal(d *Dockerfile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "FROM %s\n", d.Base)
	for _, s := range d.Steps {
		fmt.Fprintf(&b, "%d %s", s.Line, s.Op)
		switch s.Op {
		case OpRun:
			fmt.Fprintf(&b, " %q", s.Args)
			if len(s.Env) > 0 {
				fmt.Fprintf(&b, " env=%q", s.Env)
			}
		case OpEnv, OpLabel:
			fmt.Fprintf(&b, " %s=%s", s.Key, s.Value)
		default:
			if s.Value != "" {
				fmt.Fprintf(&b, " %s", s.Value)
			}
		}
		for _, f := range s.Files {
			mode := fs.FileMode(f.Mode)
			if mode.IsRegular() {
				// As git has it (0644 or 0755), whatever the checkout's umask made of it.
				mode = 0o644 | mode&0o100>>6*0o111
			}
			fmt.Fprintf(&b, "\n  %s %v %d:%d%s", f.Path, mode, f.UID, f.GID, strings.TrimSuffix(" "+f.User+":"+f.Group, " :"))
			if fs.FileMode(f.Mode).IsRegular() {
				fmt.Fprintf(&b, " %d bytes sha256:%x", len(f.Data), sha256.Sum256(f.Data))
			}
		}
		b.WriteString("\n")
	}
	for _, w := range d.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	return b.String()
}

// TestRealDockerfiles parses real devcontainer Dockerfiles (testdata/dockerfiles, each folder a
// repository's .devcontainer, listed in MANIFEST.tsv with its repository, path, commit and
// license) with their folder as the build context, as their devcontainer.json says, and compares
// the steps with testdata/dockerfiles.golden (-update rewrites it).
func TestRealDockerfiles(t *testing.T) {
	manifest, err := os.ReadFile(filepath.Join("testdata", "dockerfiles", "MANIFEST.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	results := map[string]*Dockerfile{}
	for i, line := range strings.Split(strings.TrimSpace(string(manifest)), "\n") {
		f := strings.Split(line, "\t")
		if i == 0 {
			continue
		}
		if len(f) != 6 || len(f[4]) != 40 || f[5] == "" {
			t.Fatalf("MANIFEST.tsv line %d: want dir, dockerfile, repo, path, commit, license: %q", i+1, line)
		}
		dir := filepath.Join("testdata", "dockerfiles", f[0])
		data, err := os.ReadFile(filepath.Join(dir, f[1]))
		if err != nil {
			t.Fatal(err)
		}
		name := f[3] + "/" + f[1]
		d, err := ParseDockerfile(data, DockerfileOptions{Path: name, Context: os.DirFS(dir)})
		fmt.Fprintf(&out, "== %s (%s@%.12s)\n", name, f[2], f[4])
		if err != nil {
			fmt.Fprintf(&out, "refused: %v\n", err)
			continue
		}
		results[f[0]+"/"+f[1]] = d
		out.WriteString(renderReal(d))
	}
	golden := filepath.Join("testdata", "dockerfiles.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("outcomes differ from %s (run with -update and review the diff):\n%s", golden, out.String())
	}

	// What the files say, checked against them directly.
	cpp := results["images-cpp/Dockerfile"]
	script, _ := os.ReadFile(filepath.Join("testdata", "dockerfiles", "images-cpp", "base-scripts", "install-vcpkg.sh"))
	if cpp == nil || cpp.Base != "mcr.microsoft.com/devcontainers/base:debian13" {
		t.Fatalf("cpp: %+v", cpp)
	}
	found := false
	for _, s := range cpp.Steps {
		for _, f := range s.Files {
			if f.Path == "/tmp/install-vcpkg.sh" && string(f.Data) == string(script) {
				found = true
			}
		}
		if s.Op == OpEnv && s.Key == "PATH" && s.Value != "${PATH}:/usr/local/vcpkg" {
			t.Errorf("cpp: ENV PATH=%s, want the image's PATH and vcpkg's", s.Value)
		}
	}
	if !found {
		t.Error("cpp: COPY base-scripts/install-vcpkg.sh /tmp/ is not in the steps")
	}
}
