package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/devfile"
)

// TestDevcontainerWorkspace: a workspace defined by a devcontainer.json (JSONC, as repositories
// have it), created with `hangar create --devcontainer` on the real node: `hangar show` says how it
// was defined and lists its forwarded port; through `hangar ssh`, the file its postCreateCommand
// wrote is there, written with the remote environment, and a session has containerEnv and remoteEnv
// (PATH extended from the image's own), and the web editor has the file's VS Code settings; after a stop and a start, postStartCommand ran again and
// postCreateCommand did not.
func TestDevcontainerWorkspace(t *testing.T) {
	parallel(t)
	e := setUpProxy(t)
	loadEditor(t, e.cluster)
	aliceToken, alice := e.user(t, "alice")
	au := cliUser{url: e.srv.URL, token: aliceToken, home: t.TempDir()}
	must := func(args ...string) string { t.Helper(); return au.must(t, args...) }
	file := filepath.Join(t.TempDir(), "devcontainer.json")
	dc := `// .devcontainer/devcontainer.json
{
	"name": "e2e",
	"image": "` + devfile.EditorImage + `", // a shell and the web editor, loaded into the node
	"forwardPorts": [7000],
	"portsAttributes": {"7000": {"label": "web"}},
	"containerEnv": {"DC_CONTAINER": "from-container"},
	"remoteEnv": {
		"DC_REMOTE": "remote-${containerEnv:DC_CONTAINER}",
		"PATH": "${containerEnv:PATH}:/opt/dc/bin",
	},
	/* once per workspace */
	"postCreateCommand": "echo \"created $DC_REMOTE\" >> ${containerWorkspaceFolder}/created.txt",
	"postStartCommand": ["sh", "-c", "echo started >> /workspaces/dc/started.txt"],
	"hostRequirements": {"cpus": 0.5, "memory": "512mb"},
	"customizations": {"vscode": {"settings": {"editor.tabSize": 3}}},
}
`
	if err := os.WriteFile(file, []byte(dc), 0o600); err != nil {
		t.Fatal(err)
	}
	must("create", "dc", "--agent", e.agent, "--devcontainer", file, "--wait")
	w, err := alice.Workspace(context.Background(), "dc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			_ = e.cluster.Client.CoreV1().Namespaces().Delete(context.Background(), w.Namespace, metav1.DeleteOptions{})
		}
	})
	show := must("show", "dc")
	if !strings.Contains(show, "devcontainer.json") || !strings.Contains(show, "7000") {
		t.Errorf("hangar show dc does not say it was defined by a devcontainer.json, with port 7000:\n%s", show)
	}

	ssh := func(script string) (string, string, int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, errOut, code := au.run(t, "ssh", "dc", "--", script)
			if code != 255 || time.Now().After(deadline) {
				return out, errOut, code
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	const script = `cat /workspaces/dc/created.txt /workspaces/dc/started.txt; echo "$DC_CONTAINER|$DC_REMOTE|${PATH##*:}"`
	if out, errOut, code := ssh(script); code != 0 || out != "created remote-from-container\nstarted\nfrom-container|remote-from-container|/opt/dc/bin\n" {
		t.Fatalf("hangar ssh dc: exit %d stdout %q stderr %q; want the postCreate and postStart files and the environment", code, out, errOut)
	}

	// The web editor's user settings are the file's.
	if out, errOut, code := ssh("cat /workspaces/dc/.hangar/code-server/data/User/settings.json"); code != 0 || !strings.Contains(out, `"editor.tabSize": 3`) {
		t.Errorf("the web editor's settings: exit %d stdout %q stderr %q", code, out, errOut)
	}

	must("stop", "dc", "--wait")
	must("start", "dc", "--wait")
	if out, errOut, code := ssh(script); code != 0 || out != "created remote-from-container\nstarted\nstarted\nfrom-container|remote-from-container|/opt/dc/bin\n" {
		t.Fatalf("after stop and start: exit %d stdout %q stderr %q; want postStart again and postCreate not", code, out, errOut)
	}
	must("delete", "dc", "--yes", "--wait")
}
