package projectclone

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// gitServer serves bare repositories under dir over git's smart HTTP protocol (git http-backend
// through net/http/cgi), on loopback, plain or with TLS.
func gitServer(t *testing.T, dir string, tls bool) (*httptest.Server, []byte) {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git is needed to serve test repositories: %v", err)
	}
	h := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + dir, "GIT_HTTP_EXPORT_ALL=1"},
	}
	if !tls {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return s, nil
	}
	s := httptest.NewTLSServer(h)
	t.Cleanup(s.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	return s, ca
}

func run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// makeRepo creates served/<name>.git with a main branch (README "main"), a feature branch (README
// "feature"), a tag v1 on the first commit and returns the first commit's hash.
func makeRepo(t *testing.T, served, name string) string {
	t.Helper()
	work := t.TempDir()
	run(t, work, "init", "-q", "-b", "main")
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(work, "README"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("v1\n")
	run(t, work, "add", "README")
	run(t, work, "commit", "-q", "-m", "first")
	first := run(t, work, "rev-parse", "HEAD")
	run(t, work, "tag", "v1")
	write("main\n")
	run(t, work, "commit", "-q", "-am", "main")
	run(t, work, "checkout", "-q", "-b", "feature")
	write("feature\n")
	run(t, work, "commit", "-q", "-am", "feature")
	run(t, work, "checkout", "-q", "main")
	run(t, served, "clone", "-q", "--bare", work, name+".git")
	return first
}

func readme(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "README"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestClone(t *testing.T) {
	served := t.TempDir()
	first := makeRepo(t, served, "app")
	for _, tls := range []bool{false, true} {
		name := map[bool]string{false: "http", true: "https"}[tls]
		t.Run(name, func(t *testing.T) {
			s, ca := gitServer(t, served, tls)
			url := s.URL + "/app.git"
			root := t.TempDir()
			projects := []Project{
				{Name: "app", Path: "app", Remotes: map[string]string{"origin": url}},
				{Name: "feature", Path: "src/feature", Remotes: map[string]string{"upstream": url, "mirror": url + "?mirror"}, Remote: "upstream", Revision: "feature"},
				{Name: "tagged", Path: "tagged", Remotes: map[string]string{"origin": url}, Revision: "v1"},
				{Name: "commit", Path: "commit", Remotes: map[string]string{"origin": url}, Revision: first},
			}
			var log bytes.Buffer
			if err := Clone(context.Background(), root, projects, Options{CABundle: ca}, &log); err != nil {
				t.Fatalf("Clone: %v\n%s", err, log.String())
			}
			for dir, want := range map[string]string{"app": "main\n", "src/feature": "feature\n", "tagged": "v1\n", "commit": "v1\n"} {
				if got := readme(t, filepath.Join(root, dir)); got != want {
					t.Errorf("%s/README = %q, want %q", dir, got, want)
				}
			}
			// The clone is a working git repository with the devfile's remotes and branch.
			if got := run(t, filepath.Join(root, "src/feature"), "rev-parse", "--abbrev-ref", "HEAD"); got != "feature" {
				t.Errorf("src/feature is on %q, want the feature branch", got)
			}
			if got := run(t, filepath.Join(root, "src/feature"), "remote"); got != "mirror\nupstream" {
				t.Errorf("src/feature remotes %q, want mirror and upstream", got)
			}

			// Directories that exist are left alone, so that work survives a restart.
			if err := os.WriteFile(filepath.Join(root, "app", "README"), []byte("edited\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			log.Reset()
			if err := Clone(context.Background(), root, projects, Options{CABundle: ca}, &log); err != nil {
				t.Fatal(err)
			}
			if got := readme(t, filepath.Join(root, "app")); got != "edited\n" {
				t.Errorf("a restart replaced the user's work: README = %q", got)
			}
			if !strings.Contains(log.String(), "exists, left as it is") {
				t.Errorf("log does not say the project was left: %s", log.String())
			}
		})
	}

	t.Run("https without the CA", func(t *testing.T) {
		s, _ := gitServer(t, served, true)
		root := t.TempDir()
		err := Clone(context.Background(), root, []Project{{Name: "app", Path: "app", Remotes: map[string]string{"origin": s.URL + "/app.git"}}}, Options{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), `project "app"`) || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("err = %v, want one naming the project and the certificate problem", err)
		}
		if _, err := os.Stat(filepath.Join(root, "app")); !os.IsNotExist(err) {
			t.Errorf("a failed clone left %s behind (a restart would skip it): %v", filepath.Join(root, "app"), err)
		}
	})
}

func TestMainReportsClearly(t *testing.T) {
	served := t.TempDir()
	makeRepo(t, served, "app")
	s, _ := gitServer(t, served, false)
	for _, tc := range []struct {
		name, projects, want string
		code                 int
	}{
		{"ok", `[{"name":"app","path":"app","remotes":{"origin":"` + s.URL + `/app.git"},"remote":"origin"}]`, "", 0},
		{"missing repository", `[{"name":"gone","path":"gone","remotes":{"origin":"` + s.URL + `/gone.git"}}]`, `project "gone": clone ` + s.URL + `/gone.git`, 1},
		{"unknown revision", `[{"name":"app","path":"app2","remotes":{"origin":"` + s.URL + `/app.git"},"revision":"nope"}]`, `check out "nope"`, 1},
		{"escaping path", `[{"name":"x","path":"../x","remotes":{"origin":"` + s.URL + `/app.git"}}]`, "leaves the projects root", 1},
		{"not JSON", `{`, "HANGAR_PROJECTS is not the JSON list of projects", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			env := map[string]string{"PROJECTS_ROOT": root, "HANGAR_PROJECTS": tc.projects}
			var out, errOut bytes.Buffer
			code := Main(context.Background(), func(k string) string { return env[k] }, &out, &errOut)
			if code != tc.code || !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut.String(), tc.code, tc.want)
			}
			if tc.code == 0 {
				var list []Project
				_ = json.Unmarshal([]byte(tc.projects), &list)
				if got := readme(t, filepath.Join(root, list[0].Path)); got != "main\n" {
					t.Errorf("README = %q", got)
				}
			}
		})
	}
}

