package netns

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// A listener made in a new namespace serves from this process; the host's loopback does not reach
// it, a Dialer of that namespace does; and Check refuses a path that is no namespace.
func TestSocketsInAnotherNamespace(t *testing.T) {
	name := "hangar-netns-test-" + strconv.Itoa(os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set lo up: %v\n%s", err, out)
	}
	path := "/run/netns/" + name
	if err := Check(path); err != nil {
		t.Fatal(err)
	}
	l, err := Listen(path, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("inside"))
			c.Close()
		}
	}()
	addr := l.Addr().String()
	if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		c.Close()
		t.Errorf("the host's loopback reached %s, a listener of another namespace", addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := (&Dialer{Path: path}).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dial %s inside: %v", addr, err)
	}
	defer c.Close()
	b := make([]byte, 6)
	if _, err := c.Read(b); err != nil || string(b) != "inside" {
		t.Errorf("read %q %v", b, err)
	}
	if err := Check("/proc/self/status"); err == nil {
		t.Error("Check took a file that is no network namespace")
	}
	if err := Check("/run/netns/no-such-namespace"); err == nil {
		t.Error("Check took a path that does not exist")
	}
}

// Dials to a port that does not answer hold a thread each while they wait: they are bounded
// (MaxDials), so that requests piling up cannot exhaust the process's threads.
func TestDialsInProgressAreBounded(t *testing.T) {
	name := "hangar-netns-bound-" + strconv.Itoa(os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", name).Run() })
	for _, args := range [][]string{
		{"ip", "-n", name, "link", "set", "lo", "up"},
		// A port whose SYNs are dropped: a dial to it waits for its deadline.
		{"ip", "netns", "exec", name, "iptables", "-A", "INPUT", "-p", "tcp", "--dport", "9", "-j", "DROP"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	threads := func() int {
		es, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	before := threads()
	d := &Dialer{Path: "/run/netns/" + name}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	const n = 300
	done := make(chan error, n)
	for range n {
		go func() {
			c, err := d.DialContext(ctx, "tcp", "127.0.0.1:9")
			if c != nil {
				c.Close()
			}
			done <- err
		}()
	}
	most := 0
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for left := n; left > 0; {
		select {
		case err := <-done:
			left--
			if err == nil {
				t.Error("a dial to a port that drops SYNs succeeded")
			}
		case <-tick.C:
			most = max(most, threads())
		}
	}
	if most-before > MaxDials+16 {
		t.Errorf("%d dials in progress took %d threads (from %d to %d), want at most about %d", n, most-before, before, most, MaxDials)
	}
}
