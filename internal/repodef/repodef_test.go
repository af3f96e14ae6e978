package repodef

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// mapRepo is a repository as a map of path to content.
type mapRepo map[string]string

func (m mapRepo) Check(context.Context) error { return nil }

// mapCommit is the commit every mapRepo is at.
const mapCommit = "0123456789abcdef0123456789abcdef01234567"

func (m mapRepo) Pin(context.Context) (string, error) { return mapCommit, nil }

func (m mapRepo) ReadFile(_ context.Context, p string) ([]byte, error) {
	if c, ok := m[p]; ok {
		return []byte(c), nil
	}
	return nil, ErrNotFound
}

func (m mapRepo) List(_ context.Context, dir string) ([]Entry, error) {
	seen := map[string]bool{}
	var out []Entry
	for p := range m {
		rest, ok := strings.CutPrefix(p, dir+"/")
		if !ok {
			continue
		}
		name, _, sub := strings.Cut(rest, "/")
		if !seen[name] {
			seen[name] = true
			out = append(out, Entry{Name: name, Dir: sub})
		}
	}
	if len(out) == 0 {
		return nil, ErrNotFound
	}
	return out, nil
}

func TestFindOrder(t *testing.T) {
	for _, tc := range []struct {
		name      string
		repo      mapRepo
		path      string
		wantKind  Kind
		wantPath  string
		wantError string
	}{
		{"devfile first", mapRepo{".devfile.yaml": "a", "devfile.yaml": "b", ".devcontainer/devcontainer.json": "{}"}, "", Devfile, ".devfile.yaml", ""},
		{"then devfile.yaml", mapRepo{"devfile.yaml": "b", ".devcontainer.json": "{}"}, "", Devfile, "devfile.yaml", ""},
		{"then .devcontainer/", mapRepo{".devcontainer/devcontainer.json": "{}", ".devcontainer.json": "{}"}, "", Devcontainer, ".devcontainer/devcontainer.json", ""},
		{"then .devcontainer.json", mapRepo{".devcontainer.json": "{}", "README.md": "x"}, "", Devcontainer, ".devcontainer.json", ""},
		{"then the one named folder", mapRepo{".devcontainer/go/devcontainer.json": "{}", ".devcontainer/go/Dockerfile": "x", ".devcontainer/notes.md": "x"}, "", Devcontainer, ".devcontainer/go/devcontainer.json", ""},
		{"several folders: choose", mapRepo{".devcontainer/py/devcontainer.json": "{}", ".devcontainer/go/devcontainer.json": "{}"}, "", "", "", "2 devcontainer definitions (.devcontainer/go/devcontainer.json, .devcontainer/py/devcontainer.json): name one with devcontainer_path"},
		{"named", mapRepo{".devcontainer/py/devcontainer.json": "{}", ".devcontainer/go/devcontainer.json": "{}", ".devfile.yaml": "a"}, ".devcontainer/py/devcontainer.json", Devcontainer, ".devcontainer/py/devcontainer.json", ""},
		{"named, missing", mapRepo{".devfile.yaml": "a"}, "x/devcontainer.json", "", "", "devcontainer_path: the repository has no x/devcontainer.json at this ref"},
		{"named, outside", mapRepo{}, "../etc/passwd", "", "", "devcontainer_path: want a relative path inside the repository"},
		{"none", mapRepo{"README.md": "x", ".devcontainer/notes.md": "x"}, "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Find(context.Background(), tc.repo, tc.path)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("Find: %+v, %v; want an error with %q", d, err, tc.wantError)
				}
				return
			}
			if err != nil || d.Kind != tc.wantKind || d.Path != tc.wantPath || (d.Kind != "" && string(d.Content) != tc.repo[d.Path]) || d.Commit != mapCommit {
				t.Fatalf("Find: %+v, %v; want %s %s", d, err, tc.wantKind, tc.wantPath)
			}
		})
	}
}

