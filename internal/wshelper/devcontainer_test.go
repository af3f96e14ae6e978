//go:build unix

package wshelper

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/crypto/ssh"
)

// TestRunPostStartOncePerWorkspace: a command marked OncePerWorkspace (devcontainer.json's
// postCreateCommand) runs at the first start only, while the others run at every start; a failure
// after it does not run it again.
func TestRunPostStartOncePerWorkspace(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	created, started := filepath.Join(dir, "created"), filepath.Join(dir, "started")
	cmds := []PostStartCommand{
		{ID: "post-create", CommandLine: "echo x >> " + created, OncePerWorkspace: true},
		{ID: "post-start", CommandLine: "echo x >> " + started + "; test -e " + filepath.Join(dir, "ok")},
	}
	count := func(p string) int {
		b, _ := os.ReadFile(p)
		return strings.Count(string(b), "x\n")
	}
	log := &logBuffer{}
	if err := RunPostStart(context.Background(), cmds, []string{"PATH=/usr/bin:/bin"}, state, "pod-a", io.Discard, log.logger()); err == nil {
		t.Fatal("post-start's failure was not returned")
	}
	if err := os.WriteFile(filepath.Join(dir, "ok"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, instance := range []string{"pod-a", "pod-b", "pod-c"} { // a container restart, then two starts
		if err := RunPostStart(context.Background(), cmds, []string{"PATH=/usr/bin:/bin"}, state, instance, io.Discard, log.logger()); err != nil {
			t.Fatalf("%s: %v", instance, err)
		}
	}
	if n := count(created); n != 1 {
		t.Errorf("postCreate ran %d times over one failed and three good starts, want 1", n)
	}
	if n := count(started); n != 4 {
		t.Errorf("postStart ran %d times, want 4 (the failed start, then once per instance)", n)
	}
	if _, err := os.Stat(filepath.Join(state, OnceMarkerPrefix+"post-create")); err != nil {
		t.Errorf("no record of post-create: %v", err)
	}
}

func TestParsePostStartOnceNeedsPlainID(t *testing.T) {
	if _, err := ParsePostStart(`[{"id":"../x","commandLine":"true","oncePerWorkspace":true}]`); err == nil {
		t.Fatal("an id that is a path was accepted for a once-per-workspace command")
	}
	cmds, err := ParsePostStart(`[{"id":"post-create","commandLine":"true","oncePerWorkspace":true}]`)
	if err != nil || !cmds[0].OncePerWorkspace {
		t.Fatalf("%+v %v", cmds, err)
	}
}

func TestWithRemoteEnv(t *testing.T) {
	env := WithRemoteEnv([]string{"PATH=/usr/bin", "A=1"}, []EnvVar{
		{Name: "PATH", Value: "${PATH}:/home/me/bin"}, {Name: "B", Value: "${A}-$A-${NONE}-$(A)"}, {Name: "A", Value: "2"},
	})
	want := []string{"PATH=/usr/bin:/home/me/bin", "B=1-$A--$(A)", "A=2"}
	if strings.Join(env, " ") != strings.Join(want, " ") {
		t.Fatalf("got %q, want %q", env, want)
	}
	if _, err := ParseRemoteEnv(`[{"name":"A=B","value":"x"}]`); err == nil {
		t.Error("a bad name was accepted")
	}
}

// TestRunRemoteEnv: an SSH session and the postStart commands see the remote environment, with
// ${PATH} expanded from the container's; the container's own command does not.
func TestRunRemoteEnv(t *testing.T) {
	dir := t.TempDir()
	h := startRun(t, Config{Instance: "pod", Env: []string{"PATH=/usr/bin:/bin", "KEEP=k", "SHELL=/bin/sh", "HOME=" + dir},
		RemoteEnv: []EnvVar{{Name: "PATH", Value: "${PATH}:/opt/tool"}, {Name: "GREETING", Value: "hi ${KEEP}"}},
		PostStart: []PostStartCommand{{ID: "env", CommandLine: "echo \"$GREETING\" > " + filepath.Join(dir, "poststart")}}})
	c, err := ssh.Dial("tcp", h.addr, &ssh.ClientConfig{User: "proxy", Auth: []ssh.AuthMethod{ssh.PublicKeys(h.key)}, HostKeyCallback: ssh.FixedHostKey(h.host), Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.CombinedOutput(`echo "$PATH|$GREETING"`)
	if err != nil || string(out) != "/usr/bin:/bin:/opt/tool|hi k\n" {
		t.Fatalf("session env: %q %v", out, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "poststart")); string(b) != "hi k\n" {
		t.Fatalf("postStart saw GREETING=%q", b)
	}
	h.sigs <- syscall.SIGTERM
	h.wait(t)
}
