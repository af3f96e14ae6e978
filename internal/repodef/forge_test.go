package repodef

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
)

// On the test forge (Gitea's API over real repositories): the owner's token reads the private
// repository's definition at its default branch or at a commit; another user, or nobody, is
// refused as forges refuse (the repository "does not exist").
func TestGiteaReader(t *testing.T) {
	f := forgetest.New(t, forgetest.Options{})
	f.AddUser(forgetest.User{Login: "alice", FullName: "Alice", Email: "alice@example.com"})
	f.AddUser(forgetest.User{Login: "bob", FullName: "Bob", Email: "bob@example.com"})
	first := f.CreateRepo("alice", "app", true, map[string]string{".devcontainer.json": `{"image":"v1"}`})
	f.Commit("alice", "app", "per language", map[string]string{".devcontainer/go/devcontainer.json": `{"image":"go"}`, ".devcontainer/py/devcontainer.json": `{"image":"py"}`})
	alice, bob := f.AddToken("alice"), f.AddToken("bob")
	reader := func(token, ref string) *ForgeReader {
		return &ForgeReader{Type: "gitea", APIBase: f.HTTPURL() + "/api/v1", Repo: "alice/app", Ref: ref, Token: token}
	}
	ctx := context.Background()
	head := f.Head("alice", "app")
	d, err := Find(ctx, reader(alice, ""), "")
	if err != nil || d.Kind != Devcontainer || d.Path != ".devcontainer.json" || string(d.Content) != `{"image":"v1"}` || d.Commit != head {
		t.Fatalf("at main: %+v, %v; want commit %s", d, err, head)
	}
	// A branch resolves to its newest commit; a commit to itself; a ref the repository lacks is
	// said so.
	if d, err := Find(ctx, reader(alice, "main"), ""); err != nil || d.Commit != head {
		t.Fatalf("at branch main: %+v, %v; want commit %s", d, err, head)
	}
	if d, err := Find(ctx, reader(alice, first), ""); err != nil || d.Commit != first || d.Path != ".devcontainer.json" {
		t.Fatalf("at the first commit: %+v, %v", d, err)
	}
	var refErr *RefError
	if _, err := Find(ctx, reader(alice, "nope"), ""); !errors.As(err, &refErr) || refErr.Ref != "nope" {
		t.Fatalf("a missing ref: %v, want a RefError", err)
	}
	d, err = Find(ctx, reader(alice, ""), ".devcontainer/py/devcontainer.json")
	if err != nil || string(d.Content) != `{"image":"py"}` {
		t.Fatalf("named: %+v, %v", d, err)
	}
	entries, err := reader(alice, "").List(ctx, ".devcontainer")
	if err != nil || len(entries) != 2 || !entries[0].Dir {
		t.Fatalf("list: %+v, %v", entries, err)
	}
	if _, err := reader(alice, first).List(ctx, ".devcontainer"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("list at the first commit: %v, want not found", err)
	}
	if _, err := reader(alice, "").List(ctx, ".devcontainer.json"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("list of a file: %v, want not found", err)
	}
	for _, tok := range []string{bob, ""} {
		var refused *RefusedError
		if _, err := Find(ctx, reader(tok, ""), ""); !errors.As(err, &refused) || !strings.Contains(err.Error(), "your linked account cannot read it") {
			t.Fatalf("token %q: %v, want refused", tok, err)
		}
	}
	// A definition over the bound is refused, naming it.
	f.Commit("alice", "app", "huge", map[string]string{"devfile.yaml": strings.Repeat("#", MaxFileBytes+1)})
	if _, err := Find(ctx, reader(alice, ""), ""); err == nil || !strings.Contains(err.Error(), "devfile.yaml is larger than 256 KiB") {
		t.Fatalf("a huge devfile: %v", err)
	}
}

