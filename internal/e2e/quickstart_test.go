package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testutil/browser"
)

// TestNewUserQuickstart follows the README from the top as a new user would, with the real binary
// on the real node: `hangar quickstart` ends with a workspace; its printed URL opens the web editor
// in Chromium (after signing in with the admin token, where it says the token is); the printed
// `hangar ssh` runs a command in it (output and exit status); the printed Terraform line makes a
// workspace of the Terraform starter, a pod whose helper connects back to the server through the
// quick start's relay (show says connected; hangar ssh runs a command there); a second run reuses
// everything and prints the same; `hangar quickstart stop` ends it all (the URL no longer
// answers), and a second stop has nothing left to stop. Should the test binary be killed, a
// watchdog stops the quick start all the same (quickstartWatchdog).
func TestNewUserQuickstart(t *testing.T) {
	parallel(t)
	data := t.TempDir()
	source, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 3)
	args := []string{"quickstart", "--data-dir", data, "--source", source,
		"--listen", ports[0], "--proxy-listen", ports[1], "--ssh-listen", ports[2]}
	quickstart := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(binary, args...)
		cmd.Dir = t.TempDir() // not the checkout: --source says where it is
		// A home of its own (its saved login), but this machine's caches: Go's build and module
		// caches and the editor image's, which a new user's second run reuses too.
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		cmd.Env = append(cmd.Env, keptCaches(t)...)
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			// The quick start's processes log into the data directory, which the test removes.
			var logs strings.Builder
			for _, name := range []string{"server", "agent", "proxy", "relay"} {
				b, _ := os.ReadFile(filepath.Join(data, name+".log"))
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				fmt.Fprintf(&logs, "--- the end of %s.log:\n%s\n", name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
			t.Fatalf("hangar %s: %v\n%s\n%s\n%s", strings.Join(args, " "), err, out, stderr, logs.String())
		}
		return string(out)
	}
	quickstartWatchdog(t, data)

	began := time.Now()
	out := quickstart(args...)
	t.Logf("hangar quickstart took %v", time.Since(began).Round(time.Second))
	_, proxyPort, _ := net.SplitHostPort(ports[1])
	wantURL := "http://60001-first--admin.workspaces.localhost:" + proxyPort + "/"
	if !strings.Contains(out, "Workspace first: "+wantURL+"\n") {
		t.Fatalf("quickstart printed no workspace URL %s:\n%s", wantURL, out)
	}
	m := regexp.MustCompile(`(?m)^Log in: +hangar login --url (\S+) --token "\$\(cat (\S+)\)"$`).FindStringSubmatch(out)
	if m == nil || m[1] != "http://"+ports[0] || !strings.Contains(out, "hangar ssh first") {
		t.Fatalf("quickstart printed no login and ssh lines:\n%s", out)
	}
	tok, err := os.ReadFile(m[2])
	if err != nil {
		t.Fatalf("the printed admin token file: %v", err)
	}
	token := strings.TrimSpace(string(tok))

	t.Run("HangarSSH", func(t *testing.T) {
		u := cliUser{url: m[1], token: token, home: t.TempDir()}
		if out, errOut, code := u.run(t, "login", "--url", m[1], "--token", token); code != 0 {
			t.Fatalf("hangar login: %d %s %s", code, out, errOut)
		}
		u.token = "" // the saved login, as the user has it
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, errOut, code := u.run(t, "ssh", "first", "--", `echo "in $(id -u) $HOME"; exit 4`)
			if code == 4 && out == "in 5001 /home/user\n" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("hangar ssh first: exit %d stdout %q stderr %q, want the workspace user's line and exit 4", code, out, errOut)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	t.Run("TerraformStarter", func(t *testing.T) {
		line := regexp.MustCompile(`(?m)^ +hangar create mine --template (\S+) --wait +# Terraform: `).FindStringSubmatch(out)
		if line == nil {
			t.Fatalf("quickstart printed no line for the Terraform starter:\n%s", out)
		}
		u := cliUser{url: m[1], token: token, home: t.TempDir()}
		began := time.Now()
		if out, errOut, code := u.run(t, "create", "mine", "--template", line[1], "--wait"); code != 0 {
			t.Fatalf("hangar create mine --template %s --wait: exit %d\n%s%s", line[1], code, out, errOut)
		}
		running := time.Since(began)
		// The pod's helper connects out to the server's --helper-url, the relay in the cluster's
		// network namespace: show says so once it has.
		deadline := time.Now().Add(2 * time.Minute)
		for {
			out, errOut, code := u.run(t, "show", "mine")
			if code == 0 && regexp.MustCompile(`\nHelper:\s+connected \(since `).MatchString(out) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("hangar show mine: the helper did not connect within 2 minutes of Running: exit %d\n%s%s", code, out, errOut)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("the Terraform workspace: Running after %v, its helper connected after %v", running.Round(time.Second), time.Since(began).Round(time.Second))
		// The first ssh says it trusts the helper's host key (saved for the next), then the
		// command's own output.
		sshOut, errOut, code := u.run(t, "ssh", "mine", "--", `echo "in $(id -u) $HOME"; echo to-stderr >&2; exit 6`)
		if code != 6 || sshOut != "in 5001 /home/dev\n" || !strings.HasSuffix(errOut, "\nto-stderr\n") || !strings.Contains(errOut, "trusting the workspace's helper") {
			t.Fatalf("hangar ssh mine: exit %d, stdout %q, stderr %q; want the pod user's line, the trusted host key, to-stderr and exit 6", code, sshOut, errOut)
		}
		sshOut, errOut, code = u.run(t, "ssh", "mine", "--", "cat /proc/sys/kernel/hostname")
		if code != 0 || !strings.HasPrefix(sshOut, "hangar-") || errOut != "" {
			t.Fatalf("hangar ssh mine again: exit %d, stdout %q, stderr %q; want the pod's name and nothing on stderr", code, sshOut, errOut)
		}
	})

	t.Run("EditorInChromium", func(t *testing.T) {
		// Chromium resolves names under .localhost to loopback itself; the rules only make sure
		// that nothing else resolves.
		b := browser.Start(t, browser.Options{Name: "admin",
			ResolverRules: "MAP *.workspaces.localhost 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"}).On(t)
		b.Open(wantURL, `//input[@name="token"]`)
		if h1 := b.Text("h1"); h1 != "Sign in to Hangar" {
			t.Errorf("the workspace URL first shows %q, want the sign-in page", h1)
		}
		// The workbench itself, drawn (its configuration <meta> is never "visible"), with the folder
		// the workspace opened in its explorer.
		b.SignIn(token, `//div[contains(concat(" ", normalize-space(@class), " "), " monaco-workbench ")]`)
		if loc := b.Location(); !strings.HasPrefix(loc, wantURL) {
			t.Errorf("after sign-in the browser is at %s, want the workspace URL %s", loc, wantURL)
		}
		if text := b.Text("body"); !strings.Contains(text, "Explorer") || !strings.Contains(text, "projects") {
			t.Errorf("the editor shows no explorer of /projects:\n%s", text)
		}
	})

	t.Run("SecondRunReuses", func(t *testing.T) {
		began := time.Now()
		again := quickstart(args...)
		t.Logf("a second hangar quickstart took %v", time.Since(began).Round(time.Second))
		if !strings.Contains(again, "Workspace first: "+wantURL+"\n") {
			t.Errorf("the second run printed:\n%s", again)
		}
	})

	t.Run("Stop", func(t *testing.T) {
		out, err := exec.Command(binary, "quickstart", "stop", "--data-dir", data).CombinedOutput()
		if err != nil {
			t.Fatalf("quickstart stop: %v\n%s", err, out)
		}
		for _, want := range []string{"Stopped hangar proxy.", "Stopped hangar agent.", "Stopped hangar relay.", "Stopped hangar server.", "Stopped the local cluster"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("quickstart stop did not say %q:\n%s", want, out)
			}
		}
		for _, addr := range ports {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				t.Errorf("%s still answers after stop", addr)
			}
		}
		out, err = exec.Command(binary, "quickstart", "stop", "--data-dir", data).CombinedOutput()
		if err != nil || strings.Contains(string(out), "Stopped hangar") || !strings.Contains(string(out), "The quick start is stopped") {
			t.Errorf("a second stop: %v\n%s", err, out)
		}
	})
}

