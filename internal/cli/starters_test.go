package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/tfmodule"
)

// templates init lists the starters, writes one (a module that packs and parses as pushed), and
// refuses to write over a file or to write an unknown starter, naming the starters.
func TestTemplatesInitTerraformStarter(t *testing.T) {
	c := newCLI(t, nil)
	if out := c.ok("templates", "init"); !strings.Contains(out, "STARTER") || !regexp.MustCompile(`\nterraform-kubernetes-pod +A Terraform template whose machine is a pod`).MatchString(out) {
		t.Errorf("templates init lists:\n%s", out)
	}
	dir := filepath.Join(t.TempDir(), "pods")
	out := c.ok("templates", "init", "terraform-kubernetes-pod", "--directory", dir)
	if want := "wrote " + filepath.Join(dir, "main.tf") + "\nNext: hangar templates push terraform-kubernetes-pod --directory " + dir + "\n"; out != want {
		t.Errorf("templates init wrote:\n%q\nwant\n%q", out, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "description.txt")); err == nil {
		t.Error("the starter's description was written into the template")
	}
	archive, err := tfmodule.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(archive) == 0 {
		t.Fatal("the starter packs to nothing")
	}
	if got := c.fail("templates", "init", "terraform-kubernetes-pod", "--directory", dir); !strings.Contains(got, filepath.Join(dir, "main.tf")+" exists already") {
		t.Errorf("writing over the starter: %q", got)
	}
	if got := c.run("templates", "init", "nosuch"); got.code == 0 || !strings.Contains(got.stderr, `no starter is named "nosuch" (starters: `) || !strings.Contains(got.stderr, "terraform-kubernetes-pod") {
		t.Errorf("an unknown starter: exit %d %q", got.code, got.stderr)
	}
}
