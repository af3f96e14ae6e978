package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// TestWorkspaceHelper runs the helper Hangar injects into a workspace's main container, on the
// real node: the hangar-tools init container copies the binary from the tools image, and the main
// container runs `hangar workspace-helper` — alone when the devfile gives no command (it keeps the
// container running), around the devfile's command otherwise. From the cluster's network, an SSH
// client with the key of the agent's proxy_ssh_public_keys gets a shell in the pod (hostname is
// the pod's name; the devfile's command ran), the host key is the one derived from the agent's token
// (the Secret's, which the proxy pins), and
// another key is refused.
func TestWorkspaceHelper(t *testing.T) {
	parallel(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	proxyKey, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	otherKey, _ := ssh.NewSignerFromKey(otherPriv)
	cfg, _ := json.Marshal(map[string]any{"proxy_ssh_public_keys": []string{strings.TrimSpace(string(ssh.MarshalAuthorizedKey(proxyKey.PublicKey()))) + " proxy"}})

	r := &realNode{cluster: kubetest.Start(t), srv: startServer(t), agent: "helper", realTime: 90 * time.Second}
	token := r.srv.registerRealAgent(t, r.agent, string(cfg))
	startAgent(t, r.srv, r.cluster, r.agent, token, "hangar-agent-helper")
	r.c = r.srv.client(t, r.srv.AdminToken)

	for _, tc := range []struct {
		name, container, check, want string
	}{
		{"helper-idle", `{image: ` + kubetest.WorkspaceImage + `}`, "echo $HANGAR_HELPER_SSH_ADDR; test -s /hangar/ssh/ssh_host_ed25519_key && echo from-secret", "\nfrom-secret\n"},
		{"helper-cmd", `{image: ` + kubetest.WorkspaceImage + `, command: ["sh", "-c", "echo started > /tmp/started; exec sleep 1000000"]}`, "cat /tmp/started", "started\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := r.create(t, tc.name, "schemaVersion: 2.2.0\ncomponents:\n  - name: dev\n    container: "+tc.container+"\n")
			waitFor(t, r.c, tc.name, r.realTime, "Running", state("Running", "Running"))
			p := r.pod(t, w.Namespace, "the pod to be ready", ready)
			if got := p.Spec.Containers[0].Command; len(got) < 2 || got[0] != "/hangar/bin/hangar" || got[1] != "workspace-helper" {
				t.Fatalf("main container command %q, want the helper", got)
			}
			// The host key is the one derived from the agent's token, as the proxy pins it.
			agentToken, err := os.ReadFile(token)
			if err != nil {
				t.Fatal(err)
			}
			hash := sha256.Sum256(bytes.TrimSpace(agentToken))
			hostKey, err := ssh.NewPublicKey(workspace.HelperHostKey(hash[:], w.ID).Public())
			if err != nil {
				t.Fatal(err)
			}
			addr := net.JoinHostPort(p.Status.PodIP, "60022")

			client := r.sshClient(t, addr, proxyKey, hostKey)
			if got := sshRun(t, client, "hostname"); got != p.Name+"\n" {
				t.Errorf("hostname over SSH = %q, want the pod's name %q", got, p.Name)
			}
			if got := sshRun(t, client, tc.check); !strings.HasSuffix(got, tc.want) {
				t.Errorf("%q over SSH = %q, want it to end with %q", tc.check, got, tc.want)
			}
			client.Close()

			// Another key is refused.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conn, err := r.cluster.DialInside(ctx, addr)
			if err != nil {
				t.Fatal(err)
			}
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			_, _, _, err = ssh.NewClientConn(conn, addr, &ssh.ClientConfig{User: "user", Auth: []ssh.AuthMethod{ssh.PublicKeys(otherKey)}, HostKeyCallback: ssh.FixedHostKey(hostKey)})
			conn.Close()
			if err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
				t.Errorf("another key: %v, want it refused", err)
			}

			// The helper is the container's process, and nothing restarted.
			if got := r.pod(t, w.Namespace, "the pod", ready); got.Status.ContainerStatuses[0].RestartCount != 0 {
				t.Errorf("main container restarted %d times", got.Status.ContainerStatuses[0].RestartCount)
			}
			r.terminate(t, w, false)
		})
	}
}

// sshClient opens an SSH connection to addr (a pod's address) from inside the cluster's network
// namespace, with key, checking that the server's host key is hostKey.
func (r *realNode) sshClient(t *testing.T, addr string, key ssh.Signer, hostKey ssh.PublicKey) *ssh.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := r.cluster.DialInside(ctx, addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, &ssh.ClientConfig{User: "user", Auth: []ssh.AuthMethod{ssh.PublicKeys(key)}, HostKeyCallback: ssh.FixedHostKey(hostKey)})
	if err != nil {
		conn.Close()
		t.Fatalf("ssh %s: %v", addr, err)
	}
	conn.SetDeadline(time.Time{})
	client := ssh.NewClient(c, chans, reqs)
	t.Cleanup(func() { client.Close() })
	return client
}

// sshRun runs cmd in a session and returns its stdout, failing the test if it fails.
func sshRun(t *testing.T, c *ssh.Client, cmd string) string {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out, errOut bytes.Buffer
	s.Stdout, s.Stderr = &out, &errOut
	if err := s.Run(cmd); err != nil {
		t.Fatalf("ssh %q: %v (stderr %q)", cmd, err, errOut.String())
	}
	return out.String()
}
