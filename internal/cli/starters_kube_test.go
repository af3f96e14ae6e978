package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/devfile"
)

// TestTemplatesInitKubernetesStarter: `hangar templates init` lists the starters, writes one into --directory with
// the commands that use it, refuses to write over a file (writing nothing), and names the starters
// when given an unknown one. The Kubernetes starter is a devfile that parses, asks for the web
// editor, and runs the image the local cluster preloads (TestKubernetesStarter runs it there).
func TestTemplatesInitKubernetesStarter(t *testing.T) {
	c := newCLI(t, nil)
	list := c.ok("templates", "init")
	if !strings.HasPrefix(list, "STARTER") || !regexp.MustCompile(`\nkubernetes +A Kubernetes devfile`).MatchString(list) {
		t.Errorf("templates init lists:\n%s", list)
	}
	dir := filepath.Join(t.TempDir(), "k")
	out := c.ok("templates", "init", "kubernetes", "--directory", dir)
	if want := "wrote " + filepath.Join(dir, "devfile.yaml") + "\nNext: hangar templates push kubernetes --devfile " + filepath.Join(dir, "devfile.yaml") + "\n"; out != want {
		t.Errorf("templates init kubernetes said:\n%q\nwant\n%q", out, want)
	}
	b, err := os.ReadFile(filepath.Join(dir, "devfile.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := devfile.Parse(b)
	if err != nil {
		t.Fatalf("the starter's devfile: %v", err)
	}
	if port, _, ok := d.PublicEndpoint(); !d.HasEditor() || !ok || port != devfile.EditorPort || !strings.Contains(string(b), "image: "+devfile.EditorImage+"\n") {
		t.Errorf("the starter's devfile: editor %v, public port %d, want the editor on %s:\n%s", d.HasEditor(), port, devfile.EditorImage, b)
	}
	if err := os.WriteFile(filepath.Join(dir, "devfile.yaml"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if e := c.fail("templates", "init", "kubernetes", "--directory", dir); !strings.Contains(e, "devfile.yaml exists already") {
		t.Errorf("writing over a file: %s", e)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "devfile.yaml")); string(b) != "mine" {
		t.Errorf("the user's file was overwritten: %q", b)
	}
	r := c.run("templates", "init", "nope")
	if r.code == 0 || !strings.Contains(r.stderr, `no starter is named "nope" (starters: kubernetes`) {
		t.Errorf("an unknown starter: exit %d, %s", r.code, r.stderr)
	}
}
