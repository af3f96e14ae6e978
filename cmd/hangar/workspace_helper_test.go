package main_test

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// helperProcess starts `hangar workspace-helper` on 127.0.0.1:0 with a fresh state directory and
// one authorized key, and returns the process, the SSH address it logged and a client config.
func helperProcess(t *testing.T, attr *syscall.SysProcAttr, command ...string) (*exec.Cmd, string, *ssh.ClientConfig) {
	t.Helper()
	dir := t.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	key, _ := ssh.NewSignerFromKey(priv)
	authFile := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authFile, ssh.MarshalAuthorizedKey(key.PublicKey()), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"workspace-helper", "--state-dir", filepath.Join(dir, "state")}, command...)
	cmd := exec.Command(buildHangar(t), args...)
	cmd.Env = append(os.Environ(), "HANGAR_HELPER_SSH_ADDR=127.0.0.1:0", "HANGAR_HELPER_AUTHORIZED_KEYS_FILE="+authFile, "FROM_POD=yes")
	cmd.SysProcAttr = attr
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`msg="serving ssh" addr=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Log(sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	var a string
	select {
	case a = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("the helper did not log its address")
	}
	var hostKey ssh.PublicKey
	b, err := os.ReadFile(filepath.Join(dir, "state", "ssh_host_ed25519_key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	hostKey, _, _, _, _ = ssh.ParseAuthorizedKey(b)
	return cmd, a, &ssh.ClientConfig{User: "proxy", Auth: []ssh.AuthMethod{ssh.PublicKeys(key)}, HostKeyCallback: ssh.FixedHostKey(hostKey), Timeout: 30 * time.Second}
}

func sshOutput(t *testing.T, addr string, cfg *ssh.ClientConfig, command string) string {
	t.Helper()
	c, err := ssh.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Output(command)
	if err != nil {
		t.Fatalf("ssh %q: %v", command, err)
	}
	return string(out)
}

// TestWorkspaceHelper runs the hidden subcommand as the container would: without a command it
// serves SSH (the container's environment, not the helper's settings) until SIGTERM and exits 0;
// with one it exits with the command's code.
func TestWorkspaceHelper(t *testing.T) {
	cmd, addr, cfg := helperProcess(t, nil)
	if got := sshOutput(t, addr, cfg, `echo "[$FROM_POD][$HANGAR_HELPER_SSH_ADDR]"`); got != "[yes][]\n" {
		t.Errorf("session environment: %q", got)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v, want exit 0", err)
	}

	cmd, _, _ = helperProcess(t, nil, "--", "/bin/sh", "-c", "exit 7")
	cmd.Wait()
	if got := cmd.ProcessState.ExitCode(); got != 7 {
		t.Fatalf("exit code %d, want the command's 7", got)
	}
}

// TestWorkspaceHelperAsPID1 runs the helper as PID 1 of a new PID namespace (root only), where it
// starts itself again under its reaper: SSH works and the command's exit code is the container's.
func TestWorkspaceHelperAsPID1(t *testing.T) {
	if os.Geteuid() != 0 {
		// As the test cluster's tests: the suite runs as root (.ci/run does); not being root is a
		// failure to run it, not a reason to pass.
		t.Fatal("a new PID namespace needs root: run the tests as root")
	}
	cmd, addr, cfg := helperProcess(t, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}, "--", "/bin/sh", "-c", "exec sleep 1000")
	// The helper runs as PID 2 under the reaper; the session's shell is further down.
	if got := sshOutput(t, addr, cfg, `echo "$PPID" | grep -qvx 1 && echo "$HANGAR_HELPER_REAPED"-ok`); strings.TrimSpace(got) != "-ok" {
		t.Errorf("session: %q", got)
	}
	cmd.Process.Signal(syscall.SIGTERM) // to PID 1, the reaper, which passes it on
	cmd.Wait()
	if got := cmd.ProcessState.ExitCode(); got != 128+15 {
		t.Fatalf("exit code %d, want 143 (the command, ended by the forwarded SIGTERM)", got)
	}
}
