package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// TestForgeInsideCluster: the test forge listening inside the cluster's network namespace serves
// what lives there. The real git CLI, run in that namespace, clones a private repository over HTTP
// (a credential helper handing it the owner's token) and over SSH (the owner's key); a pod on the
// real node reads the repository's smart-HTTP advertisement with the token and is refused without.
func TestForgeInsideCluster(t *testing.T) {
	parallel(t)
	cluster := kubetest.Start(t)
	f := forgetest.New(t, forgetest.Options{ListenInside: cluster.ListenInside, InsideHost: kubetest.NodeIP})
	if !strings.HasPrefix(f.InsideHTTPURL(), "http://"+kubetest.NodeIP+":") || !strings.HasPrefix(f.InsideSSHAddr(), kubetest.NodeIP+":") {
		t.Fatalf("inside addresses %q %q", f.InsideHTTPURL(), f.InsideSSHAddr())
	}
	f.AddUser(forgetest.User{Login: "alice", Email: "alice@example.com"})
	head := f.CreateRepo("alice", "app", true, map[string]string{"README.md": "inside\n"})
	token := f.AddToken("alice")

	// git in the cluster's network namespace, with a home of its own.
	home := t.TempDir()
	helper := filepath.Join(home, "cred")
	forgeWriteFile(t, helper, "#!/bin/sh\n[ \"$1\" = get ] && printf 'username=oauth2\\npassword=%s\\n' "+token+"\n", 0o755)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(home, "id")
	forgeWriteFile(t, keyFile, string(pem.EncodeToMemory(block)), 0o600)
	pub, _ := ssh.NewPublicKey(priv.Public())
	f.AddSSHKey("alice", string(ssh.MarshalAuthorizedKey(pub)))
	known := filepath.Join(home, "known_hosts")
	forgeWriteFile(t, known, f.KnownHosts(), 0o600)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0", "GIT_SSH_COMMAND=ssh -F none -i " + keyFile + " -o IdentitiesOnly=yes -o BatchMode=yes -o UserKnownHostsFile=" +
			known + " -o StrictHostKeyChecking=yes"}
	cloneInside := func(url string) string {
		t.Helper()
		dst := filepath.Join(t.TempDir(), "clone")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "git", "-c", "credential.helper="+helper, "clone", "-q", url, dst)
		cmd.Env = env
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cluster.StartInside(cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("git clone %s inside: %v\n%s", url, err, out.String())
		}
		b, err := os.ReadFile(filepath.Join(dst, "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := cloneInside(f.InsideHTTPURL() + "/alice/app.git"); got != "inside\n" {
		t.Fatalf("HTTP clone inside: README.md = %q", got)
	}
	host, port, _ := strings.Cut(f.InsideSSHAddr(), ":")
	if got := cloneInside("ssh://git@" + host + ":" + port + "/alice/app.git"); got != "inside\n" {
		t.Fatalf("SSH clone inside: README.md = %q", got)
	}

	// A pod on the real node: the advertisement with the token; without, wget fails (401).
	ns := cluster.Namespace(t, "forge")
	refs := f.InsideHTTPURL() + "/alice/app.git/info/refs?service=git-upload-pack"
	auth := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("oauth2:"+token))
	script := fmt.Sprintf("wget -q -O - --header '%s' '%s'; echo \"with=$?\"; wget -q -O /dev/null '%s'; echo \"without=$?\"", auth, refs, refs)
	pods := cluster.Client.CoreV1().Pods(ns)
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "git-client"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "client", Image: kubetest.WorkspaceImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/bin/sh", "-c", script},
			}},
		},
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 2*time.Minute, "the git client pod to finish", func(ctx context.Context) error {
		p, err := pods.Get(ctx, "git-client", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	logs, err := pods.GetLogs("git-client", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := string(logs)
	if !strings.Contains(out, "# service=git-upload-pack") || !strings.Contains(out, head+" refs/heads/main") ||
		!strings.Contains(out, "with=0") || strings.Contains(out, "without=0") {
		t.Fatalf("the pod's fetches:\n%s", out)
	}
	var podSaw []string
	for _, a := range f.GitAccesses() {
		podSaw = append(podSaw, fmt.Sprintf("%s %s %q %d", a.Transport, a.Repo, a.User, a.Status))
	}
	want := `http alice/app "" 401`
	if !strings.Contains(strings.Join(podSaw, "\n"), want) {
		t.Fatalf("the forge's log %q lacks %q", podSaw, want)
	}
}

func forgeWriteFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}