func TestParseSource(t *testing.T) {
	for in, want := range map[string]Source{
		"https://github.com/alice/app":               {URL: "https://github.com/alice/app"},
		"https://github.com/alice/app.git#main":      {URL: "https://github.com/alice/app.git", Ref: "main"},
		"http://127.0.0.1:3000/alice/app.git#v1.2":   {URL: "http://127.0.0.1:3000/alice/app.git", Ref: "v1.2"},
		"git@github.com:alice/app.git#feature/x":     {URL: "git@github.com:alice/app.git", Ref: "feature/x"},
		"ssh://git@gitlab.example.com/g/sub/app.git": {URL: "ssh://git@gitlab.example.com/g/sub/app.git"},
	} {
		got, err := ParseSource("repo", in)
		if err != nil || got != want {
			t.Errorf("ParseSource(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, wantErr := range map[string]string{
		"":                                      "want an https://",
		"ftp://h/a/b":                           "want an https://",
		"https://alice:secret@github.com/a/b":   "holds credentials",
		"https://github.com/":                   "names no repository",
		"https://github.com/a/b?x=1":            "a query or a fragment",
		"https://github.com/a/b#":               "the ref after '#'",
		"https://github.com/a/b#-upload-pack=x": "the ref after '#'",
		"https://github.com/a/b#a b":            "the ref after '#'",
		"https://github.com/a b/c":              "spaces or control characters",
		"https://github.com/a/../b":             "names no repository",
		"github.com/alice/app":                  "want an https://",
	} {
		if got, err := ParseSource("repo", in); err == nil || !strings.Contains(err.Error(), wantErr) || !strings.HasPrefix(err.Error(), "repo: ") {
			t.Errorf("ParseSource(%q) = %+v, %v; want an error naming the field with %q", in, got, err, wantErr)
		}
	}
}

// FuzzParseSource: an accepted source has a host and a repository path, and a ref git cannot take
// for an option or a revision expression.
func FuzzParseSource(f *testing.F) {
	for _, s := range []string{"https://github.com/a/b#main", "git@h:a/b.git", "ssh://h/a", "https://h/a/b#-x", "h:a", "@:", "https://u@h/a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		src, err := ParseSource("repo", s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "repo: ") {
				t.Fatalf("%q: %v does not name the field", s, err)
			}
			return
		}
		host, p, err := RepoHostPath(src.URL)
		if err != nil || host == "" || p == "" || strings.HasPrefix(src.Ref, "-") || strings.ContainsAny(src.Ref, " \t\n:") {
			t.Fatalf("%q: accepted as %+v (host %q, path %q, %v)", s, src, host, p, err)
		}
	})
}

func TestRefusedIsNotNotFound(t *testing.T) {
	if errors.Is(&RefusedError{Status: 404}, ErrNotFound) {
		t.Fatal("a refused repository reads as a missing file")
	}
}

// countingRepo counts the files read.
type countingRepo struct {
	mapRepo
	reads int
}

func (c *countingRepo) ReadFile(ctx context.Context, p string) ([]byte, error) {
	c.reads++
	return c.mapRepo.ReadFile(ctx, p)
}

// A .devcontainer/ of many folders is not probed folder by folder (a request to the forge each):
// the definition must be named, and the error says so, naming the field.
func TestFindBoundsFolders(t *testing.T) {
	repo := &countingRepo{mapRepo: mapRepo{}}
	for i := range MaxFolders + 1 {
		repo.mapRepo[".devcontainer/f"+strings.Repeat("x", i)+"/Dockerfile"] = "x"
	}
	_, err := Find(context.Background(), repo, "")
	if err == nil || !strings.Contains(err.Error(), "devcontainer_path: the repository's .devcontainer/ has 21 folders (at most 20 are looked into)") {
		t.Fatalf("Find = %v", err)
	}
	if repo.reads > 4 {
		t.Fatalf("%d files read, want the 4 fixed places only", repo.reads)
	}
	// At the bound, each folder is looked into.
	delete(repo.mapRepo, ".devcontainer/f/Dockerfile")
	repo.mapRepo[".devcontainer/fx/devcontainer.json"] = "{}"
	repo.reads = 0
	if d, err := Find(context.Background(), repo, ""); err != nil || d.Path != ".devcontainer/fx/devcontainer.json" || repo.reads != 4+MaxFolders+1 {
		t.Fatalf("Find = %+v, %v after %d reads", d, err, repo.reads)
	}
}