// fakeForge answers the documented paths of one forge's API for a repository holding files (path
// → content) and checks each request's token.
func fakeForge(t *testing.T, check func(r *http.Request) (status int, body string)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		status, body := check(r)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

// The commits the fakes' refs name.
const (
	ghCommit = "1111111111111111111111111111111111111111"
	glCommit = "2222222222222222222222222222222222222222"
	bbCommit = "3333333333333333333333333333333333333333"
)

// GitHub, GitLab and Bitbucket Cloud cannot run here: their documented API shapes, served by fakes
// (GitHub's contents API with the raw media type; GitLab's files/raw and tree with the project's
// path URL-encoded; Bitbucket's src at the main branch it names).
func TestOtherForgesReaders(t *testing.T) {
	ctx := context.Background()
	t.Run("github", func(t *testing.T) {
		srv := fakeForge(t, func(r *http.Request) (int, string) {
			switch {
			case r.URL.Path == "/repos/alice/app":
				return 200, `{"full_name":"alice/app","default_branch":"main"}`
			case r.URL.Path == "/repos/alice/app/commits/dev" && r.Header.Get("Accept") == "application/vnd.github.sha":
				return 200, ghCommit
			case r.URL.Path == "/repos/alice/app/contents/.devcontainer/devcontainer.json" && r.Header.Get("Accept") == "application/vnd.github.raw+json" && r.URL.Query().Get("ref") == ghCommit:
				return 200, `{"image":"gh"}`
			}
			return 404, `{"message":"Not Found"}`
		})
		d, err := Find(ctx, &ForgeReader{Type: "github", APIBase: srv.URL, Repo: "alice/app", Ref: "dev", Token: "tok"}, "")
		if err != nil || d.Path != ".devcontainer/devcontainer.json" || string(d.Content) != `{"image":"gh"}` || d.Commit != ghCommit {
			t.Fatalf("%+v, %v", d, err)
		}
	})
	t.Run("gitlab", func(t *testing.T) {
		srv := fakeForge(t, func(r *http.Request) (int, string) {
			switch {
			case r.URL.EscapedPath() == "/projects/group%2Fsub%2Fapp":
				return 200, `{"id":7,"default_branch":"master"}`
			case r.URL.EscapedPath() == "/projects/group%2Fsub%2Fapp/repository/commits/master":
				return 200, `{"id":"` + glCommit + `","short_id":"abc"}`
			case r.URL.EscapedPath() == "/projects/group%2Fsub%2Fapp/repository/tree" && r.URL.Query().Get("path") == ".devcontainer" && r.URL.Query().Get("ref") == glCommit:
				return 200, jsonOf([]map[string]string{{"name": "go", "type": "tree"}, {"name": "README.md", "type": "blob"}})
			case r.URL.EscapedPath() == "/projects/group%2Fsub%2Fapp/repository/files/.devcontainer%2Fgo%2Fdevcontainer.json/raw" && r.URL.Query().Get("ref") == glCommit:
				return 200, `{"image":"gl"}`
			case strings.HasSuffix(r.URL.Path, "/repository/tree"):
				return 200, `[]`
			}
			return 404, `{"message":"404 File Not Found"}`
		})
		d, err := Find(ctx, &ForgeReader{Type: "gitlab", APIBase: srv.URL, Repo: "group/sub/app", Token: "tok"}, "")
		if err != nil || d.Path != ".devcontainer/go/devcontainer.json" || string(d.Content) != `{"image":"gl"}` || d.Commit != glCommit {
			t.Fatalf("%+v, %v", d, err)
		}
	})
	t.Run("bitbucket", func(t *testing.T) {
		srv := fakeForge(t, func(r *http.Request) (int, string) {
			switch r.URL.Path {
			case "/repositories/team/app":
				return 200, `{"mainbranch":{"name":"trunk"}}`
			case "/repositories/team/app/commit/trunk":
				return 200, `{"hash":"` + bbCommit + `","type":"commit"}`
			case "/repositories/team/app/src/" + bbCommit + "/devfile.yaml":
				return 200, "schemaVersion: 2.2.0\n"
			}
			return 404, `{"type":"error"}`
		})
		d, err := Find(ctx, &ForgeReader{Type: "bitbucket", APIBase: srv.URL, Repo: "team/app", Token: "tok"}, "")
		if err != nil || d.Kind != Devfile || d.Path != "devfile.yaml" || d.Commit != bbCommit {
			t.Fatalf("%+v, %v", d, err)
		}
	})
	t.Run("a refused token", func(t *testing.T) {
		srv := fakeForge(t, func(*http.Request) (int, string) { return 200, "{}" })
		var refused *RefusedError
		if _, err := Find(ctx, &ForgeReader{Type: "github", APIBase: srv.URL, Repo: "a/b", Token: "old"}, ""); !errors.As(err, &refused) || refused.Status != 401 {
			t.Fatalf("%v", err)
		}
	})
}

// FuzzDecodeEntries: whatever a forge answers to a listing, it decodes to entries with names, or
// to an error, and nothing panics.
func FuzzDecodeEntries(f *testing.F) {
	f.Add("github", `[{"name":"go","type":"dir"}]`)
	f.Add("gitlab", `[{"name":"go","type":"tree"}]`)
	f.Add("bitbucket", `{"values":[{"path":".devcontainer/go","type":"commit_directory"}]}`)
	f.Add("gitea", `{"name":"x"}`)
	f.Add("github", `[{"name":"../../etc","type":"dir"},{"name":"a/b","type":"dir"},{"name":"..","type":"dir"}]`)
	f.Fuzz(func(t *testing.T, typ, body string) {
		entries, err := decodeEntries(typ, ".devcontainer", []byte(body))
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, "/\x00") {
				t.Fatalf("%s %q: an entry named %q", typ, body, e.Name)
			}
		}
	})
}