// TestGeneratedConfigClones runs the clone init container the way a workspace pod does: from the
// config the server generates for a devfile with projects, against a local git server.
func TestGeneratedConfigClones(t *testing.T) {
	served := t.TempDir()
	makeRepo(t, served, "app")
	s, _ := gitServer(t, served, false)
	d, err := devfile.Parse([]byte(`schemaVersion: 2.2.0
projects:
  - name: app
    git:
      remotes: {origin: "` + s.URL + `/app.git"}
      checkoutFrom: {revision: feature}
dependentProjects:
  - name: lib
    clonePath: deps/lib
    git:
      remotes: {origin: "` + s.URL + `/app.git"}
components:
  - name: main
    container: {image: busybox}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := workspace.AgentConfig{}.WithDefaults()
	out, err := devfile.Generate(d, devfile.Params{WorkspaceID: "w", WorkspaceName: "w", Owner: "o", AgentID: "a", Namespace: "ns", DesiredState: workspace.Running, Agent: cfg})
	if err != nil {
		t.Fatal(err)
	}
	var clone *corev1.Container
	for _, doc := range strings.Split(out, "\n---\n") {
		var dep appsv1.Deployment
		if yaml.Unmarshal([]byte(doc), &dep) == nil && dep.Kind == "Deployment" {
			for i, c := range dep.Spec.Template.Spec.InitContainers {
				if c.Name == devfile.CloneContainerName {
					clone = &dep.Spec.Template.Spec.InitContainers[i]
				}
			}
		}
	}
	if clone == nil || clone.Image != cfg.ToolsImage || len(clone.Command) != 2 || clone.Command[0] != devfile.ToolsBinary || clone.Command[1] != "project-clone" {
		t.Fatalf("clone init container %+v, want %s project-clone from %s", clone, devfile.ToolsBinary, cfg.ToolsImage)
	}
	env := map[string]string{}
	for _, e := range clone.Env {
		env[e.Name] = e.Value
	}
	root := t.TempDir()
	env["PROJECTS_ROOT"] = root // the data volume's mount in the pod
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), func(k string) string { return env[k] }, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if got := readme(t, filepath.Join(root, "app")); got != "feature\n" {
		t.Errorf("app/README = %q, want the feature branch's", got)
	}
	if got := readme(t, filepath.Join(root, "deps", "lib")); got != "main\n" {
		t.Errorf("deps/lib/README = %q, want the default branch's", got)
	}
}

// A project counts as cloned only when its directory holds a repository: an empty directory is
// cloned into, and anything else in the way is an error naming it, never a silent skip.
func TestCloneOnlySkipsRepositories(t *testing.T) {
	served := t.TempDir()
	makeRepo(t, served, "app")
	s, _ := gitServer(t, served, false)
	url := s.URL + "/app.git"

	t.Run("empty directory", func(t *testing.T) {
		root := t.TempDir()
		if err := os.Mkdir(filepath.Join(root, "app"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := Clone(context.Background(), root, []Project{{Name: "app", Path: "app", Remotes: map[string]string{"origin": url}}}, Options{}, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		if got := readme(t, filepath.Join(root, "app")); got != "main\n" {
			t.Errorf("README = %q, want the clone's", got)
		}
	})
	t.Run("nested projects", func(t *testing.T) {
		// Cloning lib into app/lib creates app/, which is no clone of app.
		root := t.TempDir()
		var log bytes.Buffer
		err := Clone(context.Background(), root, []Project{
			{Name: "lib", Path: "app/lib", Remotes: map[string]string{"origin": url}},
			{Name: "app", Path: "app", Remotes: map[string]string{"origin": url}},
		}, Options{}, &log)
		if err == nil || !strings.Contains(err.Error(), `project "app"`) || !strings.Contains(err.Error(), "is not a git repository") {
			t.Errorf("err = %v, want one saying app's directory is not a repository\n%s", err, log.String())
		}
		if strings.Contains(log.String(), "project app: ") && strings.Contains(log.String(), "left as it is") {
			t.Errorf("app was skipped as done: %s", log.String())
		}
	})
	t.Run("a file in the way", func(t *testing.T) {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "app"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := Clone(context.Background(), root, []Project{{Name: "app", Path: "app", Remotes: map[string]string{"origin": url}}}, Options{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "is not a directory") {
			t.Errorf("err = %v, want one saying app is not a directory", err)
		}
	})
}
