package main_test

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// markersV2 is version 2 of the marker template: the same resources, named after two parameters
// (copies, mutable; flavor, immutable) and given a sensitive one (api_key, written to a file so
// the test sees terraform got it).
const markersV2 = `variable "start_count" {
  type = number
}

variable "workspace_name" {
  type = string
}

# hangar:mutable
variable "copies" {
  type    = number
  default = 1
  validation {
    condition     = var.copies >= 1 && var.copies <= 3
    error_message = "copies must be 1 to 3."
  }
}

variable "flavor" {
  type        = string
  description = "small or large"
  validation {
    condition     = contains(["small", "large"], var.flavor)
    error_message = "flavor is small or large."
  }
}

variable "api_key" {
  type      = string
  sensitive = true
}

resource "terraform_data" "marker" {
  count = var.start_count * var.copies
  input = "${var.workspace_name}-v2-${var.flavor}-${count.index}"

  provisioner "local-exec" {
    command = "mkdir -p \"$MARKER_DIR\" && touch \"$MARKER_DIR/${self.input}\""
  }

  provisioner "local-exec" {
    when    = destroy
    command = "rm -f \"$MARKER_DIR/${self.input}\""
  }
}

resource "terraform_data" "key" {
  count = var.start_count
  input = sha256(var.api_key)

  provisioner "local-exec" {
    command = "mkdir -p \"$MARKER_DIR/../keys\" && echo \"${self.input}\" > \"$MARKER_DIR/../keys/${var.workspace_name}\""
  }
}
`

// TestTemplateVersionsEndToEnd drives versions and parameters through the real binary (`hangar
// server` with its in-process provisioner running the real terraform, and the CLI): a version
// pushed without becoming active, versions, pull, promote, the outdated flag in list and show,
// parameters given, missing, invalid and sensitive (never shown), asked for on a terminal
// (sensitive ones without echo), an immutable one refused, and update: stop and start on the new
// version, whose resources replace the old ones.
func TestTemplateVersionsEndToEnd(t *testing.T) {
	const secret = "SENSITIVE-7f3a"
	base := sharedDir(t)
	markerDir := filepath.Join(base, "markers")
	h := startLoggedIn(t, "MARKER_DIR="+markerDir)
	hangar, must := h.hangar, h.must
	wait := []string{"--wait", "--timeout", "2m"}

	must("templates", "push", "markers", "--directory", "testdata/markers")
	must(append([]string{"create", "tf1", "--template", "markers"}, wait...)...)
	wantMarkers(t, markerDir, "tf1-0", "tf1-1", "tf1-2")

	// Version 2, pushed without becoming active.
	v2 := filepath.Join(base, "v2")
	if err := os.MkdirAll(v2, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v2, "main.tf"), []byte(markersV2), 0o644); err != nil {
		t.Fatal(err)
	}
	out := must("templates", "push", "markers", "--directory", v2, "--activate=false")
	for _, want := range []string{"version 2", "flavor (string, required)", "api_key (string, required, sensitive)", "copies (number, default \"1\", mutable)", "Version 2 is not active (version 1 is)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("push --activate=false lacks %q:\n%s", want, out)
		}
	}
	out = must("templates", "versions", "markers")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "2 ") || !strings.Contains(lines[2], "active") || strings.Contains(lines[1], "active") {
		t.Fatalf("templates versions:\n%s", out)
	}
	if out := must("list"); strings.Contains(out, "outdated") || !strings.Contains(out, "markers v1") {
		t.Fatalf("list before the promote:\n%s", out)
	}

	// Pull: version 1 into a directory, the active one as an archive.
	pulled := filepath.Join(base, "pulled")
	must("templates", "pull", "markers", "1", "--directory", pulled)
	got, err := os.ReadFile(filepath.Join(pulled, "main.tf"))
	want, _ := os.ReadFile("testdata/markers/main.tf")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("pulled version 1 (%v):\n%s", err, got)
	}
	if out, err := hangar("templates", "pull", "markers", "1", "--directory", pulled); err == nil || !strings.Contains(out, "not empty") {
		t.Fatalf("pull into a non-empty directory (%v):\n%s", err, out)
	}
	must("templates", "pull", "markers", "2", "--archive", filepath.Join(base, "v2.tar.gz"))
	if st, err := os.Stat(filepath.Join(base, "v2.tar.gz")); err != nil || st.Size() == 0 {
		t.Fatalf("pulled archive: %v", err)
	}

	// Promote: tf1 is outdated.
	if out := must("templates", "promote", "markers", "2"); !strings.Contains(out, "version 2 is active") {
		t.Fatalf("promote:\n%s", out)
	}
	if out := must("list"); !strings.Contains(out, "markers v1, outdated") {
		t.Fatalf("list after the promote:\n%s", out)
	}
	if out := must("show", "tf1"); !strings.Contains(out, "1 (outdated") || !strings.Contains(out, "hangar update tf1") {
		t.Fatalf("show after the promote:\n%s", out)
	}

	// Parameters at create: missing, invalid, then given; the sensitive one is never shown.
	if out, err := hangar("create", "tf2", "--template", "markers", "--parameter", "api_key="+secret); err == nil ||
		!strings.Contains(out, "parameters.flavor") || !strings.Contains(out, "required") || strings.Contains(out, secret) {
		t.Fatalf("create without flavor (%v):\n%s", err, out)
	}
	if out, err := hangar("create", "tf2", "--template", "markers", "--parameter", "flavor=huge", "--parameter", "api_key="+secret); err == nil ||
		!strings.Contains(out, "flavor is small or large.") || strings.Contains(out, secret) {
		t.Fatalf("create with an invalid flavor (%v):\n%s", err, out)
	}
	if out, err := hangar("create", "tf2", "--template", "markers", "--parameter", "flavor=small", "--parameter", "api_key="+secret, "--parameter", "copies=many"); err == nil ||
		!strings.Contains(out, "parameters.copies") || !strings.Contains(out, "must be a number") {
		t.Fatalf("create with copies not a number (%v):\n%s", err, out)
	}
	out = must(append([]string{"create", "tf2", "--template", "markers", "--parameter", "flavor=small", "--parameter", "api_key=" + secret}, wait...)...)
	if strings.Contains(out, secret) {
		t.Fatalf("create --wait shows the sensitive value:\n%s", out)
	}
	wantMarkers(t, markerDir, "tf1-0", "tf1-1", "tf1-2", "tf2-v2-small-0")
	if key, err := os.ReadFile(filepath.Join(base, "keys", "tf2")); err != nil || len(strings.TrimSpace(string(key))) != 64 {
		t.Fatalf("terraform did not get api_key (%v): %q", err, key)
	}
	out = must("show", "tf2")
	if strings.Contains(out, secret) || !strings.Contains(out, "api_key=(sensitive)") || !strings.Contains(out, "flavor=small") {
		t.Fatalf("show tf2:\n%s", out)
	}
	if out := must("show", "tf2", "-o", "json"); strings.Contains(out, secret) {
		t.Fatalf("show -o json shows the sensitive value:\n%s", out)
	}

	// Update: an immutable parameter is refused; a mutable one restarts on the new value.
	if out, err := hangar("update", "tf2", "--parameter", "flavor=large"); err == nil || !strings.Contains(out, "immutable") {
		t.Fatalf("update of an immutable parameter (%v):\n%s", err, out)
	}
	out = must(append([]string{"update", "tf2", "--parameter", "copies=2"}, wait...)...)
	if !strings.Contains(out, "Workspace tf2 is Running") {
		t.Fatalf("update --wait:\n%s", out)
	}
	wantMarkers(t, markerDir, "tf1-0", "tf1-1", "tf1-2", "tf2-v2-small-0", "tf2-v2-small-1")
	if out := must("update", "tf2"); !strings.Contains(out, "up to date") {
		t.Fatalf("update of an up-to-date workspace:\n%s", out)
	}

	// tf1 (version 1): update asks for the parameters version 2 requires, on a terminal; the
	// sensitive answer is not echoed. Then it stops on version 1 and starts on version 2.
	transcript := runOnTerminal(t, h, []string{"update", "tf1", "--wait", "--timeout", "2m"}, map[string]string{
		"flavor (string: small or large): ": "large",
		"api_key (string): ":                "key-" + secret,
	}, "api_key (string): ")
	if strings.Contains(transcript, secret) {
		t.Fatalf("the terminal shows the sensitive answer:\n%s", transcript)
	}
	if !strings.Contains(transcript, "large") || !strings.Contains(transcript, "Workspace tf1 is Running") {
		t.Fatalf("update on a terminal:\n%s", transcript)
	}
	wantMarkers(t, markerDir, "tf1-v2-large-0", "tf2-v2-small-0", "tf2-v2-small-1")
	out = must("show", "tf1")
	if strings.Contains(out, "outdated") || !strings.Contains(out, "Template version:  2") {
		t.Fatalf("show tf1 after the update:\n%s", out)
	}
	if out := must("list"); strings.Contains(out, "outdated") {
		t.Fatalf("list after the update:\n%s", out)
	}
}

