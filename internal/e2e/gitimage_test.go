package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
	"github.com/hangar-dev/hangar/internal/testutil/testca"
)

// gitImageScript runs in a pod of kubetest.WorkspaceGitImage as the workspace user. $HTTP, $HTTPS
// and $SSH are the forge's inside addresses; /etc/gittest holds what the test gives it. It prints
// key=value lines the test checks, and stops at the first unexpected failure (set -e).
const gitImageScript = `set -eu
cd "$HOME"
echo "uid=$(id -u) home=$HOME exec-path=$(git --exec-path)"
export GIT_TERMINAL_PROMPT=0
git config --global user.name 'Alice in a pod'
git config --global user.email alice@example.com

# No credentials: the private repository is refused.
if git clone -q "$HTTP/alice/app.git" anonymous 2>anonymous.err; then echo anonymous=cloned; else echo anonymous=refused; cat anonymous.err; fi

# A credential helper, a shell script, hands git the token the test got from the forge.
cat >git-credential-token <<'EOF'
#!/bin/sh
[ "$1" = get ] || exit 0
echo username=oauth2
echo "password=$(cat /etc/gittest/token)"
EOF
chmod 700 git-credential-token
git config --global credential.helper "$HOME/git-credential-token"
git clone -q "$HTTP/alice/app.git" http
cd http
echo 'pushed over HTTP' >http.txt
git add http.txt
git commit -q -m 'over HTTP from a pod'
git push -q origin HEAD:main
echo "http-commit=$(git rev-parse HEAD)"
cd

# SSH with the user's key and the forge's host key in ~/.ssh (BatchMode: an unknown host fails).
mkdir -m 700 .ssh
cp /etc/gittest/id_ed25519 .ssh/id_ed25519
chmod 600 .ssh/id_ed25519
cp /etc/gittest/known_hosts .ssh/known_hosts
export GIT_SSH_COMMAND='ssh -o BatchMode=yes'
git clone -q "$SSH/alice/app.git" ssh
cd ssh
echo "ssh-sees=$(cat http.txt)"
echo 'pushed over SSH' >ssh.txt
git add ssh.txt
git commit -q -m 'over SSH from a pod'
git push -q origin HEAD:main
echo "ssh-commit=$(git rev-parse HEAD)"
cd

# HTTPS: libcurl trusts the image's CA bundle, which lacks the test's CA; then that CA is given.
if git ls-remote "$HTTPS/alice/app.git" 2>https.err; then echo https-untrusted=listed; else echo https-untrusted=refused; cat https.err; fi
git -c http.sslCAInfo=/etc/gittest/ca.crt ls-remote "$HTTPS/alice/app.git" refs/heads/main | sed 's/^/https-given=/'
echo done
`

// gitImageCAScript runs in a second container of that pod, where the test's CA is one more file
// in /etc/ssl/certs (a subPath mount beside the image's bundle): git trusts it with no option,
// which shows that libcurl reads that directory, where the image's bundle is.
const gitImageCAScript = `set -eu
echo "certs=$(ls /etc/ssl/certs | tr '\n' ' ')"
GIT_TERMINAL_PROMPT=0 git -c credential.helper='!f() { echo username=oauth2; echo "password=$(cat /etc/gittest/token)"; }; f' \
  ls-remote "$HTTPS/alice/app.git" refs/heads/main | sed 's/^/https-default=/'
echo done
`

