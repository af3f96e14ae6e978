package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// corpusSample are real devfiles of the corpus (internal/devfile/testdata/corpus, sources in its
// SOURCES.tsv), one or more from each source, that the server accepts. Their images cannot be pulled
// here; nothing else of them is changed.
var corpusSample = []string{
	"devfile-registry/devfile_registry/stacks/go/1.0.2/devfile.yaml",
	"devfile-registry/devfile_registry/stacks/nodejs/2.2.1/devfile.yaml",
	"eclipse-che/che-samples_python-hello-world/devfile.yaml",
	"eclipse-che/che-samples_nodejs-mongodb-sample/devfile.yaml",
	"gitlab/diffblue_gitlab/ee/spec/fixtures/remote_development/example.devfile.yaml",
	"other/aokellermann_gitlab-workspaces-example-nodejs-express-app/.devfile.yaml",
}

// localDevfile puts the workspace image of the real node in place of every container image (none
// can be pulled here) and drops the projects (their remotes are on the internet; cloning is tested
// against a local git server elsewhere).
func localDevfile(t *testing.T, data []byte) (string, int) {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "projects")
	delete(doc, "dependentProjects")
	containers := 0
	comps, _ := doc["components"].([]any)
	for _, c := range comps {
		if m, ok := c.(map[string]any); ok {
			if ctr, ok := m["container"].(map[string]any); ok {
				ctr["image"] = kubetest.WorkspaceImage
				containers++
			}
		}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), containers
}

// A sample of the corpus runs on the real node: each workspace reaches Running through the API with
// every container of the devfile running in its pod (and the web editor, for the GitLab devfiles
// that ask for it: inside their main container, whose readiness waits for it), and is gone after
// delete.
func TestCorpusSampleRunsOnRealNode(t *testing.T) {
	parallel(t)
	cluster := kubetest.Start(t)
	loadEditor(t, cluster)
	srv := startServer(t)
	tokenFile := srv.registerRealAgent(t, "corpus", "")
	startAgent(t, srv, cluster, "corpus", tokenFile, "hangar-agent-corpus")
	c := srv.client(t, srv.AdminToken)
	ctx := context.Background()

	for i, rel := range corpusSample {
		t.Run(filepath.Base(filepath.Dir(rel))+"/"+filepath.Base(rel), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("../devfile/testdata/corpus", rel))
			if err != nil {
				t.Fatal(err)
			}
			text, containers := localDevfile(t, data)
			d, err := devfile.Parse([]byte(text))
			if err != nil {
				t.Fatal(err)
			}
			if d.HasEditor() && !d.EditorInMain() {
				containers++ // the editor's own container
			}
			name := fmt.Sprintf("corpus-%d", i)
			ws, err := c.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: name, Agent: "corpus", Devfile: text})
			if err != nil {
				t.Fatalf("create from %s: %v", rel, err)
			}
			waitFor(t, c, name, 2*time.Minute, "Running", func(w sdk.Workspace) bool {
				if w.ActualState == "Failed" || w.ActualState == "Error" {
					t.Fatalf("%s: %s (%+v)", rel, w.ActualState, w.Error)
				}
				return w.ActualState == "Running"
			})
			// Every container running and ready. A readiness probe may miss once on a loaded
			// node (parallel tests): the pod is looked at again for a while, not once.
			kubetest.Eventually(t, time.Minute, rel+": every container running and ready", func(ctx context.Context) error {
				pods, err := cluster.Client.CoreV1().Pods(ws.Namespace).List(ctx, metav1.ListOptions{})
				if err != nil {
					return err
				}
				var running []string
				for _, p := range pods.Items {
					if p.DeletionTimestamp != nil {
						continue
					}
					if p.Spec.NodeName != kubetest.RealNode {
						t.Fatalf("pod %s on node %q, want %s", p.Name, p.Spec.NodeName, kubetest.RealNode)
					}
					for _, cs := range p.Status.ContainerStatuses {
						if cs.State.Running == nil || !cs.Ready {
							return fmt.Errorf("container %s is not running and ready: %+v", cs.Name, cs.State)
						}
						running = append(running, cs.Name)
					}
				}
				if len(running) != containers {
					return fmt.Errorf("%d container components; running and ready: %v", containers, running)
				}
				return nil
			})

			// Delete, and wait for the namespace to go before the next one (the node has 2 CPUs).
			if _, err := c.UpdateWorkspace(ctx, name, sdk.UpdateWorkspaceRequest{DesiredState: "Terminated"}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, c, name, 2*time.Minute, "Terminated", state("Terminated", "Terminated"))
			kubetest.Eventually(t, 2*time.Minute, "namespace "+ws.Namespace+" to be gone", func(ctx context.Context) error {
				_, err := cluster.Client.CoreV1().Namespaces().Get(ctx, ws.Namespace, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("still there (%v)", err)
			})
		})
	}
}