// FuzzDecodeTree: whatever a forge answers to a git trees request, it decodes to at most
// MaxEntries entries named by one path element, or to an error.
func FuzzDecodeTree(f *testing.F) {
	f.Add(`{"tree":[{"path":"run.sh","mode":"100755","type":"blob","size":9,"sha":"b"},{"path":"d","mode":"040000","type":"tree","sha":"t"}]}`)
	f.Add(`{"tree":[{"path":"../x","mode":"120000"},{"path":"a/b"},{"path":""}]}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, body string) {
		entries, err := decodeTree([]byte(body))
		if err != nil {
			return
		}
		if len(entries) > MaxEntries {
			t.Fatalf("%d entries", len(entries))
		}
		for _, e := range entries {
			if e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, "/\x00") || e.Size < 0 {
				t.Fatalf("%q: an entry %+v", body, e)
			}
		}
	})
}

// A repository path is one path in the forge's API, whatever it holds: an escaped '?' or '#' in
// the URL a user gives (owner/app%3Fref=x%23) neither adds a query to the requests that carry the
// user's token nor cuts their path short.
func TestForgeReaderEscapesRepoPath(t *testing.T) {
	host, repo, err := RepoHostPath("https://forge.example/alice/app%3Fref=evil%23x")
	if err != nil || host != "forge.example" || repo != "alice/app?ref=evil#x" {
		t.Fatalf("RepoHostPath = %q, %q, %v", host, repo, err)
	}
	for _, typ := range []string{"github", "gitea", "bitbucket"} {
		var seen []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = append(seen, r.URL.EscapedPath()+" ?"+r.URL.RawQuery)
			http.NotFound(w, r)
		}))
		_, err := Find(context.Background(), &ForgeReader{Type: typ, APIBase: srv.URL, Repo: repo, Token: "tok"}, "")
		srv.Close()
		var refused *RefusedError
		if !errors.As(err, &refused) || len(seen) != 1 {
			t.Fatalf("%s: Find = %v after %q, want refused after one request", typ, err, seen)
		}
		if want := "/repositories/alice/app%3Fref=evil%23x ?"; typ != "bitbucket" {
			want = "/repos/alice/app%3Fref=evil%23x ?"
			if seen[0] != want {
				t.Errorf("%s: the forge was asked %q, want %q", typ, seen[0], want)
			}
		} else if seen[0] != want {
			t.Errorf("%s: the forge was asked %q, want %q", typ, seen[0], want)
		}
	}
}

// A forge's API that redirects elsewhere (another host name) does not get the user's token sent
// there: Go's client drops Authorization on a redirect to another host name (not to another port
// of the same name), and the reader relies on it.
func TestForgeReaderRedirectDropsToken(t *testing.T) {
	var elsewhere []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere = append(elsewhere, r.Header.Get("Authorization"))
		w.Write([]byte(`{"image":"x"}`))
	}))
	defer other.Close()
	var atForge []string
	forge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atForge = append(atForge, r.Header.Get("Authorization"))
		switch r.URL.Path {
		case "/repos/alice/app":
			w.Write([]byte(`{"default_branch":"main"}`))
		case "/repos/alice/app/commits/main":
			w.Write([]byte(ghCommit))
		case "/repos/alice/app/contents/.devcontainer/devcontainer.json":
			// The same loopback server by another name: another host to Go's client.
			http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/blob", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer forge.Close()
	d, err := Find(context.Background(), &ForgeReader{Type: "github", APIBase: forge.URL, Repo: "alice/app", Token: "secret-token"}, "")
	if err != nil || string(d.Content) != `{"image":"x"}` {
		t.Fatalf("Find = %+v, %v", d, err)
	}
	if len(atForge) == 0 || atForge[0] != "Bearer secret-token" {
		t.Fatalf("the forge got %q, want the token", atForge)
	}
	if len(elsewhere) != 1 || elsewhere[0] != "" {
		t.Fatalf("the other host got Authorization %q, want none", elsewhere)
	}
}

// FuzzDecodeCommit: whatever a forge answers about a commit, what is taken is a full commit id, or
// an error; nothing panics.
func FuzzDecodeCommit(f *testing.F) {
	f.Add("", "1111111111111111111111111111111111111111\n")
	f.Add("sha", `{"sha":"2222222222222222222222222222222222222222"}`)
	f.Add("id", `{"id":42}`)
	f.Add("hash", `{"hash":"../../etc"}`)
	f.Fuzz(func(t *testing.T, field, body string) {
		sha, err := decodeCommit(field, []byte(body))
		if err == nil && !IsCommit(sha) {
			t.Fatalf("%q %q: took %q", field, body, sha)
		}
	})
}
