package registrytest_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
	"github.com/hangar-dev/hangar/internal/testutil/registrytest"
)

// The registry inside the cluster's network namespace serves the real node and its pods: the
// node's containerd pulls the workspace-git image (pushed from the host over loopback, under a
// name nothing preloads) and a pod runs it; a pod reads the catalog and a Feature's manifest and
// pushes a blob, all through the inside address; every other registry still fails at once; and
// the host has no route to the inside address.
func TestInClusterRegistryOnRealNode(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	reg := registrytest.StartInCluster(t, c)
	host, _, err := net.SplitHostPort(reg.InsideAddr)
	if err != nil || host != kubetest.NodeIP {
		t.Fatalf("InsideAddr %q, want %s:PORT", reg.InsideAddr, kubetest.NodeIP)
	}
	want := filepath.Join(c.Dir, "containerd/certs.d", reg.InsideAddr, "hosts.toml")
	if reg.HostsTOML != want {
		t.Errorf("HostsTOML %q, want %q", reg.HostsTOML, want)
	}
	if b, err := os.ReadFile(want); err != nil || !strings.Contains(string(b), `server = "http://`+reg.InsideAddr+`"`) {
		t.Errorf("the node's hosts.toml for %s: %q %v", reg.InsideAddr, b, err)
	}

	image := registrytest.PushWorkspaceGitImage(t, reg)
	if want := reg.InsideAddr + "/hangar/workspace-git:dev"; image != want {
		t.Fatalf("PushWorkspaceGitImage returned %q, want %q", image, want)
	}
	if out := ctr(t, c, "images", "ls", "-q"); strings.Contains(out, reg.InsideAddr) {
		t.Fatalf("the node has %s before any pull:\n%s", image, out)
	}
	// The same image plus a layer that exists nowhere else (a fresh marker file): whatever the node
	// has cached from other tests, it must fetch that layer from the registry to run this one.
	marker, markerLayer, marked := markedImage(t, reg, kubetest.BuildImageArchive(t, "build-workspace-git-image"))
	feature := registrytest.PublishFeature(t, reg, registrytest.FeaturesDir()+"/hello", "devcontainers/features/hello", "1")
	blob := "pushed from a pod\n"
	sum := sha256.Sum256([]byte(blob))
	digest := "sha256:" + hex.EncodeToString(sum[:])

	ns := c.Namespace(t, "registry")
	pods := c.Client.CoreV1().Pods(ns)
	run := func(name, image string, pull corev1.PullPolicy, script string) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr(int64(0)),
				Containers: []corev1.Container{{
					Name: "main", Image: image, ImagePullPolicy: pull,
					Command: []string{"/bin/sh", "-c", script},
					SecurityContext: &corev1.SecurityContext{
						RunAsUser: ptr(int64(5001)), RunAsNonRoot: ptr(true), AllowPrivilegeEscalation: ptr(false),
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					},
				}},
			},
		}
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The node pulls the image from the registry (Always: the node must ask it).
	run("pulled", image, corev1.PullAlways, "git --version && id -u && echo ran from the registry")
	run("marked", marked, corev1.PullIfNotPresent, "cat /etc/registrytest-marker")
	// A pod of the preloaded busybox image talks to the registry's API.
	api := "http://" + reg.InsideAddr + "/v2"
	run("client", kubetest.WorkspaceImage, corev1.PullIfNotPresent, strings.Join([]string{
		"set -e",
		"wget -q -O - " + api + "/_catalog",
		"echo",
		"wget -q -O - --header 'Accept: application/vnd.oci.image.manifest.v1+json' " + api + "/devcontainers/features/hello/manifests/1",
		"echo",
		"printf '" + strings.TrimSuffix(blob, "\n") + "\\n' > /tmp/blob",
		"wget -q -O - --post-file /tmp/blob '" + api + "/frompod/blobs/uploads/?digest=" + digest + "'",
		"echo pushed",
	}, "\n"))
	// Any other registry still goes nowhere and fails at once.
	run("elsewhere", "registry.example.com/team/nothing:1", corev1.PullIfNotPresent, "true")

	logs := map[string]string{}
	kubetest.Eventually(t, 3*time.Minute, "the pods to end", func(ctx context.Context) error {
		for _, name := range []string{"pulled", "marked", "client"} {
			if _, ok := logs[name]; ok {
				continue
			}
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			switch p.Status.Phase {
			case corev1.PodSucceeded, corev1.PodFailed:
				b, err := pods.GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
				if err != nil {
					return err
				}
				if p.Status.Phase == corev1.PodFailed {
					t.Fatalf("pod %s failed: %+v\n%s", name, p.Status.ContainerStatuses, b)
				}
				logs[name] = string(b)
			default:
				for _, cs := range p.Status.ContainerStatuses {
					if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
						t.Fatalf("pod %s: the node could not pull %s: %s", name, cs.Image, w.Message)
					}
				}
				return fmt.Errorf("pod %s: %s %+v", name, p.Status.Phase, p.Status.ContainerStatuses)
			}
		}
		return nil
	})
	t.Logf("pulled:\n%s\nclient:\n%s", logs["pulled"], logs["client"])
	if !strings.Contains(logs["pulled"], "git version 2.") || !strings.Contains(logs["pulled"], "5001\nran from the registry") {
		t.Errorf("the pod of %s logged %q, want git's version, uid 5001 and its message", image, logs["pulled"])
	}
	for _, want := range []string{`"hangar/workspace-git"`, `"devcontainers/features/hello"`, "application/vnd.devcontainers.layer.v1+tar", "dev.containers.metadata", "devcontainer-feature-hello.tgz", "pushed"} {
		if !strings.Contains(logs["client"], want) {
			t.Errorf("the client pod's log lacks %q", want)
		}
	}
	if got := string(get(t, "http://"+reg.Addr+"/v2/frompod/blobs/"+digest, "")); got != blob {
		t.Errorf("the blob the pod pushed reads %q on loopback, want %q", got, blob)
	}
	if !strings.Contains(feature, reg.InsideAddr+"/devcontainers/features/hello:1") {
		t.Errorf("PublishFeature returned %q, want the inside address", feature)
	}

	// What the registry saw: the node's pull and the pod's requests came to the inside listener.
	seen := map[string]bool{}
	for _, r := range reg.Requests() {
		seen[r.String()] = true
	}
	for _, want := range []string{
		"inside HEAD /v2/hangar/workspace-git/manifests/dev 200", // containerd resolves the tag, then GETs by digest
		"inside GET /v2/_catalog 200",
		"inside GET /v2/devcontainers/features/hello/manifests/1 200",
		"inside POST /v2/frompod/blobs/uploads/ 201",
	} {
		if !seen[want] {
			t.Errorf("the registry did not answer %q; it answered %v", want, reg.Requests())
		}
	}
	if strings.TrimSpace(logs["marked"]) != marker {
		t.Errorf("the pod of %s logged %q, want the marker %q", marked, logs["marked"], marker)
	}
	if want := "inside GET /v2/hangar/workspace-git/blobs/" + markerLayer + " 200"; !seen[want] {
		t.Errorf("the node did not fetch the marker's layer: no %q among %v", want, reg.Requests())
	}
	if out := ctr(t, c, "images", "ls", "-q"); !strings.Contains(out, image) {
		t.Errorf("the node does not list %s after the pull:\n%s", image, out)
	}

	// The pod of another registry's image fails to pull at once, at kubetest.NoRegistry.
	kubetest.Eventually(t, 30*time.Second, "the other registry's pull to fail", func(ctx context.Context) error {
		p, err := pods.Get(ctx, "elsewhere", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") && w.Message != "" {
				if !strings.Contains(w.Message, kubetest.NoRegistry) {
					t.Errorf("pull error %q, want one naming %s", w.Message, kubetest.NoRegistry)
				}
				return nil
			}
		}
		return fmt.Errorf("phase %s: %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})

	// The host never dials the inside address: it has no route to it, and a dial fails at once.
	if out, err := exec.Command("ip", "route", "get", kubetest.NodeIP).CombinedOutput(); err == nil {
		t.Errorf("the host has a route to %s: %s", kubetest.NodeIP, out)
	}
	begin := time.Now()
	client := &http.Client{Timeout: 5 * time.Second}
	if resp, err := client.Get("http://" + reg.InsideAddr + "/v2/"); err == nil {
		resp.Body.Close()
		t.Errorf("the host reached %s", reg.InsideAddr)
	} else if took := time.Since(begin); took > time.Second {
		t.Errorf("a dial of %s from the host took %v to fail (%v), want at once", reg.InsideAddr, took, err)
	}
}

// The registry's node configuration goes when its test ends; the cluster's own stays.
func TestInClusterRegistryCleansUp(t *testing.T) {
	c := kubetest.Start(t)
	var dir string
	t.Run("registry", func(t *testing.T) {
		reg := registrytest.StartInCluster(t, c)
		dir = filepath.Dir(reg.HostsTOML)
		if _, err := os.Stat(reg.HostsTOML); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after the test: %v", dir, err)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "containerd/certs.d/_default/hosts.toml")); err != nil {
		t.Errorf("the cluster's own hosts.toml: %v", err)
	}
}

func ctr(t *testing.T, c *kubetest.Cluster, args ...string) string {
	t.Helper()
	sock := filepath.Join(c.Dir, "containerd/containerd.sock")
	out, err := exec.Command("ctr", append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func ptr[T any](v T) *T { return &v }

// markedImage pushes the image of the docker archive plus one layer holding
// /etc/registrytest-marker, a random text, as hangar/workspace-git:marked-TEXT, and returns the
// text, the new layer's digest and the image's reference for pods.
func markedImage(t *testing.T, reg *registrytest.Registry, archive string) (marker, layerDigest, ref string) {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	marker = hex.EncodeToString(b)
	base, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	img, layer := registrytest.AppendFiles(t, base, registrytest.File{Name: "etc/registrytest-marker", Mode: 0o644, Data: []byte(marker + "\n")})
	d, err := layer.Digest()
	if err != nil {
		t.Fatal(err)
	}
	tag := "hangar/workspace-git:marked-" + marker
	registrytest.PushImage(t, reg, img, tag)
	return marker, d.String(), reg.Ref(tag)
}