// quickstartWatchdog makes sure `hangar quickstart stop` runs for the quick start in data: its
// processes and cluster outlive the command by design, so a test binary killed halfway (a
// timeout's panic, a kill) would leave them running. A shell in a session of its own (no signal of
// the terminal's reaches it) waits for its standard input, a pipe whose only writer is this
// process, to end, then runs the stop: the test's cleanup closes the pipe and checks the stop's
// output; should the test binary die first, the kernel closes the pipe. (Pdeathsig would kill the
// processes instead of stopping them, and is tied to the thread that started them, which Go may
// end.)
func quickstartWatchdog(t *testing.T, data string) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(data, "watchdog.log")
	log, err := os.Create(logFile) // a file, not a pipe to this process, which it may outlive
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command("sh", "-c", `read -r _ || true; exec "$0" quickstart stop --data-dir "$1"`, binary, data)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	t.Cleanup(func() {
		pw.Close()
		err := cmd.Wait()
		out, _ := os.ReadFile(logFile)
		if err != nil || !strings.Contains(string(out), "The quick start is stopped") {
			t.Errorf("quickstart stop (the watchdog's): %v\n%s", err, out)
		}
	})
}

// freePorts returns n loopback addresses free a moment ago.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// keptCaches names this machine's Go and editor-image caches for a process given another HOME, so
// that it reuses them instead of starting cold (a cold module and build cache is a download of
// every module and a compile of everything).
func keptCaches(t *testing.T) []string {
	t.Helper()
	var env []string
	for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", v, err)
		}
		env = append(env, v+"="+strings.TrimSpace(string(out)))
	}
	editor := os.Getenv("HANGAR_EDITOR_CACHE")
	if editor == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				t.Fatal(err)
			}
			base = filepath.Join(home, ".cache")
		}
		editor = filepath.Join(base, "hangar", "editor")
	}
	return append(env, "HANGAR_EDITOR_CACHE="+editor)
}