// TestWorkspaceGitImage: the workspace image with real git (kubetest.WorkspaceGitImage, built by
// scripts/build-workspace-git-image) works in a pod on the real node, as the workspace user (uid
// 5001) with a writable home and a workspace's security context: git clones a private repository
// of the test forge over smart HTTP with a credential helper of its own (a token the test got from
// the forge), commits and pushes; clones over SSH with a key (known_hosts from the forge), commits
// and pushes; and over HTTPS it checks the server's certificate: refused when signed by the test's
// CA, which the image's bundle lacks, listed when that CA is given, and listed with no option in a
// second container where the CA is one more file in /etc/ssl/certs, beside the image's bundle (the
// directory Debian's libcurl reads). The forge sees both pushes.
func TestWorkspaceGitImage(t *testing.T) {
	parallel(t)
	cluster := kubetest.Start(t)
	cluster.LoadWorkspaceGitImage(t)
	f := forgetest.New(t, forgetest.Options{ListenInside: cluster.ListenInside, InsideHost: kubetest.NodeIP})
	f.AddUser(forgetest.User{Login: "alice", Email: "alice@example.com"})
	initial := f.CreateRepo("alice", "app", true, map[string]string{"README.md": "hello\n"})
	token := f.AddToken("alice")
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := ssh.NewPublicKey(priv.Public())
	f.AddSSHKey("alice", string(ssh.MarshalAuthorizedKey(pub)))

	// HTTPS inside the namespace: a TLS reverse proxy to the forge, with a certificate of the
	// test's own CA for the node's address.
	ca := testca.New(t)
	certPEM, keyPEM := ca.Issue(t, kubetest.NodeIP)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := cluster.ListenInside(kubetest.NodeIP + ":0")
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(f.HTTPURL())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: httputil.NewSingleHostReverseProxy(target), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}})) }()
	t.Cleanup(func() { _ = srv.Close() })

	ns := cluster.Namespace(t, "gitimage")
	ctx := context.Background()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "gittest"},
		StringData: map[string]string{
			"token":       token,
			"id_ed25519":  string(pem.EncodeToMemory(block)),
			"known_hosts": f.KnownHosts(),
			"ca.crt":      string(ca.CertPEM),
		},
	}
	if _, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	uid, yes, no := int64(5001), true, false // the workspaces' user and security (internal/devfile)
	container := func(name, script string, mounts ...corev1.VolumeMount) corev1.Container {
		return corev1.Container{
			Name: name, Image: kubetest.WorkspaceGitImage, ImagePullPolicy: corev1.PullNever,
			Command: []string{"/bin/sh", "-c", script},
			Env: []corev1.EnvVar{
				{Name: "HTTP", Value: f.InsideHTTPURL()},
				{Name: "HTTPS", Value: "https://" + ln.Addr().String()},
				{Name: "SSH", Value: "ssh://git@" + f.InsideSSHAddr()},
			},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: &no,
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
			VolumeMounts: append([]corev1.VolumeMount{{Name: "gittest", MountPath: "/etc/gittest", ReadOnly: true}}, mounts...),
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "git"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: &yes, RunAsUser: &uid, FSGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{
				container("git", gitImageScript),
				container("ca", gitImageCAScript, corev1.VolumeMount{
					Name: "gittest", MountPath: "/etc/ssl/certs/hangar-test-ca.crt", SubPath: "ca.crt", ReadOnly: true,
				}),
			},
			Volumes: []corev1.Volume{{Name: "gittest", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "gittest"}}}},
		},
	}
	pods := cluster.Client.CoreV1().Pods(ns)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	kubetest.Eventually(t, 3*time.Minute, "the git pod to finish", func(ctx context.Context) error {
		p, err := pods.Get(ctx, "git", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if phase = p.Status.Phase; phase != corev1.PodSucceeded && phase != corev1.PodFailed {
			return fmt.Errorf("phase %s", phase)
		}
		return nil
	})
	logs := map[string]string{}
	for _, c := range pod.Spec.Containers {
		b, err := pods.GetLogs("git", &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		logs[c.Name] = string(b)
	}
	if phase != corev1.PodSucceeded || !strings.HasSuffix(logs["git"], "done\n") || !strings.HasSuffix(logs["ca"], "done\n") {
		t.Fatalf("the pod's scripts: %s\n--- git:\n%s--- ca:\n%s", phase, logs["git"], logs["ca"])
	}
	// containerOutput is a container's key=value lines (the first of each key).
	containerOutput := func(name string) map[string]string {
		kv := map[string]string{}
		for _, line := range strings.Split(logs[name], "\n") {
			if k, v, ok := strings.Cut(line, "="); ok && regexp.MustCompile(`^[a-z-]+$`).MatchString(k) {
				if _, seen := kv[k]; !seen {
					kv[k] = v
				}
			}
		}
		return kv
	}
	out, gitOut := logs["git"], containerOutput("git")
	value := func(key string) string {
		v, ok := gitOut[key]
		if !ok {
			t.Fatalf("no %s= in the git container's output:\n%s", key, out)
		}
		return v
	}

	if got, want := value("uid"), "5001 home=/home/user exec-path=/usr/lib/git-core"; got != want {
		t.Errorf("uid=%s, want uid=%s", got, want)
	}
	if got := value("anonymous"); got != "refused" {
		t.Errorf("a clone without credentials: %s\n%s", got, out)
	}
	httpCommit, sshCommit := value("http-commit"), value("ssh-commit")
	if got := value("ssh-sees"); got != "pushed over HTTP" {
		t.Errorf("the SSH clone's http.txt = %q, want the commit pushed over HTTP", got)
	}
	if head := f.Head("alice", "app"); head != sshCommit || httpCommit == sshCommit {
		t.Errorf("the forge's main is %s, want the commit pushed over SSH %s (after %s over HTTP)", head, sshCommit, httpCommit)
	}
	if got := f.ReadFile("alice", "app", "http.txt") + f.ReadFile("alice", "app", "ssh.txt"); got != "pushed over HTTP\npushed over SSH\n" {
		t.Errorf("the forge's files: %q", got)
	}
	// The forge's log: the anonymous clone refused, then alice reads and writes on both transports.
	saw := map[string]bool{}
	for _, a := range f.GitAccesses() {
		saw[fmt.Sprintf("%s %q write=%v %d", a.Transport, a.User, a.Write, a.Status)] = true
	}
	for _, want := range []string{`http "" write=false 401`, `http "alice" write=false 200`, `http "alice" write=true 200`,
		`ssh "alice" write=false 200`, `ssh "alice" write=true 200`} {
		if !saw[want] {
			t.Errorf("the forge's log lacks %s: %v", want, saw)
		}
	}
	// libcurl checks certificates (against /etc/ssl/certs, its CA path, where the image's bundle
	// is), and with the test's CA given lists the branch the SSH push moved.
	if got := value("https-untrusted"); got != "refused" || !strings.Contains(out, "server certificate verification failed") {
		t.Errorf("HTTPS with an unknown CA: %s, want refused for the certificate:\n%s", got, out)
	}
	if got, want := value("https-given"), sshCommit+"\trefs/heads/main"; got != want {
		t.Errorf("HTTPS with the test's CA given: %q, want %q", got, want)
	}
	caOut := containerOutput("ca")
	if got, want := caOut["certs"], "ca-certificates.crt hangar-test-ca.crt "; got != want {
		t.Errorf("the ca container's /etc/ssl/certs: %q, want %q", got, want)
	}
	if got := caOut["https-default"]; got != initial+"\trefs/heads/main" && got != httpCommit+"\trefs/heads/main" && got != sshCommit+"\trefs/heads/main" {
		t.Errorf("HTTPS with the test's CA in /etc/ssl/certs: %q, want one of the commits on main", got)
	}
}
