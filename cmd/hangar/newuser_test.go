package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/pgtest"
)

// TestWhatANewUserTrippedOver drives, through the real binary and server, the small things issue 12
// found a new user tripping over: each is asserted as the user sees it.
func TestWhatANewUserTrippedOver(t *testing.T) {
	markerDir := filepath.Join(sharedDir(t), "markers") // outside /tmp, which template isolation hides
	h := startLoggedIn(t, "MARKER_DIR="+markerDir)
	must, hangar := h.must, h.hangar
	agentToken := regexp.MustCompile(`hga_[A-Za-z0-9_-]+`).FindString(must("agents", "create", "k1"))
	must("agents", "create", "k2") // never run
	aliceToken := userToken(t, must("users", "create", "alice"))

	t.Run("agents list says which agent is connected and when each was last seen", func(t *testing.T) {
		(&fakeAgent{t: t, url: h.url, token: agentToken}).cycle() // k1 calls once
		out := must("agents", "list")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(strings.Join(strings.Fields(lines[0]), " "), "NAME CONNECTED LAST SEEN DNS ZONE") {
			t.Fatalf("agents list:\n%s", out)
		}
		if !regexp.MustCompile(`(?m)^k1\s+yes\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`).MatchString(out) || !regexp.MustCompile(`(?m)^k2\s+no\s+never\s`).MatchString(out) {
			t.Errorf("agents list: want k1 connected and seen, k2 not connected and never seen:\n%s", out)
		}
	})

	t.Run("--wait on a workspace whose agent never connected says so at once and when it times out", func(t *testing.T) {
		out, err := hangar("create", "w2", "--agent", "k2", "--wait", "--timeout", "2s")
		if err == nil {
			t.Fatalf("create --wait on k2 succeeded:\n%s", out)
		}
		note := "Note: agent k2 has never connected to this server: nothing happens to workspace w2 until 'hangar agent' runs with k2's token. Waiting up to 2s."
		if !strings.Contains(out, note) {
			t.Errorf("no note that k2 never connected:\n%s", out)
		}
		if !regexp.MustCompile(`error: timed out after 2s waiting for workspace w2 to be Running \(desired=Running actual=\w+\): agent k2 has never connected`).MatchString(out) {
			t.Errorf("the time-out does not say why:\n%s", out)
		}
		// An agent that is connected: no note, whatever the wait's end.
		out, _ = hangar("create", "w1", "--agent", "k1", "--wait", "--timeout", "1s")
		if strings.Contains(out, "Note:") || strings.Contains(out, "connected") {
			t.Errorf("a note about a connected agent:\n%s", out)
		}
	})

	t.Run("an admin's list has an OWNER column", func(t *testing.T) {
		if out, err := hangar("create", "mine", "--agent", "k1", "--url", h.url, "--token", aliceToken); err != nil {
			t.Fatalf("alice creates a workspace: %v\n%s", err, out)
		}
		out := must("list")
		if !regexp.MustCompile(`(?m)^OWNER\s+NAME\s+AGENT`).MatchString(out) || !regexp.MustCompile(`(?m)^alice\s+mine\s+k1\s`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^admin\s+w1\s+k1\s`).MatchString(out) {
			t.Errorf("the admin's list:\n%s", out)
		}
	})

	t.Run("without a login the CLI names no server by itself", func(t *testing.T) {
		home := t.TempDir()
		cmd := exec.Command(h.bin, "list")
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "HANGAR_URL=", "HANGAR_TOKEN=")
		out, err := cmd.CombinedOutput()
		if exitStatusOf(err) != 1 || !strings.Contains(string(out), "error: no server: you are not logged in. Run 'hangar login --url URL --token TOKEN'") {
			t.Errorf("list without a login: %v\n%s", err, out)
		}
	})

	t.Run("delete asks first; --yes skips the question; without a terminal it refuses", func(t *testing.T) {
		out, err := hangar("delete", "w1") // stdin is /dev/null
		if exitStatusOf(err) != 1 || !strings.Contains(out, "error: deleting workspace w1 cannot be undone") || !strings.Contains(out, "pass --yes to confirm (stdin is not a terminal to ask on)") {
			t.Errorf("delete with no terminal and no --yes: %v\n%s", err, out)
		}
		var ws sdk.Workspace
		if err := json.Unmarshal([]byte(must("show", "w1", "-o", "json")), &ws); err != nil || ws.DesiredState != "Running" {
			t.Fatalf("after the refused delete: %+v %v", ws, err)
		}
		out = runOnTerminal(t, h, []string{"delete", "w1"}, map[string]string{"this cannot be undone. [y/N] ": "y"})
		if !strings.Contains(out, "Delete workspace w1? Its Kubernetes objects and its volume are deleted; this cannot be undone.") {
			t.Errorf("the question:\n%s", out)
		}
		if err := json.Unmarshal([]byte(must("show", "w1", "-o", "json")), &ws); err != nil || ws.DesiredState != "Terminated" {
			t.Fatalf("after answering y: %+v %v", ws, err)
		}
		must("delete", "w2", "--yes")
	})

	t.Run("logs -o json prints the API's JSON lines", func(t *testing.T) {
		must("templates", "push", "markers", "--directory", "testdata/markers")
		must("create", "tf1", "--template", "markers", "--wait", "--timeout", "2m")
		out := must("logs", "tf1", "-o", "json", "-f")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var logs []sdk.BuildLog
		for _, line := range lines {
			var l sdk.BuildLog
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("line %q is not JSON: %v\n%s", line, err, out)
			}
			logs = append(logs, l)
		}
		last := logs[len(logs)-1]
		if len(logs) < 3 || logs[0].Output == "" || logs[0].Stage == "" || logs[0].Time.IsZero() || !last.End || last.Status != "succeeded" {
			t.Errorf("logs -o json -f: first %+v, last %+v, %d lines\n%s", logs[0], last, len(logs), out)
		}
		if text := must("logs", "tf1"); strings.HasPrefix(strings.TrimSpace(text), "{") {
			t.Errorf("logs without -o json prints JSON:\n%s", text)
		}
	})
}

// TestSecondReplicaNamesNoMissingTokenFile: on Postgres, the replica that set the store up wrote the
// admin token in its data directory; a second replica, with a data directory of its own, used to
// print the path of an admin-token file that does not exist.
func TestSecondReplicaNamesNoMissingTokenFile(t *testing.T) {
	dir := t.TempDir()
	bin := buildHangar(t)
	db := pgtest.NewDatabase(t)
	first := startServer(t, bin, db, filepath.Join(dir, "a"))
	first.waitURL(t)
	if _, err := os.Stat(filepath.Join(dir, "a", "admin-token")); err != nil {
		t.Fatalf("the first replica wrote no admin token: %v", err)
	}
	second := startServer(t, bin, db, filepath.Join(dir, "b"))
	second.waitURL(t)
	var said []string
	timeout := time.After(30 * time.Second)
read:
	for {
		select {
		case line, ok := <-second.lines:
			if !ok {
				break read
			}
			said = append(said, line)
			if strings.HasPrefix(line, "Next:") {
				break read
			}
		case <-timeout:
			t.Fatalf("the second replica did not print its Next: line; it said:\n%s", strings.Join(said, "\n"))
		}
	}
	out := strings.Join(said, "\n")
	missing := filepath.Join(dir, "b", "admin-token")
	if _, err := os.Stat(missing); err == nil {
		t.Fatalf("the second replica wrote %s", missing)
	}
	if strings.Contains(out, missing+" ") || strings.Contains(out, "cat "+missing) {
		t.Errorf("the second replica points at %s, which does not exist:\n%s", missing, out)
	}
	if !strings.Contains(out, "This store was set up by another server (or with another data directory): the admin token was written to the admin-token file of that server's data directory") ||
		!strings.Contains(out, "Next: hangar login --url "+second.url+" --token TOKEN") {
		t.Errorf("the second replica does not say where the token is:\n%s", out)
	}
}
