package repodef

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/devcontainer"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// A devcontainer.json whose build names a Dockerfile and a context in its private repository, on
// the test forge (Gitea's API over real git): the Dockerfile, its COPY sources (a folder with a
// script, a symlink and a file .dockerignore leaves out) are read through the forge with the
// owner's token, and become the image build's Base and Steps.
func TestDockerfileFromTheForge(t *testing.T) {
	f := forgetest.New(t, forgetest.Options{})
	f.AddUser(forgetest.User{Login: "alice", FullName: "Alice", Email: "alice@example.com"})
	f.CreateRepo("alice", "app", true, map[string]string{
		".devcontainer/devcontainer.json": `{
			// the repository's root is the build context
			"build": {"dockerfile": "Dockerfile", "context": "..", "args": {"VARIANT": "bookworm"}},
			"remoteUser": "vscode"
		}`,
		".devcontainer/Dockerfile": "ARG VARIANT=bullseye\nFROM mcr.microsoft.com/devcontainers/base:${VARIANT}\n" +
			"COPY --chown=vscode tools/ /opt/tools/\nCOPY .devcontainer/setup /usr/local/bin\nRUN setup\n",
		".devcontainer/setup":       "#!/bin/sh\necho set up\n",
		"tools/run.sh":              "echo run\n",
		"tools/data.txt":            "data\n",
		"tools/latest":              forgetest.SymlinkPrefix + "run.sh",
		"tools/node_modules/big.js": "ignored\n",
		".dockerignore":             "tools/node_modules\n",
		"README.md":                 "# app\n",
	})
	alice := f.AddToken("alice")
	ctx := context.Background()
	// A reader is pinned to the commit its Find read (as one request's is): each read of a new
	// commit below takes a new one.
	newReader := func() *ForgeReader {
		return &ForgeReader{Type: "gitea", APIBase: f.HTTPURL() + "/api/v1", Repo: "alice/app", Token: alice}
	}
	reader := newReader()
	def, err := Find(ctx, reader, "")
	if err != nil || def.Path != ".devcontainer/devcontainer.json" {
		t.Fatalf("find: %+v, %v", def, err)
	}
	translate := func(files fs.FS) (*devcontainer.Result, error) {
		return devcontainer.Translate(def.Content, devcontainer.Options{Basename: "app", ID: "id", FromRepository: true, Repo: files, Dir: path.Dir(def.Path)})
	}
	res, err := translate(FS(ctx, reader))
	if err != nil {
		t.Fatal(err)
	}
	if res.Build == nil || res.Build.Base != "mcr.microsoft.com/devcontainers/base:bookworm" {
		t.Fatalf("build: %+v", res.Build)
	}
	var got []string
	for _, s := range res.Build.Steps {
		got = append(got, fmt.Sprintf("%d %s %q", s.Line, s.Op, s.Args))
		for _, fl := range s.Files {
			got = append(got, fmt.Sprintf("  %s %v %s:%s %q %s", fl.Path, fs.FileMode(fl.Mode), fl.User, fl.Group, fl.Data, fl.Target))
		}
	}
	want := []string{
		`3 copy []`,
		`  /opt/tools/data.txt -rw-r--r-- vscode: "data\n" `,
		`  /opt/tools/latest Lrwxrwxrwx vscode: "" run.sh`,
		`  /opt/tools/run.sh -rwxr-xr-x vscode: "echo run\n" `,
		`4 copy []`,
		`  /usr/local/bin -rwxr-xr-x : "#!/bin/sh\necho set up\n" `,
		`5 run ["/bin/sh" "-c" "setup"]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The workspace runs the build's base until the image build is wired (its hook).
	var dv struct {
		Components []struct {
			Container struct{ Image string }
		}
	}
	if err := json.Unmarshal(res.Devfile, &dv); err != nil || dv.Components[0].Container.Image != res.Build.Base {
		t.Errorf("devfile image: %+v, %v", dv, err)
	}

	// A Dockerfile the repository does not have, and a COPY of a file it does not have, are
	// refused naming the field, the file and the line.
	f.Commit("alice", "app", "broken", map[string]string{
		".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Nope"}}`,
	})
	reader = newReader()
	def, _ = Find(ctx, reader, "")
	_, err = translate(FS(ctx, reader))
	var ve *workspace.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "devcontainer.build.dockerfile: the repository has no .devcontainer/Nope") {
		t.Fatalf("missing Dockerfile: %v", err)
	}
	f.Commit("alice", "app", "missing source", map[string]string{
		".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}}`,
	})
	reader = newReader()
	def, _ = Find(ctx, reader, "")
	if _, err = translate(FS(ctx, reader)); err == nil || !strings.Contains(err.Error(), "devcontainer.build.dockerfile: .devcontainer/Dockerfile:3: COPY tools: not found in the build context") {
		t.Fatalf("missing source: %v", err)
	}
}

// countingReader is a repository where every folder holds a file and MaxEntries-1 folders,
// counting the forge's requests.
type countingReader struct{ requests int }

func (c *countingReader) Check(context.Context) error         { return nil }
func (c *countingReader) Pin(context.Context) (string, error) { return "c0ffee", nil }
func (c *countingReader) ReadFile(context.Context, string) ([]byte, error) {
	c.requests++
	return []byte("x"), nil
}

func (c *countingReader) List(context.Context, string) ([]Entry, error) {
	c.requests++
	out := []Entry{{Name: "file", Size: 1, Mode: 0o100644}}
	for i := range MaxEntries - 1 {
		out = append(out, Entry{Name: fmt.Sprintf("d%04d", i), Dir: true})
	}
	return out, nil
}

