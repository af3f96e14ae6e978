package wshelper

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeEditor is the editor of these tests (this test binary, started by the helper): it serves its
// pid and its environment's FROM_CONTAINER on port, after waiting for the file
// WSHELPER_TEST_EDITOR_GATE, if given, to exist.
func fakeEditor(port string) {
	if gate := os.Getenv("WSHELPER_TEST_EDITOR_GATE"); gate != "" {
		for {
			if _, err := os.Stat(gate); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake editor:", err)
		os.Exit(3)
	}
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "pid %d from-container %s", os.Getpid(), os.Getenv("FROM_CONTAINER"))
	}))
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func editorPage(port int) (string, error) {
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestEditorRunsInTheContainer: the helper runs the editor with the container's environment,
// serves SSH (the readiness probe) only once the editor answers, starts it again when it dies, and
// stops it with the container.
func TestEditorRunsInTheContainer(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	gate := t.TempDir() + "/gate"
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "SHELL=/bin/sh", "FROM_CONTAINER=yes",
		"WSHELPER_TEST_EDITOR_PORT=" + strconv.Itoa(port), "WSHELPER_TEST_EDITOR_GATE=" + gate}
	h := launchRun(t, Config{Env: env, Editor: &EditorProcess{Argv: []string{self}, Port: port}, EditorReadyTimeout: time.Hour,
		After: func(d time.Duration) <-chan time.Time {
			if d == time.Hour {
				return nil // the wait for the editor never gives up here
			}
			return time.After(time.Millisecond) // restarts at once
		}})
	eventually(t, "the editor to start", func() bool { return strings.Contains(h.logs.String(), "editor started") })
	// The editor runs but does not answer yet: no SSH.
	select {
	case a := <-h.listening:
		t.Fatalf("ssh served at %s before the editor answers", a)
	default:
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.waitListening(t)
	page, err := editorPage(port)
	if err != nil || !strings.Contains(page, "from-container yes") {
		t.Fatalf("the editor's page: %q %v", page, err)
	}
	var pid int
	fmt.Sscanf(page, "pid %d", &pid)

	// Killed, it is started again.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the editor to be started again", func() bool {
		p, err := editorPage(port)
		return err == nil && !strings.HasPrefix(p, fmt.Sprintf("pid %d ", pid))
	})
	if !strings.Contains(h.logs.String(), "the editor ended; starting it again") {
		t.Errorf("the restart was not logged:\n%s", h.logs.String())
	}

	// Stopped with the container.
	h.sigs <- syscall.SIGTERM
	if r := h.wait(t); r.err != nil || r.code != 0 {
		t.Fatalf("Run: %+v", r)
	}
	if _, err := editorPage(port); err == nil {
		t.Fatal("the editor still answers after the helper stopped")
	}
}

// TestEditorThatNeverAnswers: SSH is served anyway once the wait for the editor has given up, so a
// broken editor does not keep the user out of the workspace.
func TestEditorThatNeverAnswers(t *testing.T) {
	h := startRun(t, Config{Editor: &EditorProcess{Argv: []string{"/bin/sh", "-c", "exit 4"}, Port: freePort(t)},
		EditorReadyTimeout: time.Millisecond, After: func(time.Duration) <-chan time.Time { return time.After(time.Millisecond) }})
	eventually(t, "the editor to be retried", func() bool {
		return strings.Count(h.logs.String(), "the editor ended; starting it again") >= 2
	})
	if !strings.Contains(h.logs.String(), "serving the workspace anyway") {
		t.Errorf("no word of the editor's wait giving up:\n%s", h.logs.String())
	}
}

func TestParseEditor(t *testing.T) {
	e, err := ParseEditor(`{"argv":["/hangar/editor/bin/node","entry.js","--bind-addr","0.0.0.0:60001"],"port":60001}`)
	if err != nil || e.Port != 60001 || len(e.Argv) != 4 {
		t.Fatalf("%+v %v", e, err)
	}
	if e, err := ParseEditor(" "); e != nil || err != nil {
		t.Fatalf("empty: %+v %v", e, err)
	}
	for _, bad := range []string{`{"argv":[],"port":1}`, `{"argv":["node"],"port":1}`, `{"argv":["/n"],"port":0}`, `{"argv":["/n"],"port":70000}`,
		`{"argv":["/n"],"port":1,"x":1}`, `{"argv":["/n\u0000"],"port":1}`, `{"argv":["/n"],"port":1} {}`, `[]`} {
		if _, err := ParseEditor(bad); err == nil {
			t.Errorf("ParseEditor(%s) accepted", bad)
		}
	}
}
