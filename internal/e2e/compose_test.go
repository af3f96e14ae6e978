package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/devcontainer"
	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// A docker-compose devcontainer runs on the real node as one pod: the primary service is the
// main container, where the repository (bound as ../.. in the compose file, as the Dev Containers
// templates do) is cloned under /workspaces; the web service is a second container of the pod,
// busybox httpd serving a named volume that both mount. From the main container, the web
// service is reached by its compose name: the page the main container wrote into the shared
// volume comes back from http://web:8080/.
func TestComposeDevcontainerOnRealNode(t *testing.T) {
	parallel(t)
	r := setUpRealNode(t)
	loadEditor(t, r.cluster)
	r.gitRepo(t, "app", "the repository\n")
	repo := fstest.MapFS{
		".devcontainer/devcontainer.json": {Data: []byte(`{"dockerComposeFile": "compose.yml", "service": "dev", "workspaceFolder": "/workspaces/${localWorkspaceFolderBasename}"}`)},
		".devcontainer/compose.yml": {Data: []byte(`
services:
  dev:
    image: ` + kubetest.WorkspaceImage + `
    volumes: ["../..:/workspaces:cached", "site:/site"]
    command: sleep infinity
  web:
    image: ` + kubetest.WorkspaceImage + `
    command: ["httpd", "-f", "-p", "8080", "-h", "/srv/site"]
    volumes: ["site:/srv/site"]
    expose: ["8080"]
    restart: unless-stopped
volumes:
  site:
`)},
	}
	res, err := devcontainer.Translate(repo[".devcontainer/devcontainer.json"].Data, devcontainer.Options{
		Basename: "app", ID: "compose", FromRepository: true, Repo: repo, Dir: ".devcontainer"})
	if err != nil {
		t.Fatal(err)
	}
	text, err := devfile.WithFirstProject(res.Devfile, r.gitURL+"/app.git", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w, err := r.c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "compose", Agent: r.agent, Devfile: string(text)})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			_ = r.cluster.Client.CoreV1().Namespaces().Delete(context.Background(), w.Namespace, metav1.DeleteOptions{})
		}
	})
	if !strings.Contains(strings.Join(w.Warnings, "\n"), "(dev, web) is 127.0.0.1") {
		t.Errorf("the warnings do not say that the services' names are 127.0.0.1: %q", w.Warnings)
	}
	waitFor(t, r.c, w.Name, r.realTime, "Running", state("Running", "Running"))
	p := r.pod(t, w.Namespace, "the compose workspace's pod to be ready", ready)
	var names []string
	for _, c := range p.Spec.Containers {
		names = append(names, c.Name)
	}
	if len(names) < 2 || names[0] != "devcontainer" || names[1] != "web" {
		t.Fatalf("containers %q, want devcontainer and web", names)
	}

	if got := r.exec(t, p, "devcontainer", "cat /workspaces/app/README && echo served-from-the-volume > /site/index.html"); got != "the repository\n" {
		t.Errorf("the repository in the main container: %q", got)
	}
	var page string
	kubetest.Eventually(t, 30*time.Second, "the web service to answer by its name", func(ctx context.Context) error {
		out, errOut, err := r.cluster.Exec(ctx, p.Namespace, p.Name, "devcontainer", "wget", "-qO-", "http://web:8080/")
		if err != nil {
			return fmt.Errorf("wget http://web:8080/: %v (%s)", err, strings.TrimSpace(errOut))
		}
		page = out
		return nil
	})
	if page != "served-from-the-volume\n" {
		t.Errorf("http://web:8080/ from the main container: %q, want the file written into the shared volume", page)
	}
	// Both containers run as the pod's non-root user.
	if out := r.exec(t, p, "web", "id -u"); strings.TrimSpace(out) == "0" || p.Spec.SecurityContext.RunAsNonRoot == nil || !*p.Spec.SecurityContext.RunAsNonRoot {
		t.Errorf("web runs as uid %q", out)
	}
	r.terminate(t, w, false)
}