// An FS reads each listing and file once, and stops at its bound of requests.
func TestFSBounds(t *testing.T) {
	r := &countingReader{}
	fsys := FS(context.Background(), r)
	for range 3 {
		if b, err := fs.ReadFile(fsys, "file"); err != nil || string(b) != "x" {
			t.Fatal(b, err)
		}
	}
	if r.requests != 2 {
		t.Fatalf("%d requests for one listing and one file read three times, want 2", r.requests)
	}
	var err error
	for i := 0; err == nil; i++ {
		_, err = fs.ReadDir(fsys, fmt.Sprintf("d%04d/d%04d", i/(MaxEntries-1), i%(MaxEntries-1)))
	}
	if !errors.Is(err, ErrBudget) || r.requests != MaxFSRequests {
		t.Fatalf("after %d requests: %v, want the budget's error after %d", r.requests, err, MaxFSRequests)
	}
	if _, err := fs.ReadFile(fsys, "../x"); !errors.Is(err, fs.ErrInvalid) {
		t.Fatalf("a path outside: %v", err)
	}
}

// The other forges' listings, by their documented shapes (fakes): GitHub's git trees (modes; the
// root at the default branch, a folder by its tree's hash) and a symlink's target from its
// contents; GitLab's tree modes; Bitbucket's attributes. Each gives an executable script 0755, a
// plain file 0644 and a symlink its target.
func TestFSOtherForges(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, fsys fs.FS) {
		t.Helper()
		for name, want := range map[string]fs.FileMode{"tools/run.sh": 0o755, "tools/data.txt": 0o644} {
			info, err := fs.Stat(fsys, name)
			if err != nil || info.Mode() != want {
				t.Errorf("%s: %v, %v; want %v", name, info, err, want)
			}
		}
		if target, err := fs.ReadLink(fsys, "tools/latest"); err != nil || target != "run.sh" {
			t.Errorf("tools/latest -> %q, %v", target, err)
		}
		if b, err := fs.ReadFile(fsys, "tools/latest"); err != nil || string(b) != "echo run\n" {
			t.Errorf("reading through the symlink: %q, %v", b, err)
		}
	}
	t.Run("github", func(t *testing.T) {
		srv := fakeForge(t, func(r *http.Request) (int, string) {
			switch r.URL.Path {
			case "/repos/alice/app":
				return 200, `{"default_branch":"trunk"}`
			case "/repos/alice/app/git/trees/trunk":
				return 200, `{"sha":"root","tree":[{"path":"tools","mode":"040000","type":"tree","sha":"t1"}],"truncated":false}`
			case "/repos/alice/app/git/trees/t1":
				return 200, `{"sha":"t1","tree":[{"path":"run.sh","mode":"100755","type":"blob","size":9,"sha":"b1"},{"path":"data.txt","mode":"100644","type":"blob","size":5,"sha":"b2"},{"path":"latest","mode":"120000","type":"blob","size":6,"sha":"b3"},{"path":"sub","mode":"160000","type":"commit","sha":"c"}]}`
			case "/repos/alice/app/contents/tools/latest":
				return 200, `{"type":"symlink","target":"run.sh","name":"latest"}`
			case "/repos/alice/app/contents/tools/run.sh":
				return 200, "echo run\n"
			case "/repos/alice/app/contents/tools/data.txt":
				return 200, "data\n"
			}
			return 404, `{"message":"Not Found"}`
		})
		check(t, FS(ctx, &ForgeReader{Type: "github", APIBase: srv.URL, Repo: "alice/app", Token: "tok"}))
	})
	t.Run("gitlab", func(t *testing.T) {
		srv := fakeForge(t, func(r *http.Request) (int, string) {
			switch {
			case strings.HasSuffix(r.URL.Path, "/repository/tree") && r.URL.Query().Get("path") == "":
				return 200, `[{"name":"tools","type":"tree","mode":"040000"}]`
			case strings.HasSuffix(r.URL.Path, "/repository/tree") && r.URL.Query().Get("path") == "tools":
				return 200, `[{"name":"run.sh","type":"blob","mode":"100755"},{"name":"data.txt","type":"blob","mode":"100644"},{"name":"latest","type":"blob","mode":"120000"}]`
			case r.URL.Path == "/projects/group/app/repository/files/tools/latest/raw":
				return 200, "run.sh"
			case r.URL.Path == "/projects/group/app/repository/files/tools/run.sh/raw":
				return 200, "echo run\n"
			case r.URL.Path == "/projects/group/app/repository/files/tools/data.txt/raw":
				return 200, "data\n"
			}
			return 404, `{"message":"404 File Not Found"}`
		})
		check(t, FS(ctx, &ForgeReader{Type: "gitlab", APIBase: srv.URL, Repo: "group/app", Token: "tok"}))
	})
	t.Run("bitbucket", func(t *testing.T) {
		srv := fakeForge(t, func(r *http.Request) (int, string) {
			switch r.URL.Path {
			case "/repositories/team/app/src/main//":
				return 200, `{"values":[{"path":"tools","type":"commit_directory"}]}`
			case "/repositories/team/app/src/main/tools/":
				return 200, `{"values":[{"path":"tools/run.sh","type":"commit_file","attributes":["executable"],"size":9},{"path":"tools/data.txt","type":"commit_file","attributes":[],"size":5},{"path":"tools/latest","type":"commit_file","attributes":["link"],"size":6}]}`
			case "/repositories/team/app/src/main/tools/latest":
				return 200, "run.sh"
			case "/repositories/team/app/src/main/tools/run.sh":
				return 200, "echo run\n"
			case "/repositories/team/app/src/main/tools/data.txt":
				return 200, "data\n"
			}
			return 404, `{"type":"error"}`
		})
		check(t, FS(ctx, &ForgeReader{Type: "bitbucket", APIBase: srv.URL, Repo: "team/app", Ref: "main", Token: "tok"}))
	})
}