// runOnTerminal runs the CLI with a terminal as stdin, answering each prompt, and returns what the
// terminal showed (its echo included) with the command's output.
// runOnTerminal runs the CLI with a pseudo-terminal as its standard input, answering each prompt
// as it appears. The answers to the hidden prompts are typed only once the terminal's echo is off,
// as a person types after the prompt: typed ahead, any terminal would echo them.
func runOnTerminal(t *testing.T, h *harness, args []string, answers map[string]string, hidden ...string) string {
	t.Helper()
	cmd := exec.Command(h.bin, args...)
	cmd.Env = h.env
	term, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	cmd.Stdin = tty
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var mu sync.Mutex
	var echo bytes.Buffer
	go func() {
		b := make([]byte, 1024)
		for {
			n, err := term.Read(b)
			mu.Lock()
			echo.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	var seen strings.Builder
	sc := bufio.NewScanner(stdout)
	sc.Split(bufio.ScanRunes) // prompts have no newline
	answered := map[string]bool{}
	for sc.Scan() {
		seen.WriteString(sc.Text())
		for prompt, answer := range answers {
			if !answered[prompt] && strings.HasSuffix(seen.String(), prompt) {
				answered[prompt] = true
				if slices.Contains(hidden, prompt) {
					waitEchoOff(t, term)
				}
				if _, err := io.WriteString(term, answer+"\n"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	err = cmd.Wait()
	mu.Lock()
	defer mu.Unlock()
	all := seen.String() + "\n-- terminal --\n" + echo.String()
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, all)
	}
	if len(answered) != len(answers) {
		t.Fatalf("%v: asked %v of %d questions:\n%s", args, answered, len(answers), all)
	}
	return all
}

// waitEchoOff waits until the terminal's echo is turned off (the CLI reading a hidden answer). On
// Linux the master side's termios are the terminal's own.
func waitEchoOff(t *testing.T, term *os.File) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tio, err := unix.IoctlGetTermios(int(term.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatalf("read the terminal's settings: %v", err)
		}
		if tio.Lflag&unix.ECHO == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the CLI never turned the terminal's echo off for a hidden answer")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
