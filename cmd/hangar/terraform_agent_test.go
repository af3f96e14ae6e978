package main_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
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

	"github.com/coder/websocket"
	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/hangar-dev/hangar/internal/testutil/browser"
)

// TestTerraformAgent drives hangar_agent end to end with the real binaries: a Terraform template
// whose "machine" is a local process the module starts with the agent's init script. The helper
// connects out to the server; then, as the workspace's owner, `hangar ssh NAME -- hostname` runs
// there, sftp round-trips a file over `hangar ssh --stdio` (and OpenSSH's ssh and sftp through
// `hangar config-ssh`), `hangar port-forward` reaches a port no endpoint exposes; another user is
// refused, the owner's rotated token is refused, and once stopped the CLI says the helper is not
// connected; started again, the agent is the same (no diff) and ssh gets through. Everything stays
// on loopback.
func TestTerraformAgent(t *testing.T) {
	machines := filepath.Join(t.TempDir(), "machines")
	// The machine (started by terraform, run by the server's provisioner) finds hangar on its
	// PATH, as a machine image would have it.
	bin := buildHangar(t)
	h := startLoggedIn(t, unisolated, "MACHINE_DIR="+machines, "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
	t.Cleanup(func() { // a test that failed halfway leaves no helper running
		pids, _ := filepath.Glob(filepath.Join(machines, "*", "helper.pid"))
		for _, p := range pids {
			if b, err := os.ReadFile(p); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(machines, "*", "helper.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, b)
			}
		}
	})
	h.must("templates", "push", "machine", "--directory", "testdata/agent")

	// The owner, dev, with a CLI environment of its own.
	devToken := userToken(t, h.must("users", "create", "dev"))
	devHome := filepath.Join(h.dir, "dev-home")
	devEnv := func(token string) []string {
		return append(append([]string{}, h.env...), "HOME="+devHome, "XDG_CONFIG_HOME="+filepath.Join(devHome, ".config"), "HANGAR_URL="+h.url, "HANGAR_TOKEN="+token)
	}
	dev := func(token string, args ...string) (string, string, error) {
		cmd := bounded(t, bin, args...)
		cmd.Env = devEnv(token)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	if out, errOut, err := dev(devToken, "create", "tfa", "--template", "machine", "--wait", "--timeout", "2m"); err != nil {
		t.Fatalf("create: %v\n%s%s\n%s", err, out, errOut, h.must("logs", "dev/tfa"))
	}
	machine := filepath.Join(machines, "tfa")

	// The helper connects out once the machine runs: poll until ssh gets through.
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	// sshOnceConnected runs hangar ssh tfa -- hostname until the helper has connected.
	sshOnceConnected := func(token string) (string, string, error) {
		deadline := time.Now().Add(time.Minute)
		for {
			out, errOut, err := dev(token, "ssh", "tfa", "--", "hostname")
			if err == nil || time.Now().After(deadline) || !strings.Contains(errOut, "not connected") {
				return out, errOut, err
			}
		}
	}
	out, errOut, err := sshOnceConnected(devToken)
	if err != nil || strings.TrimSpace(out) != hostname {
		t.Fatalf("hangar ssh tfa -- hostname: %v\nstdout %q, want %q\nstderr %s", err, out, hostname, errOut)
	}
	if !strings.Contains(errOut, "trusting the workspace's helper hangar-workspace-") {
		t.Errorf("the first ssh did not say it trusts the helper's host key:\n%s", errOut)
	}
	// show, show -o json and list say the helper is connected, and since when.
	if out, errOut, err := dev(devToken, "show", "tfa"); err != nil || !regexp.MustCompile(`\nHelper:\s+connected \(since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)\n`).MatchString(out) {
		t.Fatalf("show tfa once the helper connected: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := dev(devToken, "show", "tfa", "-o", "json"); err != nil || !regexp.MustCompile(`"helper": \{\s+"status": "connected",\s+"since": "\d{4}-`).MatchString(out) {
		t.Fatalf("show tfa -o json once the helper connected: %v\n%s%s", err, out, errOut)
	}
	if out, errOut, err := dev(devToken, "list"); err != nil || !regexp.MustCompile(`\ndev\s+tfa\s+\(terraform: machine v1\)\s+Running\s+Running\s+connected\s`).MatchString(out) {
		t.Fatalf("list once the helper connected: %v\n%s%s", err, out, errOut)
	}
	// It is the module's machine: its home holds the file the module wrote.
	if out, errOut, err := dev(devToken, "ssh", "tfa", "--", "cat", "machine.txt"); err != nil || strings.TrimSpace(out) != "the machine of tfa, made by the module" {
		t.Fatalf("cat machine.txt: %v\n%q\n%s", err, out, errOut)
	}
	// A remote command's exit status is the CLI's.
	if _, _, err := dev(devToken, "ssh", "tfa", "--", "exit", "7"); exitStatusOf(err) != 7 {
		t.Fatalf("exit 7: %v", err)
	}

	// sftp over `hangar ssh --stdio`, the helper's host key checked against the CLI's known_hosts.
	sftpRoundTrip(t, bin, devEnv(devToken), filepath.Join(devHome, ".config", "hangar", "known_hosts"), machine)

	// OpenSSH through config-ssh: ssh and sftp, with no key of the user's at all.
	sshConfig := filepath.Join(devHome, "ssh_config")
	if out, errOut, err := dev(devToken, "config-ssh", "--ssh-config", sshConfig); err != nil || !strings.Contains(out, "Wrote 1 host") {
		t.Fatalf("config-ssh: %v\n%s%s", err, out, errOut)
	}
	openssh := func(name string, args ...string) (string, error) {
		cmd := bounded(t, name, append([]string{"-F", sshConfig, "-o", "BatchMode=yes"}, args...)...)
		cmd.Env = devEnv(devToken)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	if out, err := openssh("ssh", "tfa.hangar", "cat machine.txt"); err != nil || !strings.Contains(out, "the machine of tfa") {
		t.Fatalf("OpenSSH ssh tfa.hangar: %v\n%s", err, out)
	}
	batch := filepath.Join(devHome, "sftp-batch")
	if err := os.WriteFile(batch, []byte("put "+filepath.Join(machine, "home", "machine.txt")+" openssh-copy.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := openssh("sftp", "-b", batch, "tfa.hangar"); err != nil {
		t.Fatalf("OpenSSH sftp: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(machine, "home", "openssh-copy.txt")); err != nil || !strings.Contains(string(b), "the machine of tfa") {
		t.Fatalf("the file OpenSSH's sftp put: %q, %v", b, err)
	}

	// port-forward to a port the machine listens on and no endpoint exposes.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: machineApp()}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	pf := bounded(t, bin, "port-forward", "tfa", "0:"+strconv.Itoa(port))
	pf.Env = devEnv(devToken)
	pfOut, err := pf.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var pfErr bytes.Buffer
	pf.Stderr = &pfErr
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pf.Process.Kill(); _ = pf.Wait() }()
	line, err := bufio.NewReader(pfOut).ReadString('\n')
	m := regexp.MustCompile(`Forwarding (127\.0\.0\.1:\d+) -> dev/tfa:` + strconv.Itoa(port)).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("port-forward said %q (%v); stderr %s", line, err, pfErr.String())
	}
	resp, err := http.Get("http://" + m[1] + "/")
	if err != nil {
		t.Fatalf("through the forward: %v; stderr %s", err, pfErr.String())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello from the machine's port" {
		t.Fatalf("through the forward: %q", body)
	}
	_ = pf.Process.Kill()

	// The browser: the same port at the workspace's apps address, served by the server through
	// the helper. The owner signs in and gets the page and a WebSocket from it; eve does not.
	eveToken := userToken(t, h.must("users", "create", "eve"))
	show, errOut, err := dev(devToken, "show", "tfa")
	m = regexp.MustCompile(`Apps:\s+(http://\{port\}-tfa--dev\.apps\.localhost:\d+/)`).FindStringSubmatch(show)
	if err != nil || m == nil {
		t.Fatalf("show tfa names no apps address: %v\n%s%s", err, show, errOut)
	}
	app := strings.Replace(m[1], "{port}", strconv.Itoa(port), 1)
	terraformBrowser(t, h.url, app, devToken, eveToken)

	// Another user: the workspace does not exist for them, by either name.
	for _, name := range []string{"tfa", "dev/tfa"} {
		if out, errOut, err := dev(eveToken, "ssh", name, "--", "hostname"); err == nil || !strings.Contains(errOut, "not found") {
			t.Fatalf("eve's ssh %s: %v\n%s%s", name, err, out, errOut)
		}
	}

	// The owner's token is rotated: the old one is refused; the new one gets in.
	newToken := userToken(t, h.must("users", "rotate-token", "dev"))
	if out, errOut, err := dev(devToken, "ssh", "tfa", "--", "hostname"); err == nil || !strings.Contains(errOut, "was revoked") {
		t.Fatalf("ssh with the rotated-out token: %v\n%s%s", err, out, errOut)
	}
	if out, _, err := dev(newToken, "ssh", "tfa", "--", "hostname"); err != nil || strings.TrimSpace(out) != hostname {
		t.Fatalf("ssh with the new token: %v %q", err, out)
	}

	// Stopped: the module killed the helper; the CLI says it is not connected.
	if out, errOut, err := dev(newToken, "stop", "tfa", "--wait", "--timeout", "2m"); err != nil {
		t.Fatalf("stop: %v\n%s%s", err, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(machine, "helper.pid")); !os.IsNotExist(err) {
		t.Fatalf("the destroy provisioner did not run: %v", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		out, errOut, err = dev(newToken, "ssh", "tfa", "--", "hostname")
		if err != nil && strings.Contains(errOut, "the workspace's helper is not connected (is the machine running?)") || time.Now().After(deadline) {
			break
		}
	}
	if err == nil || !strings.Contains(errOut, "the workspace's helper is not connected (is the machine running?)") {
		t.Fatalf("ssh after stop: %v\n%s%s", err, out, errOut)
	}
	// show says no helper is expected, and how the last connection ended.
	if out, errOut, err := dev(newToken, "show", "tfa"); err != nil || !strings.Contains(out, "\nHelper:             off\n") ||
		!strings.Contains(out, "\nHelper last error:  the connection was lost") {
		t.Fatalf("show tfa once stopped: %v\n%s%s", err, out, errOut)
	}
	// Started again: the agent was not replaced (the plan kept it: same id, same token), the new
	// machine runs its init script with the token the state holds, and ssh gets through again.
	agentID := func() string {
		out, errOut, err := dev(newToken, "state", "pull", "tfa")
		m := regexp.MustCompile(`"type": "hangar_agent"[\s\S]*?"id": "([0-9a-f]+)"`).FindStringSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("state pull: %v\n%s%s", err, out, errOut)
		}
		return m[1]
	}
	before := agentID()
	if out, errOut, err := dev(newToken, "start", "tfa", "--wait", "--timeout", "2m"); err != nil {
		t.Fatalf("start: %v\n%s%s", err, out, errOut)
	}
	if after := agentID(); after != before {
		t.Fatalf("the start replaced hangar_agent: id %s, was %s", after, before)
	}
	if out, errOut, err = sshOnceConnected(newToken); err != nil || strings.TrimSpace(out) != hostname {
		t.Fatalf("ssh after start: %v\n%q\n%s", err, out, errOut)
	}

	if out, errOut, err := dev(newToken, "delete", "tfa", "--yes", "--wait", "--timeout", "2m"); err != nil {
		t.Fatalf("delete: %v\n%s%s", err, out, errOut)
	}
}

// machineApp is an app on the workspace's machine: a page, /ws (a WebSocket echo) and /ws-echo?msg=M
// (a page whose script sends M through /ws and shows the echo).
// bounded is exec.Command for a CLI step that must end: killed after 3 minutes, and its output
// no longer awaited 10 s after it exits (OpenSSH's ProxyCommand, `hangar ssh --stdio`, is its
// child and could otherwise hold the output pipe open after ssh itself has exited), so that a
// stuck step fails the test with its output instead of hanging the whole run.
func bounded(t *testing.T, name string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

func machineApp() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "text/html") {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, "<h1>the machine's app</h1><p>path %s</p>\n", html.EscapeString(r.URL.Path))
			return
		}
		fmt.Fprint(w, "hello from the machine's port")
	})
	mux.HandleFunc("/ws-echo", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><meta charset="utf-8"><title>echo</title></head>
<body><p id="status">connecting</p><script>
const status = document.getElementById("status");
const msg = new URLSearchParams(location.search).get("msg") || "";
const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
ws.onopen = () => { status.textContent = "sent"; ws.send(msg); };
ws.onmessage = (ev) => { status.textContent = "echo: " + ev.data; ws.close(); };
ws.onerror = () => { status.textContent = "error"; };
</script></body></html>`)
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, data, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, data); err != nil {
				return
			}
		}
	})
	return mux
}

// terraformBrowser opens a Terraform workspace's app in Chromium: the owner is sent to the
// server's sign-in, comes back to the page asked for and gets a WebSocket echo from it; another
// user, signed in, gets "No such workspace". The apps zone is *.apps.localhost, which Chromium
// maps to loopback here, as every other name to nothing.
func terraformBrowser(t *testing.T, serverURL, app, ownerToken, otherToken string) {
	t.Run("Browser", func(t *testing.T) {
		rules := "MAP *.apps.localhost 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
		b := browser.Start(t, browser.Options{Name: "dev", ResolverRules: rules}).On(t)
		b.Open(app+"some/page?x=1", `//input[@name="token"]`)
		if loc := b.Location(); !strings.HasPrefix(loc, serverURL+"/signin?") {
			t.Errorf("the sign-in page is at %s", loc)
		}
		b.SignIn(ownerToken, `//h1[. = "the machine's app"]`)
		if loc := b.Location(); loc != app+"some/page?x=1" {
			t.Errorf("after sign-in the browser is at %s, want %s", loc, app+"some/page?x=1")
		}
		if body := b.Text("body"); !strings.Contains(body, "path /some/page") {
			t.Errorf("the app's page: %q", body)
		}
		b.Open(app+"ws-echo?msg=hello%20from%20Chromium", `//p[@id="status"][starts-with(., "echo: ") or . = "error"]`)
		if got := b.Text("#status"); got != "echo: hello from Chromium" {
			t.Errorf("the page's WebSocket: %q", got)
		}

		eve := browser.Start(t, browser.Options{Name: "eve", ResolverRules: rules}).On(t)
		eve.Open(app, `//input[@name="token"]`)
		eve.SignIn(otherToken, `//h1[contains(., "No such workspace")]`)
		if body := eve.Text("body"); strings.Contains(body, "the machine's app") {
			t.Errorf("eve sees %q", body)
		}
	})
}

// userToken is the token in the output of users create or rotate-token.
func userToken(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`Token: (hgu_\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no token in:\n%s", out)
	}
	return m[1]
}

func exitStatusOf(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// stdioConn is a hangar ssh --stdio process as a net.Conn.
type stdioConn struct {
	io.Reader
	io.WriteCloser
	cmd  *exec.Cmd
	once sync.Once
}

// Close ends the process once: the SSH client closes its connection from two goroutines (the
// caller's Close and its key exchange loop's read error), and a second, concurrent cmd.Wait
// blocks forever (it hung this test, 1 run in 15 under load).
func (c *stdioConn) Close() error {
	c.once.Do(func() {
		c.WriteCloser.Close()
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	})
	return nil
}
func (c *stdioConn) LocalAddr() net.Addr              { return &net.UnixAddr{Name: "stdio"} }
func (c *stdioConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4zero, Port: 22} }
func (c *stdioConn) SetDeadline(time.Time) error      { return nil }
func (c *stdioConn) SetReadDeadline(time.Time) error  { return nil }
func (c *stdioConn) SetWriteDeadline(time.Time) error { return nil }

// sftpRoundTrip writes 1 MiB through sftp over `hangar ssh --stdio tfa`, finds it on the machine,
// and reads it back.
func sftpRoundTrip(t *testing.T, bin string, env []string, knownHostsFile, machine string) {
	t.Helper()
	cmd := bounded(t, bin, "ssh", "--stdio", "tfa")
	cmd.Env = env
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	nc := &stdioConn{Reader: outPipe, WriteCloser: in, cmd: cmd}
	defer nc.Close()
	check, err := knownhosts.New(knownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	var alias string
	b, _ := os.ReadFile(knownHostsFile)
	if m := regexp.MustCompile(`(?m)^(hangar-workspace-\S+) `).FindSubmatch(b); m != nil {
		alias = string(m[1])
	} else {
		t.Fatalf("no hangar-workspace- line in %s:\n%s", knownHostsFile, b)
	}
	sc, chans, reqs, err := ssh.NewClientConn(nc, alias+":22", &ssh.ClientConfig{User: "dev/tfa", HostKeyCallback: check, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("ssh over hangar ssh --stdio: %v\n%s", err, stderr.String())
	}
	client := ssh.NewClient(sc, chans, reqs)
	defer client.Close()
	sc2, err := sftp.NewClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer sc2.Close()
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	f, err := sc2.Create("upload.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if onMachine, err := os.ReadFile(filepath.Join(machine, "home", "upload.bin")); err != nil || !bytes.Equal(onMachine, data) {
		t.Fatalf("the uploaded file on the machine: %d bytes, %v", len(onMachine), err)
	}
	r, err := sc2.Open("upload.bin")
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("read back %d bytes (%v), want the 1 MiB written", len(back), err)
	}
}
