// Package kubetest gives tests a real Kubernetes cluster started by scripts/kube-up: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler, a real node (RealNode: a kubelet with
// containerd, runc and the CNI bridge, in a network namespace of the cluster's own, with the images
// WorkspaceImage and HangarImage preloaded, WorkspaceGitImage on demand, and a default storage
// class), and a simulated node (KwokNode: kwok, no containers, tainted so that only pods that
// tolerate it land there). See docs/kube-test-cluster.md.
//
// Start uses the cluster named by HANGAR_TEST_KUBECONFIG when that is set. Otherwise it runs
// scripts/kube-up into a temporary directory, once per test binary; a test binary that uses
// Start has a TestMain calling Main, which stops that cluster (scripts/kube-down) when the tests
// end. Should the test binary die first, a watchdog started with the cluster stops it.
//
// Pods land on the real node unless they tolerate KwokTaint (and select KwokNode with the label
// type=kwok). The simulated node runs every pod at once: Deployments become available within a
// second. Pods there labelled hangar-test/crashloop=true instead stay Running, not Ready, with their
// containers waiting in CrashLoopBackOff, as a kubelet shows a crashing container.
//
// Tests share the cluster: give each its own namespace (Namespace does that).
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
)

const (
	// EnvKubeconfig names the kubeconfig of an existing cluster to use instead of starting one.
	EnvKubeconfig = "HANGAR_TEST_KUBECONFIG"
	// EnvKeep, when set to 1, leaves the cluster started by Start running after the tests (its
	// directory is printed; stop it with scripts/kube-down DIR).
	EnvKeep = "HANGAR_KUBETEST_KEEP"

	// CrashLoopLabel on a pod (template) makes the fake kubelet show its containers crash-looping.
	CrashLoopLabel = "hangar-test/crashloop"

	// RealNode runs containers; KwokNode only pretends to.
	RealNode = "hangar-node-0"
	KwokNode = "kwok-node-0"
	// KwokTaint (effect NoSchedule) keeps pods off KwokNode unless they tolerate it; the node's
	// label type=kwok selects it.
	KwokTaint = "kwok.x-k8s.io/node"
	// Images on the real node (no registry is reachable): a busybox userland (/bin/sh and the usual
	// commands), and the same plus the hangar binary at /usr/local/bin/hangar.
	WorkspaceImage = "hangar.local/workspace:dev"
	HangarImage    = "hangar.local/hangar:dev"
	// WorkspaceGitImage is WorkspaceImage's busybox plus real git (smart HTTP(S) and SSH) and
	// OpenSSH's client, its user uid 5001 with HOME /home/user. It is not preloaded: a test calls
	// Cluster.LoadWorkspaceGitImage first (scripts/build-workspace-git-image builds it).
	WorkspaceGitImage = "hangar.local/workspace-git:dev"
	// NoRegistry is where the real node's containerd sends every pull (kube-up's hosts.toml): an
	// address of the cluster's namespace where nothing listens, so that a pull of an image that is
	// not loaded fails at once and nothing leaves the machine.
	NoRegistry = "127.0.0.1:1"
)

// Cluster is a running cluster with admin access.
type Cluster struct {
	Kubeconfig string // path of an admin kubeconfig
	Client     kubernetes.Interface
	Config     *rest.Config
	// Dir is the cluster's directory (scripts/kube-up DIR): the real node's volumes are under
	// Dir/volumes, one folder per claim.
	Dir string
}

var (
	mu       sync.Mutex
	cluster  *Cluster
	startErr error
	ownDir   string // the directory of the cluster this process started, if any
)

// Start returns the cluster, starting it on first use. It never skips: if no cluster can be had it
// fails the test with the reason (and kube-up's output, logs included).
func Start(t testing.TB) *Cluster {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if cluster == nil && startErr == nil {
		cluster, startErr = start(t)
	}
	if startErr != nil {
		t.Fatalf("kubetest: %v", startErr)
	}
	return cluster
}

