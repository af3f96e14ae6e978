package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestCreateFromDevcontainer: `hangar create --devcontainer FILE` against the real server: the
// translation's warnings on stderr, `hangar show` saying how the workspace was defined, with the
// forwarded port; a file the server refuses is refused naming its fields; --devcontainer with
// --devfile is refused naming both.
func TestCreateFromDevcontainer(t *testing.T) {
	env := servertest.New(t)
	c := newCLI(t, map[string]string{"HANGAR_URL": env.URL, "HANGAR_TOKEN": env.AdminToken})
	c.ok("agents", "create", "eu")
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{
	// comments, as the real files have them
	"image": "mcr.microsoft.com/devcontainers/base:ubuntu",
	"forwardPorts": [8080],
	"portsAttributes": {"8080": {"label": "api"}},
	"customizations": {"vscode": {"extensions": ["golang.go"]}},
}`)
	r := c.run("create", "dc", "--agent", "eu", "--devcontainer", good)
	if r.code != 0 || !strings.Contains(r.stderr, "customizations.vscode.extensions (golang.go) are not installed") {
		t.Fatalf("create: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	show := c.ok("show", "dc")
	if !strings.Contains(show, "Defined by") || !strings.Contains(show, "devcontainer.json") || !strings.Contains(show, "api") || !strings.Contains(show, "8080") {
		t.Errorf("hangar show dc:\n%s", show)
	}

	bad := write("bad.json", `{"image": "i", "privileged": true, "runArgs": ["--cap-add=SYS_ADMIN"]}`)
	stderr := c.fail("create", "bad", "--agent", "eu", "--devcontainer", bad)
	for _, want := range []string{"devcontainer.privileged", "devcontainer.runArgs[0]"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("refused create: stderr %q, want %q", stderr, want)
		}
	}
	df := write("devfile.yaml", "schemaVersion: 2.2.0\ncomponents:\n  - name: m\n    container: {image: busybox}\n")
	if stderr := c.fail("create", "both", "--agent", "eu", "--devcontainer", good, "--devfile", df); !strings.Contains(stderr, "devcontainer") || !strings.Contains(stderr, "devfile") {
		t.Errorf("both: stderr %q", stderr)
	}
}
