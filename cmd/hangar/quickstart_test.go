package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/devfile"
)

// TestServerNextHintOpensTheEditor follows the Kubernetes line of the server's "Next:" hint as a
// new user would, word for word, in an empty directory: the workspace it makes opens the web editor
// (its URL is the editor's port) on the image the local cluster preloads, where the hint of issue
// 21 made one on a public image the local cluster cannot pull, on a port where nothing listened.
// TestKubernetesStarter (internal/e2e) runs that starter on the real node.
func TestServerNextHintOpensTheEditor(t *testing.T) {
	dir := t.TempDir()
	bin := buildHangar(t)
	lines, stderr := startServerOutput(t, bin, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--provisioners", "0")
	var url, kube string
	timeout := time.After(60 * time.Second)
	for kube == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the server ended before its Kubernetes hint:\n%s", stderr.String())
			}
			if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(line); m != nil {
				url = m[1]
			}
			if strings.Contains(line, "(Kubernetes") {
				kube = line
			}
		case <-timeout:
			t.Fatalf("no Kubernetes hint:\n%s", stderr.String())
		}
	}
	tok, err := os.ReadFile(filepath.Join(dir, "data", "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	work, home := filepath.Join(dir, "work"), filepath.Join(dir, "home")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "HANGAR_URL=", "HANGAR_TOKEN=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("hangar %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("login", "--url", url, "--token", strings.TrimSpace(string(tok)))
	hint := strings.TrimSpace(kube[:strings.Index(kube, "(Kubernetes")])
	for _, step := range strings.Split(hint, " && ") {
		f := strings.Fields(step)
		if len(f) == 0 || f[0] != "hangar" {
			t.Fatalf("the hint's step %q is not a hangar command (hint %q)", step, kube)
		}
		run(f[1:]...)
	}
	var w struct {
		URL      string `json:"url"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal([]byte(run("show", "my-workspace", "-o", "json")), &w); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(w.URL, "https://60001-my-workspace--admin.") {
		t.Errorf("the hinted workspace's URL is %q, want the web editor's (port 60001)", w.URL)
	}
	if df := run("templates", "pull", w.Template, "--archive", "-"); w.Template == "" || !strings.Contains(df, "image: "+devfile.EditorImage) {
		t.Errorf("the hinted workspace's template %q does not run the image the local cluster preloads (%s):\n%s", w.Template, devfile.EditorImage, df)
	}
}