func start(t testing.TB) (*Cluster, error) {
	if kc := os.Getenv(EnvKubeconfig); kc != "" {
		c, err := connect(kc)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %v", EnvKubeconfig, kc, err)
		}
		return c, nil
	}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hangar-kube-")
	if err != nil {
		return nil, err
	}
	begin := time.Now()
	cmd := exec.Command(filepath.Join(root, "scripts", "kube-up"), dir)
	cmd.Env = append(os.Environ(), "KUBE_UP_WATCH_PID="+strconv.Itoa(os.Getpid()))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	ownDir = dir // whatever happened, Main stops what may run there
	if runErr != nil {
		return nil, fmt.Errorf("scripts/kube-up %s failed (%v) after %v:\n%s\n"+
			"(set %s to the kubeconfig of a running cluster to use that one instead)",
			dir, runErr, time.Since(begin).Round(time.Millisecond), out.String(), EnvKubeconfig)
	}
	t.Logf("kubetest: started a cluster in %s in %v", dir, time.Since(begin).Round(time.Millisecond))
	c, err := connect(filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return nil, fmt.Errorf("cluster in %s: %v", dir, err)
	}
	return c, nil
}

func connect(kubeconfig string) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return nil, fmt.Errorf("API server not ready: %v", err)
	}
	return &Cluster{Kubeconfig: kubeconfig, Client: client, Config: cfg, Dir: filepath.Dir(kubeconfig)}, nil
}

// Main runs the tests and then stops the cluster Start started, if any. Use it as
//
//	func TestMain(m *testing.M) { kubetest.Main(m) }
//
// If tests failed, the cluster's directory (logs included) is kept and its path printed.
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	dir := ownDir
	mu.Unlock()
	if dir != "" {
		if os.Getenv(EnvKeep) == "1" {
			fmt.Fprintf(os.Stderr, "kubetest: %s=1: the cluster keeps running; KUBECONFIG=%s; "+
				"stop it with scripts/kube-down %s\n", EnvKeep, filepath.Join(dir, "kubeconfig"), dir)
		} else {
			if err := stop(dir); err != nil {
				fmt.Fprintf(os.Stderr, "kubetest: %v\n", err)
				if code == 0 {
					code = 1
				}
			}
			if code == 0 {
				_ = os.RemoveAll(dir)
			} else {
				fmt.Fprintf(os.Stderr, "kubetest: the cluster's logs are kept in %s\n", dir)
			}
		}
	}
	os.Exit(code)
}

func stop(dir string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	out, err := exec.Command(filepath.Join(root, "scripts", "kube-down"), dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("scripts/kube-down %s: %v\n%s", dir, err, out)
	}
	return nil
}

// repoRoot finds the repository: the nearest directory above the working directory (a package
// directory under go test) that holds scripts/kube-up.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(filepath.Join(d, "scripts", "kube-up")); err == nil && !fi.IsDir() {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no scripts/kube-up in %s or above it", wd)
		}
	}
}

// Namespace creates a namespace with a fresh name starting with prefix, deleted when the test
// ends (without waiting for it to go), and returns its name.
func (c *Cluster) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := strings.ToLower(prefix) + "-" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("kubetest: create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("kubetest: delete namespace %s: %v", name, err)
		}
	})
	return name
}

// Eventually calls check every 100 ms until it returns nil, failing the test if it still returns
// an error after timeout; what describes the wait, and check's last error (which should say what
// the state is instead) is shown on failure.
func Eventually(t testing.TB, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubetest: timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Exec runs a command in a container of a pod through the API server, as `kubectl exec` does, and
// returns its standard output and error.
func (c *Cluster) Exec(ctx context.Context, namespace, pod, container string, command ...string) (stdout, stderr string, err error) {
	req := c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(c.Config, "POST", req.URL())
	if err != nil {
		return "", "", err
	}
	var out, errOut bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	return out.String(), errOut.String(), err
}
