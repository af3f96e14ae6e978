package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// sshDevfile: a busybox workspace whose command serves a page on port 7000, which no endpoint
// exposes (port-forward reaches it anyway), and then waits.
const sshDevfile = `schemaVersion: 2.2.0
components:
  - name: dev
    container:
      image: ` + kubetest.WorkspaceImage + `
      command: ["sh", "-c", "mkdir -p /tmp/www && echo forwarded page > /tmp/www/index.html && httpd -p 7000 -h /tmp/www && exec sleep 1000000"]
`

// cliUser runs the hangar binary as one user, with a home (login file, known_hosts) of its own.
type cliUser struct {
	url, token, home string
}

func (u cliUser) cmd(args ...string) *exec.Cmd {
	c := exec.Command(binary, args...)
	c.Env = append(os.Environ(), "HANGAR_URL="+u.url, "HANGAR_TOKEN="+u.token, "HOME="+u.home, "XDG_CONFIG_HOME="+filepath.Join(u.home, ".config"))
	return c
}

// must runs the command and returns its stdout; a failure ends the test with both outputs.
func (u cliUser) must(t testing.TB, args ...string) string {
	t.Helper()
	out, errOut, code := u.run(t, args...)
	if code != 0 {
		t.Fatalf("hangar %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// run returns stdout, stderr and the exit code.
func (u cliUser) run(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	c := u.cmd(args...)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = c.Process.Kill()
		t.Fatalf("hangar %q did not end in 60 s; stdout %q stderr %q", args, out.String(), errOut.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), errOut.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), 0
}

// TestSSH: what users see of SSH through `hangar proxy` on the real node: `hangar ssh`, OpenSSH's
// ssh and sftp through `hangar config-ssh`, `hangar port-forward`, refusals, activity, revocation
// and a stopped workspace.
func TestSSH(t *testing.T) {
	parallel(t)
	e := setUpProxy(t)
	ctx := context.Background()
	aliceToken, alice := e.user(t, "alice")
	bobToken, _ := e.user(t, "bob")
	home := t.TempDir()
	au := cliUser{url: e.srv.URL, token: aliceToken, home: home}
	bu := cliUser{url: e.srv.URL, token: bobToken, home: t.TempDir()}

	w, err := alice.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: "dev", Agent: e.agent, Devfile: sshDevfile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			_ = e.cluster.Client.CoreV1().Namespaces().Delete(context.Background(), w.Namespace, metav1.DeleteOptions{})
		}
	})
	waitFor(t, alice, "dev", 120*time.Second, "Running", func(w sdk.Workspace) bool { return w.ActualState == "Running" })
	pods, err := e.cluster.Client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of dev: %v %v", pods, err)
	}
	podName := pods.Items[0].Name

	t.Run("HangarSSHRunsInThePod", func(t *testing.T) {
		// Running may be seen a moment before the EndpointSlice says the pod is ready.
		deadline := time.Now().Add(30 * time.Second)
		var out, errOut string
		var code int
		for {
			out, errOut, code = au.run(t, "ssh", "dev", "--", "hostname")
			if code == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if code != 0 || out != podName+"\n" {
			t.Fatalf("hangar ssh dev -- hostname: exit %d, stdout %q, stderr %q; want the pod's name %q", code, out, errOut, podName)
		}
		if _, errOut, code := au.run(t, "ssh", "dev", "--", "echo", "to-stderr", ">&2;", "exit", "7"); code != 7 || errOut != "to-stderr\n" {
			t.Errorf("a failing command: exit %d stderr %q, want 7 and its stderr", code, errOut)
		}
		// The proxy's host key was trusted on first use and kept.
		kh, err := os.ReadFile(filepath.Join(home, ".config", "hangar", "known_hosts"))
		if err != nil || !strings.Contains(string(kh), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(e.sshHostKey)))) {
			t.Errorf("known_hosts %q %v, want the proxy's host key", kh, err)
		}
	})

	t.Run("OthersAreRefused", func(t *testing.T) {
		if out, errOut, code := bu.run(t, "ssh", "alice/dev", "--", "hostname"); code == 0 || strings.Contains(out, podName) {
			t.Errorf("bob: exit %d %q %q", code, out, errOut)
		}
		// Straight at the proxy, past the CLI's own check.
		for _, tc := range []struct{ user, password, want string }{
			{"alice/dev", bobToken, `bob has no workspace "alice/dev"`},
			{"dev", bobToken, `bob has no workspace "dev"`},
			{"dev", "hgu_notatoken", "token is not valid"},
		} {
			_, err := e.dialSSH(tc.user, ssh.Password(tc.password))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s with %q: %v, want refused with %q", tc.user, tc.password, err, tc.want)
			}
		}
	})

	t.Run("PortForwardReachesAnUnexposedPort", func(t *testing.T) {
		pf := au.cmd("port-forward", "dev", "0:7000")
		stdout, err := pf.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var errOut bytes.Buffer
		pf.Stderr = &errOut
		if err := pf.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = pf.Process.Signal(syscall.SIGTERM); _ = pf.Wait() }()
		line, err := bufio.NewReader(stdout).ReadString('\n')
		m := regexp.MustCompile(`^Forwarding (127\.0\.0\.1:\d+) -> alice/dev:7000\n$`).FindStringSubmatch(line)
		if err != nil || m == nil {
			t.Fatalf("port-forward said %q (%v), stderr %q", line, err, errOut.String())
		}
		c := &http.Client{Timeout: 30 * time.Second}
		for i := range 3 { // several connections through one SSH connection
			resp, err := c.Get("http://" + m[1] + "/")
			if err != nil {
				t.Fatalf("GET %d through the forward: %v (stderr %q)", i, err, errOut.String())
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "forwarded page\n" {
				t.Errorf("through the forward: %d %q", resp.StatusCode, body)
			}
		}
	})

	t.Run("OpenSSHThroughConfigSSH", func(t *testing.T) {
		key := filepath.Join(t.TempDir(), "id_ed25519")
		writeSSHKey(t, key)
		if out, errOut, code := au.run(t, "ssh-keys", "add", key+".pub"); code != 0 {
			t.Fatalf("ssh-keys add: %d %q %q", code, out, errOut)
		}
		cfg := filepath.Join(home, ".ssh", "config")
		if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
			t.Fatal(err)
		}
		// A user's own settings stay; Hangar's block comes first.
		if err := os.WriteFile(cfg, []byte("Host *\n  ServerAliveCountMax 5\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := au.run(t, "config-ssh")
		if code != 0 || !strings.Contains(out, "Wrote 1 host(s)") {
			t.Fatalf("config-ssh: %d %q %q", code, out, errOut)
		}
		written, _ := os.ReadFile(cfg)
		if !strings.Contains(string(written), "Host dev.hangar\n") || !strings.HasSuffix(string(written), "Host *\n  ServerAliveCountMax 5\n") {
			t.Errorf("~/.ssh/config:\n%s", written)
		}
		openssh := func(name string, args ...string) *exec.Cmd {
			c := exec.Command(name, append([]string{"-F", cfg, "-i", key, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"}, args...)...)
			c.Env = au.cmd().Env
			return c
		}
		got, err := openssh("ssh", "dev.hangar", "hostname").CombinedOutput()
		if err != nil || string(got) != podName+"\n" {
			t.Fatalf("ssh dev.hangar hostname: %v %q, want %q", err, got, podName)
		}
		// sftp round-trips a file.
		dir := t.TempDir()
		payload := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
		if err := os.WriteFile(filepath.Join(dir, "up"), payload, 0o600); err != nil {
			t.Fatal(err)
		}
		batch := filepath.Join(dir, "batch")
		_ = os.WriteFile(batch, []byte("put "+filepath.Join(dir, "up")+" /tmp/up\nget /tmp/up "+filepath.Join(dir, "down")+"\n"), 0o600)
		if got, err := openssh("sftp", "-b", batch, "dev.hangar").CombinedOutput(); err != nil {
			t.Fatalf("sftp: %v %s", err, got)
		}
		down, err := os.ReadFile(filepath.Join(dir, "down"))
		if err != nil || !bytes.Equal(down, payload) {
			t.Errorf("sftp round trip: %d bytes back (%v), want %d", len(down), err, len(payload))
		}
		// Once the key is removed, OpenSSH is refused.
		if out, errOut, code := au.run(t, "ssh-keys", "remove", strings.TrimSpace(sshFingerprint(t, key+".pub"))); code != 0 {
			t.Fatalf("ssh-keys remove: %d %q %q", code, out, errOut)
		}
		if got, err := openssh("ssh", "dev.hangar", "hostname").CombinedOutput(); err == nil {
			t.Errorf("ssh with a removed key: %q", got)
		}
	})

	t.Run("ActivityIsRecorded", func(t *testing.T) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			ws, err := alice.Workspace(ctx, "dev")
			if err != nil {
				t.Fatal(err)
			}
			if ws.LastActivityAt != nil && !ws.LastActivityAt.Before(w.CreatedAt) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("last_activity_at still %v after SSH sessions", ws.LastActivityAt)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("RevokedTokenEndsTheSession", func(t *testing.T) {
		c, err := e.dialSSH("dev", ssh.Password(aliceToken))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sess, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if err := sess.Start("sleep 300"); err != nil {
			t.Fatal(err)
		}
		ended := make(chan error, 1)
		go func() { ended <- sess.Wait() }()
		if _, err := e.admin.RotateUserToken(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ended:
		case <-time.After(20 * time.Second):
			t.Fatal("the session of a revoked token still runs 20 s later")
		}
		if _, err := e.dialSSH("dev", ssh.Password(aliceToken)); err == nil || !strings.Contains(err.Error(), "token is not valid") {
			t.Errorf("the old token: %v", err)
		}
	})

	t.Run("StoppedWorkspaceSaysSo", func(t *testing.T) {
		newToken, err := e.admin.RotateUserToken(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		au.token = newToken.Token
		alice = e.srv.client(t, newToken.Token)
		if _, err := alice.UpdateWorkspace(ctx, "dev", sdk.UpdateWorkspaceRequest{DesiredState: "Stopped"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, alice, "dev", 120*time.Second, "Stopped", state("Stopped", "Stopped"))
		_, errOut, code := au.run(t, "ssh", "dev", "--", "hostname")
		if code != 1 || !strings.Contains(errOut, "workspace alice/dev is not running") {
			t.Errorf("ssh into a stopped workspace: exit %d stderr %q", code, errOut)
		}
	})
}

// dialSSH connects to the proxy's SSH as an SSH client would, checking its host key.
func (e *proxyEnv) dialSSH(user string, auth ssh.AuthMethod) (*ssh.Client, error) {
	var banner strings.Builder
	c, err := ssh.Dial("tcp", e.sshPublic, &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{auth}, HostKeyCallback: ssh.FixedHostKey(e.sshHostKey),
		BannerCallback: func(m string) error { banner.WriteString(m); return nil }, Timeout: 30 * time.Second})
	if err != nil {
		return nil, errors.New(banner.String() + err.Error())
	}
	return c, nil
}

func sshFingerprint(t testing.TB, pubFile string) string {
	t.Helper()
	b, err := os.ReadFile(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return ssh.FingerprintSHA256(k)
}
