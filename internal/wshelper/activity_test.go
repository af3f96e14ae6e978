//go:build linux

package wshelper

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startProcess runs a command of the test's user and stops it at the test's end.
func startProcess(t *testing.T, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// The sampler counts the CPU the user's processes used between two looks, in cores over the time
// between them, and names the busiest; a process that the server's list names is reported with
// its command line, whole words only; nothing is counted of another user's processes.
func TestActivitySampler(t *testing.T) {
	busy := startProcess(t, "/bin/sh", "-c", "while :; do :; done")
	startProcess(t, "sleep", "300")
	a := &activitySampler{fsRoot: "/", uid: uint32(os.Getuid()), self: os.Getpid(), processes: []string{"sle", "sleep 300"}}
	t0 := time.Now()
	if first := a.sample(t0); first.CPUCores != 0 || !strings.HasPrefix(first.Matched, "sleep 300 (pid ") {
		t.Fatalf("the first look: %+v", first)
	}
	// Wait (on the kernel's figure, not a timer) for the loop to use 0.3 s of CPU.
	_, before, _, _ := readProcStat(fmt.Sprintf("/proc/%d/stat", busy.Process.Pid))
	eventually(t, "the loop to use CPU", func() bool {
		_, now, _, _ := readProcStat(fmt.Sprintf("/proc/%d/stat", busy.Process.Pid))
		return now-before >= 30
	})
	// Looked at one second after the first look: at least 0.3 cores (the user's other processes,
	// the test's own included, may add to it and be the busiest: TestActivityTopProcess says which).
	got := a.sample(t0.Add(time.Second))
	if got.CPUCores < 0.3 || got.TopProcess == "" {
		t.Fatalf("after the loop ran: %+v", got)
	}
	a.processes = []string{"sle", "slee"}
	if got := a.sample(t0.Add(2 * time.Second)); got.Matched != "" {
		t.Fatalf("a prefix of a word matched: %+v", got)
	}
	// Another user's processes are not the workspace's.
	other := &activitySampler{fsRoot: "/", uid: uint32(os.Getuid()) + 12345, self: os.Getpid(), processes: []string{"sleep"}}
	other.sample(t0)
	if got := other.sample(t0.Add(time.Second)); got.CPUCores != 0 || got.Matched != "" {
		t.Fatalf("another user's processes counted: %+v", got)
	}
}

// Connections established to the editor's port from another host count; the helper's own (from
// the loopback), other ports and other states do not.
func TestEditorConnections(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc/net"), 0o755); err != nil {
		t.Fatal(err)
	}
	// 0x EA61 = 60001. 0100007F is 127.0.0.1; 0A00F40A is 10.244.0.10.
	tcp := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:EA61 00000000:0000 0A 00000000:00000000 00:00000000 00000000  5001        0 1 1
   1: 0A00F40A:EA61 0A00F40A:C350 01 00000000:00000000 00:00000000 00000000  5001        0 2 1
   2: 0100007F:EA61 0100007F:D431 01 00000000:00000000 00:00000000 00000000  5001        0 3 1
   3: 0A00F40A:08AE 0A00F40A:C351 01 00000000:00000000 00:00000000 00000000  5001        0 4 1
   4: 0A00F40A:EA61 0B00F40A:C352 06 00000000:00000000 00:00000000 00000000  5001        0 5 1
`
	tcp6 := `  sl  local_address                         remote_address                        st
   0: 00000000000000000000000000000000:EA61 00000000000000000000000001000000:D000 01
   1: 00000000000000000000000000000000:EA61 0000000000000000FFFF00000A00F40A:D001 01
`
	for name, body := range map[string]string{"tcp": tcp, "tcp6": tcp6} {
		if err := os.WriteFile(filepath.Join(root, "proc/net", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if n := countConnections(root, 60001); n != 2 {
		t.Fatalf("%d connections, want 2 (one IPv4, one IPv4-mapped, none from the loopback)", n)
	}
}

// What sessions write to their clients is counted, for the activity; TakeOutput resets it.
func TestSessionOutputCounted(t *testing.T) {
	ts := startServer(t, ServerOptions{})
	c, err := ts.dial(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := sess.Output("printf 0123456789"); err != nil || string(out) != "0123456789" {
		t.Fatalf("%q %v", out, err)
	}
	if n := ts.srv.TakeOutput(); n != 10 {
		t.Fatalf("TakeOutput = %d, want 10", n)
	}
	if n := ts.srv.TakeOutput(); n != 0 {
		t.Fatalf("again: %d, want 0", n)
	}
}

// The busiest process between two looks is named; one that started since the last look counts
// all its time; a process whose start time changed (its PID reused) is a new one; the helper
// itself is left out; a name with spaces and parentheses is read whole.
func TestActivityTopProcess(t *testing.T) {
	root := t.TempDir()
	stat := func(pid int, comm string, ticks, start int) {
		t.Helper()
		dir := filepath.Join(root, "proc", fmt.Sprint(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ... starttime (22)
		line := fmt.Sprintf("%d (%s) R 1 1 1 0 -1 0 0 0 0 0 %d 0 0 0 20 0 1 0 %d 0 0\n", pid, comm, ticks, start)
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat(10, "go", 100, 1)
	stat(11, "my (odd) tool", 50, 1)
	stat(12, "hangar", 10, 1)
	a := &activitySampler{fsRoot: root, uid: uint32(os.Getuid()), self: 12}
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	a.sample(t0)
	stat(10, "go", 120, 1)            // 0.2 s
	stat(11, "my (odd) tool", 110, 1) // 0.6 s
	stat(12, "hangar", 1000, 1)       // the helper: left out
	stat(13, "cc1", 30, 5)            // new: 0.3 s
	got := a.sample(t0.Add(time.Second))
	if got.CPUCores != 1.1 || got.TopProcess != "my (odd) tool" {
		t.Fatalf("second look: %+v", got)
	}
	stat(10, "go", 5, 9) // PID 10 reused: 0.05 s, not a negative difference
	got = a.sample(t0.Add(2 * time.Second))
	if got.CPUCores != 0.05 || got.TopProcess != "go" {
		t.Fatalf("third look: %+v", got)
	}
}
