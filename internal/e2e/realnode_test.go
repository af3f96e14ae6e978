package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// realNode is what the real-node tests share: one server, one agent whose workspaces run on the
// cluster's real node (kubelet, containerd, runc), a probe pod that fetches pages over the pod
// network, and a git server inside the cluster's network namespace.
type realNode struct {
	cluster  *kubetest.Cluster
	srv      *server
	c        *sdk.Client
	agent    string
	probeNS  string // the probe pod "probe" runs there
	gitURL   string // http://NodeIP:PORT: repositories under it are served to the pods
	gitDir   string // the served bare repositories
	gitHits  atomic.Int64
	realTime time.Duration // how long a real-node transition may take
}

// TestRealNode runs workspaces on the real node, end to end: what the user sees through the API
// (and the CLI), and what the cluster holds (objects, processes, files), for a web workspace, data
// kept across stop, start and restart, a crashing container, a missing image, a project clone with
// a postStart event, and a clone that fails. Every subtest ends by terminating its workspace and
// checking that nothing of it is left: objects, volumes, and the volume's folder on the node.
func TestRealNode(t *testing.T) {
	parallel(t)
	r := setUpRealNode(t)
	t.Run("WebEndpoint", r.testWebEndpoint)
	t.Run("DataSurvivesStopStartRestart", r.testDataSurvives)
	t.Run("CrashLoop", r.testCrashLoop)
	t.Run("MissingImage", r.testMissingImage)
	t.Run("HomeWritable", r.testHomeWritable)
	t.Run("CloneAndPostStart", r.testCloneAndPostStart)
	t.Run("FailedClone", r.testFailedClone)
}

