package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/provisioner/sandbox"
)

var buildsLine = regexp.MustCompile(`(?m)^Builds: templates run as build user uid (\d+)(.*)$`)

// buildUser waits for the "Builds:" line of a server's or provisioner's start message and returns
// the build user's id and the rest of the line.
func buildUser(t *testing.T, p *proc) (int, string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if m := buildsLine.FindStringSubmatch(p.output()); m != nil {
			uid, _ := strconv.Atoi(m[1])
			return uid, m[2]
		}
		select {
		case <-p.done:
			t.Fatalf("%s ended without saying its build user:\n%s", p.name, p.output())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not say its build user:\n%s", p.name, p.output())
	return 0, ""
}

// TestBuildUsersDoNotCollide: Hangar installations on one host never share a build user (every
// process of a build user is killed when one of its builds ends, so a shared one kills the other's
// builds). Three servers — two of them starting at the same time — each take a user of their own
// and say which in their start message; the ones that could not take the default say why. A
// standalone provisioner whose default user a process already runs as takes the next one and says
// so; one told to use a user a server holds refuses to start.
//
// It runs alone (no t.Parallel): which build users it gets, and what its servers say about the
// others, depend on every Hangar daemon of the host, and every other test starts a server.
func TestBuildUsersDoNotCollide(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("template isolation needs root (CI runs as root)")
	}
	a := startServer(t)
	uidA, _ := buildUser(t, a.proc)

	var wg sync.WaitGroup
	servers := make([]*server, 2)
	for i := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); servers[i] = startServer(t) }()
	}
	wg.Wait()
	uids := map[int]string{uidA: "server A"}
	for i, s := range servers {
		uid, rest := buildUser(t, s.proc)
		if other, ok := uids[uid]; ok {
			t.Fatalf("server %d builds as uid %d, as %s does", i+2, uid, other)
		}
		uids[uid] = s.dataDir
		if uid != sandbox.DefaultUID && !strings.Contains(rest, "the default was taken, so free ones were picked") {
			t.Errorf("server %d builds as uid %d, not the default, without saying why: %q", i+2, uid, rest)
		}
		if uid > uidA && !strings.Contains(rest, "uid "+strconv.Itoa(uidA)+": another Hangar daemon (pid "+strconv.Itoa(a.cmd.Process.Pid)+") builds as it, holding /run/hangar/build-uid-"+strconv.Itoa(uidA)+".lock") {
			t.Errorf("server %d's start message does not say that server A holds uid %d: %q", i+2, uidA, rest)
		}
		if !strings.Contains(s.output(), "the default build user is taken: using a free one") && uid != sandbox.DefaultUID {
			t.Errorf("server %d's log does not say it took another build user:\n%s", i+2, s.output())
		}
	}

	// A process (not Hangar's) runs as the standalone provisioner's default user.
	busy := exec.Command("sleep", "600")
	busy.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sandbox.DefaultStandaloneUID, Gid: sandbox.DefaultStandaloneUID}}
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Process.Kill(); _ = busy.Wait() })
	out, err := runCLI(a, "provisioners", "create", "builder")
	if err != nil {
		t.Fatalf("provisioners create: %v\n%s", err, out)
	}
	token := regexp.MustCompile(`Token \(shown only once\): (\S+)`).FindStringSubmatch(out)
	if token == nil {
		t.Fatalf("no token in %q", out)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "provisioner", nil, "provisioner", "--server", a.URL, "--token-file", tokenFile, "--work-dir", t.TempDir(), "--identity", "one")
	uid, rest := buildUser(t, p)
	if uid == sandbox.DefaultStandaloneUID || uids[uid] != "" {
		t.Fatalf("the provisioner builds as uid %d, which is taken", uid)
	}
	if want := "uid " + strconv.Itoa(sandbox.DefaultStandaloneUID) + ": process " + strconv.Itoa(busy.Process.Pid) + " (sleep) runs as it"; !strings.Contains(rest, want) {
		t.Errorf("the provisioner's start message %q does not say %q", rest, want)
	}

	// Told to use server A's user, a provisioner refuses to start.
	refused := exec.Command(binary, "provisioner", "--server", a.URL, "--token-file", tokenFile, "--work-dir", t.TempDir(), "--identity", "two",
		"--provisioner-user", strconv.Itoa(uidA))
	got, err := refused.CombinedOutput()
	want := "the build user uid " + strconv.Itoa(uidA) + " is taken: another Hangar daemon (pid " + strconv.Itoa(a.cmd.Process.Pid) + ") builds as it"
	if err == nil || !strings.Contains(string(got), want) {
		t.Fatalf("a provisioner given server A's build user: %v\n%s\nwant it to refuse, saying %q", err, got, want)
	}
}