func setUpRealNode(t *testing.T) *realNode {
	t.Helper()
	r := &realNode{cluster: kubetest.Start(t), srv: startServer(t), agent: "real", realTime: 90 * time.Second}
	token := r.srv.registerRealAgent(t, r.agent, "")
	startAgent(t, r.srv, r.cluster, r.agent, token, "hangar-agent-real")
	r.c = r.srv.client(t, r.srv.AdminToken)

	// The probe: a pod on the real node that fetches pages from other pods.
	r.probeNS = r.cluster.Namespace(t, "realnode-probe")
	zero := int64(0)
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name: "probe", Image: kubetest.WorkspaceImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sleep", "3600"},
			}},
		},
	}
	if _, err := r.cluster.Client.CoreV1().Pods(r.probeNS).Create(context.Background(), probe, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The git server: git http-backend, listening inside the cluster's network namespace.
	r.gitDir = t.TempDir()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git is needed to serve the projects: %v", err)
	}
	backend := &cgi.Handler{
		Path:   filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env:    []string{"GIT_PROJECT_ROOT=" + r.gitDir, "GIT_HTTP_EXPORT_ALL=1"},
		Stderr: io.Discard, // "Not a git repository" for the missing one, on purpose
	}
	l, err := r.cluster.ListenInside(net.JoinHostPort(kubetest.NodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.gitHits.Add(1)
		backend.ServeHTTP(w, req)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	r.gitURL = "http://" + l.Addr().String()
	return r
}

// create creates a workspace from devfile on the real agent, and returns it as the API answered.
func (r *realNode) create(t *testing.T, name, devfile string) sdk.Workspace {
	t.Helper()
	w, err := r.c.CreateWorkspace(context.Background(), sdk.CreateWorkspaceRequest{Name: name, Agent: r.agent, Devfile: devfile})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if len(w.Warnings) > 0 {
		t.Errorf("create %s: unexpected warnings %q", name, w.Warnings)
	}
	// A test that fails before terminating its workspace leaves no namespace behind for the next.
	t.Cleanup(func() {
		if t.Failed() {
			_ = r.cluster.Client.CoreV1().Namespaces().Delete(context.Background(), w.Namespace, metav1.DeleteOptions{})
		}
	})
	return w
}

// pod returns the workspace's one pod that is not being deleted, once check passes for it.
func (r *realNode) pod(t *testing.T, ns, what string, check func(*corev1.Pod) error) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	kubetest.Eventually(t, r.realTime, what, func(ctx context.Context) error {
		pods, err := r.cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		if len(live) != 1 {
			return fmt.Errorf("%d pods not being deleted in %s (%d in all)", len(live), ns, len(pods.Items))
		}
		got = &live[0]
		if got.Spec.NodeName != kubetest.RealNode {
			return fmt.Errorf("pod %s is on node %q, want %s", got.Name, got.Spec.NodeName, kubetest.RealNode)
		}
		return check(got)
	})
	return got
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func ready(p *corev1.Pod) error {
	if !podReady(p) {
		return fmt.Errorf("pod %s: phase %s, not ready: %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
	}
	return nil
}

// exec runs a shell script in a container of a workspace pod through the API server (kubectl
// exec), failing the test if it fails.
func (r *realNode) exec(t *testing.T, p *corev1.Pod, container, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, errOut, err := r.cluster.Exec(ctx, p.Namespace, p.Name, container, "/bin/sh", "-c", script)
	if err != nil {
		t.Fatalf("exec %q in %s/%s: %v (stderr %q)", script, p.Name, container, err, errOut)
	}
	return out
}

// fetch gets a page from the probe pod, over the pod network.
func (r *realNode) fetch(ctx context.Context, url string) (string, error) {
	out, errOut, err := r.cluster.Exec(ctx, r.probeNS, "probe", "probe", "wget", "-q", "-O", "-", url) // no -T: this busybox wget dies of SIGSEGV with it
	if err != nil {
		return "", fmt.Errorf("wget %s: %v (%s)", url, err, strings.TrimSpace(errOut))
	}
	return out, nil
}

func token() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// volumeFolders lists the folders on the node that hold the claims of namespace ns, checking that
// they are the cluster's local volumes and exist.
func (r *realNode) volumeFolders(t *testing.T, ns string) map[string]string {
	t.Helper()
	ctx := context.Background()
	claims, err := r.cluster.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	folders := map[string]string{} // PV name -> folder
	for _, pvc := range claims.Items {
		if pvc.Spec.VolumeName == "" {
			t.Fatalf("claim %s/%s is not bound (%s)", ns, pvc.Name, pvc.Status.Phase)
		}
		pv, err := r.cluster.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pv.Spec.HostPath == nil || !strings.HasPrefix(pv.Spec.HostPath.Path, filepath.Join(r.cluster.Dir, "volumes")+"/") {
			t.Fatalf("volume %s of claim %s is not a folder under %s/volumes: %+v", pv.Name, pvc.Name, r.cluster.Dir, pv.Spec.PersistentVolumeSource)
		}
		if _, err := os.Stat(pv.Spec.HostPath.Path); err != nil {
			t.Fatalf("volume %s: %v", pv.Name, err)
		}
		folders[pv.Name] = pv.Spec.HostPath.Path
	}
	if len(folders) == 0 {
		t.Fatalf("namespace %s has no claim: the check that none is left would prove nothing", ns)
	}
	return folders
}

// terminate deletes the workspace (with `hangar delete --wait` when viaCLI) and checks that nothing
// of it is left: Terminated through the API, its namespace (so every object in it) gone, no volume
// bound to one of its claims, and no data on the node.
func (r *realNode) terminate(t *testing.T, w sdk.Workspace, viaCLI bool) {
	t.Helper()
	ctx := context.Background()
	folders := r.volumeFolders(t, w.Namespace)
	if viaCLI {
		if out, err := runCLI(r.srv, "delete", w.Name, "--yes", "--wait"); err != nil {
			t.Fatalf("hangar delete %s --wait: %v\n%s", w.Name, err, out)
		}
		got, err := r.c.Workspace(ctx, w.Name)
		if err != nil || got.ActualState != "Terminated" {
			t.Fatalf("after hangar delete --wait the API shows %s (%v)", got.ActualState, err)
		}
	} else {
		if _, err := r.c.UpdateWorkspace(ctx, w.Name, sdk.UpdateWorkspaceRequest{DesiredState: "Terminated"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, r.c, w.Name, r.realTime, "Terminated", state("Terminated", "Terminated"))
	}
	kubetest.Eventually(t, r.realTime, "nothing of "+w.Name+" to be left", func(ctx context.Context) error {
		if _, err := r.cluster.Client.CoreV1().Namespaces().Get(ctx, w.Namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s still there (%v)", w.Namespace, err)
		}
		pvs, err := r.cluster.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, pv := range pvs.Items {
			if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == w.Namespace {
				return fmt.Errorf("volume %s of claim %s still there (%s)", pv.Name, pv.Spec.ClaimRef.Name, pv.Status.Phase)
			}
		}
		for pv, folder := range folders {
			if _, err := os.Stat(folder); !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("folder %s of volume %s still on the node (%v)", folder, pv, err)
			}
		}
		return nil
	})
}

// A web workspace: busybox httpd serves a page from the project volume on a public endpoint, next
// to an internal and an unexposed port. Its postStart event waits until the page is served, so the
// workspace may be Running only once the real server answers: while the container runs but the
// page is missing, the API must not say Running; once the page is written, Running through the API
// means the page can be fetched from another pod at that moment.
func (r *realNode) testWebEndpoint(t *testing.T) {
	ctx := context.Background()
	devfile := `schemaVersion: 2.3.0
metadata:
  name: web
components:
  - name: web
    container:
      image: ` + kubetest.WorkspaceImage + `
      command: ["/bin/sh", "-c"]
      args: ["trap 'exit 0' TERM INT; mkdir -p /projects/www && httpd -f -p 8080 -h /projects/www & wait"]
      endpoints:
        - name: http
          targetPort: 8080
          exposure: public
        - name: metrics
          targetPort: 9090
          exposure: internal
        - name: debug
          targetPort: 5858
          exposure: none
commands:
  - id: wait-for-page
    exec:
      component: web
      commandLine: until wget -q -O /dev/null http://127.0.0.1:8080/index.html; do sleep 0.2; done
events:
  postStart: [wait-for-page]
`
	w := r.create(t, "web", devfile)

	// The container runs on the real node (kubectl exec reaches its processes) while its postStart
	// (run by the helper, which serves SSH, the readiness probe, only after it) waits for the page:
	// the pod is not ready, and the API does not say Running.
	var p *corev1.Pod
	kubetest.Eventually(t, r.realTime, "kubectl exec to reach httpd in the web container", func(ctx context.Context) error {
		pods, err := r.cluster.Client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != 1 {
			return fmt.Errorf("pods: %d (%v)", len(pods.Items), err)
		}
		p = &pods.Items[0]
		if p.Spec.NodeName != kubetest.RealNode {
			return fmt.Errorf("pod %s is on node %q, want %s", p.Name, p.Spec.NodeName, kubetest.RealNode)
		}
		out, errOut, err := r.cluster.Exec(ctx, p.Namespace, p.Name, "web", "pidof", "httpd")
		if err != nil || strings.TrimSpace(out) == "" {
			return fmt.Errorf("pidof httpd: %q %v (%s)", out, err, strings.TrimSpace(errOut))
		}
		return nil
	})
	seen, err := r.c.Workspace(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if seen.ActualState == "Running" {
		t.Fatalf("the API says Running while the container's postStart still waits for the page")
	}
	if p, err := r.cluster.Client.CoreV1().Pods(w.Namespace).Get(ctx, p.Name, metav1.GetOptions{}); err != nil || podReady(p) {
		t.Fatalf("pod ready while its postStart waits (%v)", err)
	}
	t.Logf("httpd runs, postStart waits: the API shows %s", seen.ActualState)

	// The probe is ready before the workspace may be Running (the page is still missing).
	kubetest.Eventually(t, r.realTime, "the probe pod to run", func(ctx context.Context) error {
		p, err := r.cluster.Client.CoreV1().Pods(r.probeNS).Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return ready(p)
	})
	page := "hello-" + token() + "\n"
	r.exec(t, p, "web", "echo "+strings.TrimSpace(page)+" > /projects/www/index.html")
	waitFor(t, r.c, "web", r.realTime, "Running", state("Running", "Running"))
	// At this moment: the pod is ready, and another pod fetches the page.
	p, err = r.cluster.Client.CoreV1().Pods(w.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !podReady(p) || p.Status.PodIP == "" {
		t.Fatalf("the API says Running; the pod: ready %v, IP %q, containers %+v", podReady(p), p.Status.PodIP, p.Status.ContainerStatuses)
	}
	got, err := r.fetch(ctx, "http://"+net.JoinHostPort(p.Status.PodIP, "8080")+"/index.html")
	if err != nil || got != page {
		t.Fatalf("the API says Running, and the page at the pod's IP is %q (%v), want %q", got, err, page)
	}
	// The process that serves it is the container's, as the user asked.
	if out := r.exec(t, p, "web", "id -u; cat /proc/$(pidof httpd)/cmdline | tr '\\0' ' '"); out != "5001\nhttpd -f -p 8080 -h /projects/www " {
		t.Errorf("exec shows user and httpd %q", out)
	}

	// Endpoints by exposure: public and internal in the Service (only public in public-ports),
	// none in neither the Service nor the NetworkPolicy; all three declared by the container. The
	// helper's SSH port is a Service port too (the proxy finds the pod by it), never public.
	svc, err := r.cluster.Client.CoreV1().Services(w.Namespace).Get(ctx, w.KubeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var svcPorts []string
	for _, sp := range svc.Spec.Ports {
		svcPorts = append(svcPorts, fmt.Sprintf("%s:%d", sp.Name, sp.Port))
	}
	if want := []string{"http:8080", "metrics:9090", "hangar-ssh:60022"}; !slices.Equal(svcPorts, want) {
		t.Errorf("Service ports %v, want %v (no port 5858 of the exposure-none endpoint)", svcPorts, want)
	}
	if got := svc.Annotations["hangar.dev/public-ports"]; got != "8080" {
		t.Errorf("hangar.dev/public-ports = %q, want 8080 (the internal 9090 is no route)", got)
	}
	np, err := r.cluster.Client.NetworkingV1().NetworkPolicies(w.Namespace).Get(ctx, w.KubeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var npPorts []int
	for _, rule := range np.Spec.Ingress {
		for _, port := range rule.Ports {
			if port.Port != nil {
				npPorts = append(npPorts, port.Port.IntValue())
			}
		}
	}
	slices.Sort(npPorts)
	// 60022: the injected helper's SSH port, for the proxy's pods only (TestWorkspaceHelper).
	if want := []int{8080, 9090, 60022}; !slices.Equal(npPorts, want) {
		t.Errorf("NetworkPolicy ingress ports %v, want %v", npPorts, want)
	}
	var declared []int
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			declared = append(declared, int(cp.ContainerPort))
		}
	}
	slices.Sort(declared)
	if want := []int{5858, 8080, 9090, 60022}; !slices.Equal(declared, want) {
		t.Errorf("container ports %v, want %v", declared, want)
	}

	r.terminate(t, w, false)
}

// Data written to the project volume survives a stop and a start, and a restart: each brings a new
// pod with the same volume.
func (r *realNode) testDataSurvives(t *testing.T) {
	ctx := context.Background()
	devfile := `schemaVersion: 2.2.0
metadata:
  name: keep
components:
  - name: dev
    container:
      image: ` + kubetest.WorkspaceImage + `
`
	w := r.create(t, "keep", devfile)
	waitFor(t, r.c, "keep", r.realTime, "Running", state("Running", "Running"))
	p := r.pod(t, w.Namespace, "the keep pod to be ready", ready)
	data := token()
	r.exec(t, p, "dev", "echo "+data+" > /projects/kept.txt")
	// The data is on the node, in the claim's folder.
	var onNode bool
	for _, folder := range r.volumeFolders(t, w.Namespace) {
		if b, err := os.ReadFile(filepath.Join(folder, "kept.txt")); err == nil && string(b) == data+"\n" {
			onNode = true
		}
	}
	if !onNode {
		t.Fatalf("kept.txt is in no volume folder on the node")
	}

	pods := map[string]bool{string(p.UID): true}
	readBack := func(after string) {
		t.Helper()
		p := r.pod(t, w.Namespace, "a ready keep pod after "+after, func(p *corev1.Pod) error {
			if pods[string(p.UID)] {
				return fmt.Errorf("still the pod from before the %s", after)
			}
			return ready(p)
		})
		pods[string(p.UID)] = true
		if got := r.exec(t, p, "dev", "cat /projects/kept.txt"); got != data+"\n" {
			t.Errorf("after %s /projects/kept.txt holds %q, want %q", after, got, data+"\n")
		}
	}

	if _, err := r.c.UpdateWorkspace(ctx, "keep", sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r.c, "keep", r.realTime, "Stopped", state("Stopped", "Stopped"))
	kubetest.Eventually(t, r.realTime, "the stopped workspace to have no pod", func(ctx context.Context) error {
		list, err := r.cluster.Client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 0 {
			return fmt.Errorf("%d pods (%v)", len(list.Items), err)
		}
		return nil
	})
	if _, err := r.c.UpdateWorkspace(ctx, "keep", sdk.UpdateWorkspaceRequest{DesiredState: "Running"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r.c, "keep", r.realTime, "Running", state("Running", "Running"))
	readBack("stop and start")

	before, err := r.c.Workspace(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(r.srv, "restart", "keep", "--wait"); err != nil {
		t.Fatalf("hangar restart keep --wait: %v\n%s", err, out)
	}
	after := waitFor(t, r.c, "keep", r.realTime, "Running after the restart", func(w sdk.Workspace) bool {
		return w.DesiredState == "Running" && w.ActualState == "Running" && w.DesiredStateUpdatedAt.After(*before.DesiredStateUpdatedAt)
	})
	if !after.ActualStateUpdatedAt.After(*before.ActualStateUpdatedAt) {
		t.Errorf("the restart did not go through Stopped: actual state last changed %v, before the restart %v", after.ActualStateUpdatedAt, before.ActualStateUpdatedAt)
	}
	readBack("restart")

	r.terminate(t, w, true)
}

// failed waits until the API shows the workspace Failed with a pod error whose message has one of
// reasons, checks `hangar show` says so too, and returns the time it took from start.
func (r *realNode) failed(t *testing.T, name string, start time.Time, reasons ...string) sdk.Workspace {
	t.Helper()
	w := waitFor(t, r.c, name, r.realTime, "Failed", state("Running", "Failed"))
	took := time.Since(start)
	if w.Error == nil || w.Error.Type != "pod" || !slices.ContainsFunc(reasons, func(s string) bool { return strings.Contains(w.Error.Message, s) }) {
		t.Fatalf("Failed, but the user is not told why: error %+v, want type pod and one of %q", w.Error, reasons)
	}
	t.Logf("create → Failed in %v: %q", took.Round(time.Millisecond), w.Error.Message)
	// Within seconds, not at the Deployment's 600 s progress deadline.
	if took > 60*time.Second {
		t.Errorf("Failed only %v after creation", took)
	}
	out, err := runCLI(r.srv, "show", name)
	if err != nil || !strings.Contains(out, w.Error.Message) {
		t.Errorf("hangar show %s does not give the reason %q (%v):\n%s", name, w.Error.Message, err, out)
	}
	return w
}

// A container whose command exits is Failed at once with its exit code (a real kubelet shows the
// container terminated for about 10 s before it shows CrashLoopBackOff), then with
// CrashLoopBackOff, as the API and the CLI show it.
func (r *realNode) testCrashLoop(t *testing.T) {
	start := time.Now()
	w := r.create(t, "crash", crashDevfile)
	r.failed(t, "crash", start, "container dev exited with code 3", "CrashLoopBackOff")
	got := waitFor(t, r.c, "crash", r.realTime, "Failed with CrashLoopBackOff", func(w sdk.Workspace) bool {
		return w.ActualState == "Failed" && w.Error != nil && strings.HasPrefix(w.Error.Message, "CrashLoopBackOff: container dev: back-off")
	})
	t.Logf("create → CrashLoopBackOff through the API in %v: %s", time.Since(start).Round(time.Millisecond), got.Error.Message)
	if !strings.HasSuffix(got.Error.Message, "exited with code 3") {
		t.Errorf("the CrashLoopBackOff error does not give the last exit code: %q", got.Error.Message)
	}
	r.pod(t, w.Namespace, "the crash pod to show the exit", func(p *corev1.Pod) error {
		for _, cs := range p.Status.ContainerStatuses {
			if term := cs.LastTerminationState.Terminated; term != nil && term.ExitCode == 3 && cs.RestartCount > 0 {
				return nil
			}
		}
		return fmt.Errorf("container statuses %+v", p.Status.ContainerStatuses)
	})
	r.terminate(t, w, false)
}

// testHomeWritable: in a workspace of the image every local cluster preloads, the workspace user
// (uid 5001) has a HOME of its own that it can write, as a shell in the editor's terminal or
// `hangar ssh` would use it (issue 21: HOME was /home/nonroot, root's, and `touch ~/x` failed).
func (r *realNode) testHomeWritable(t *testing.T) {
	w := r.create(t, "home", "schemaVersion: 2.2.0\ncomponents:\n  - name: dev\n    container:\n      image: "+kubetest.WorkspaceImage+"\n")
	waitFor(t, r.c, "home", r.realTime, "Running", state("Running", "Running"))
	p := r.pod(t, w.Namespace, "the home pod to be ready", ready)
	if out := r.exec(t, p, "dev", `echo "uid=$(id -u) home=$HOME"; touch ~/x && echo touched`); out != "uid=5001 home=/home/user\ntouched\n" {
		t.Errorf("as the workspace user: %q, want uid=5001 home=/home/user, and touch ~/x to succeed", out)
	}
	r.terminate(t, w, false)
}

// An image the node does not have, and cannot pull, is Failed with the pull's reason, and the way
// to load it.
func (r *realNode) testMissingImage(t *testing.T) {
	devfile := `schemaVersion: 2.2.0
metadata:
  name: missing
components:
  - name: dev
    container:
      image: hangar.local/no-such-image:dev
`
	start := time.Now()
	w := r.create(t, "missing", devfile)
	failed := r.failed(t, "missing", start, "ErrImagePull", "ImagePullBackOff")
	// The node pulls from no registry: the failure says what to do. (The pull itself fails in
	// milliseconds, TestMissingImageFailsAtOnce; the kubelet may show it in the pod's status only at
	// its next sync of the pod, up to 15 s later.)
	if msg := failed.Error.Message; !strings.Contains(msg, "the image hangar.local/no-such-image:dev is not on the node") || !strings.Contains(msg, "scripts/kube-load-image DIR ARCHIVE") {
		t.Errorf("the failure %q does not say that the image is not on the node and how to load it", msg)
	}
	r.pod(t, w.Namespace, "the missing pod to show the pull failure", func(p *corev1.Pod) error {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") && cs.Image == "hangar.local/no-such-image:dev" {
				return nil
			}
		}
		return fmt.Errorf("container statuses %+v", p.Status.ContainerStatuses)
	})
	r.terminate(t, w, false)
}

// gitRepo makes a bare repository NAME.git served by the git server, with one commit holding
// README = content.
func (r *realNode) gitRepo(t *testing.T, name, content string) {
	t.Helper()
	work := t.TempDir()
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(work, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(work, "README"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	git(work, "add", "README")
	git(work, "commit", "-q", "-m", "first")
	git(r.gitDir, "clone", "-q", "--bare", work, name+".git")
}

// The devfile's project is cloned, from a git server inside the cluster's network, into the
// project volume before the workspace starts, and its postStart event runs in the clone.
func (r *realNode) testCloneAndPostStart(t *testing.T) {
	readme := "cloned " + token() + "\n"
	r.gitRepo(t, "app", readme)
	remote := r.gitURL + "/app.git"
	hitsBefore := r.gitHits.Load()
	devfile := `schemaVersion: 2.3.0
metadata:
  name: cloned
projects:
  - name: app
    git:
      remotes:
        origin: ` + remote + `
components:
  - name: dev
    container:
      image: ` + kubetest.WorkspaceImage + `
commands:
  - id: mark
    exec:
      component: dev
      workingDir: ${PROJECT_SOURCE}
      commandLine: pwd > /projects/poststart.txt && cat README >> /projects/poststart.txt
events:
  postStart: [mark]
`
	w := r.create(t, "cloned", devfile)
	waitFor(t, r.c, "cloned", r.realTime, "Running", state("Running", "Running"))
	p := r.pod(t, w.Namespace, "the cloned pod to be ready", ready)
	if hits := r.gitHits.Load() - hitsBefore; hits == 0 {
		t.Errorf("the git server was asked nothing")
	}
	// The clone init container ran, and succeeded.
	var clone *corev1.ContainerStatus
	for i := range p.Status.InitContainerStatuses {
		if p.Status.InitContainerStatuses[i].Name == "hangar-project-clone" {
			clone = &p.Status.InitContainerStatuses[i]
		}
	}
	if clone == nil || clone.State.Terminated == nil || clone.State.Terminated.ExitCode != 0 {
		t.Fatalf("clone init container status %+v", clone)
	}
	if got := r.exec(t, p, "dev", "cat /projects/app/README"); got != readme {
		t.Errorf("/projects/app/README = %q, want %q", got, readme)
	}
	if got := r.exec(t, p, "dev", "grep -c 'url = "+remote+"' /projects/app/.git/config"); got != "1\n" {
		t.Errorf("the clone's .git/config names the remote %q times, want once", strings.TrimSpace(got))
	}
	// postStart ran after the clone, in PROJECT_SOURCE.
	if got, want := r.exec(t, p, "dev", "cat /projects/poststart.txt"), "/projects/app\n"+readme; got != want {
		t.Errorf("postStart wrote %q, want %q", got, want)
	}
	// The clone is a startup step the agent reported, with its progress and log.
	kubetest.Eventually(t, 30*time.Second, "the clone's step", func(ctx context.Context) error {
		got, err := r.c.Workspace(ctx, "cloned")
		if err != nil {
			return err
		}
		for _, st := range got.StartupSteps {
			if st.Name == "project-clone" && st.State == "done" && st.Detail == "project app: done" && strings.Contains(st.Log, "project app: cloning "+remote) {
				return nil
			}
		}
		return fmt.Errorf("steps %+v", got.StartupSteps)
	})
	r.terminate(t, w, false)
}

// A clone that fails (no such repository) makes the workspace Failed within seconds, with the
// reason, not at the Deployment's progress deadline.
func (r *realNode) testFailedClone(t *testing.T) {
	devfile := `schemaVersion: 2.3.0
metadata:
  name: noclone
projects:
  - name: app
    git:
      remotes:
        origin: ` + r.gitURL + `/no-such-repository.git
components:
  - name: dev
    container:
      image: ` + kubetest.WorkspaceImage + `
`
	start := time.Now()
	w := r.create(t, "noclone", devfile)
	got := r.failed(t, "noclone", start, "hangar-project-clone")
	// The clone's own error (the tail of its log, as its termination message) is what the user sees.
	if !strings.Contains(got.Error.Message, "no-such-repository.git: repository not found") {
		t.Errorf("the user is not told what the clone said: %q", got.Error.Message)
	}
	r.pod(t, w.Namespace, "the noclone pod to show the failed clone", func(p *corev1.Pod) error {
		for _, cs := range p.Status.InitContainerStatuses {
			if term := cs.State.Terminated; term != nil && term.ExitCode != 0 {
				return nil
			}
			if term := cs.LastTerminationState.Terminated; term != nil && term.ExitCode != 0 {
				return nil
			}
		}
		return fmt.Errorf("init container statuses %+v", p.Status.InitContainerStatuses)
	})
	r.terminate(t, w, false)
}
