//go:build !windows

package quickstart

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestWithPort: the printed workspace URL carries the proxy's port when the server's has none.
func TestWithPort(t *testing.T) {
	for _, tc := range []struct{ url, listen, want string }{
		{"http://60001-first--admin.workspaces.localhost/", "127.0.0.1:8080", "http://60001-first--admin.workspaces.localhost:8080/"},
		{"http://60001-first--admin.workspaces.localhost:9000/", "127.0.0.1:8080", "http://60001-first--admin.workspaces.localhost:9000/"},
		{"http://60001-first--admin.workspaces.localhost/", "127.0.0.1:80", "http://60001-first--admin.workspaces.localhost/"},
	} {
		if got := withPort(tc.url, tc.listen); got != tc.want {
			t.Errorf("withPort(%q, %q) = %q, want %q", tc.url, tc.listen, got, tc.want)
		}
	}
}

// TestFindSource: the quick start finds the checkout from a directory inside it, and without one
// says that it needs one and how to give it.
func TestFindSource(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := findSource(""); err != nil || got != root {
		t.Errorf("from inside the checkout: %q %v, want %q", got, err, root)
	}
	if _, err := findSource(t.TempDir()); err == nil || !strings.Contains(err.Error(), "--source") {
		t.Errorf("--source of a directory that is no checkout: %v", err)
	}
}

// TestStopLeavesOthersAlone: stop with no quick start says there is nothing to stop; a recorded pid
// that is not the quick start's process (here this test's own) is not signalled, and stop may run
// again.
func TestStopLeavesOthersAlone(t *testing.T) {
	var out bytes.Buffer
	missing := filepath.Join(t.TempDir(), "none")
	if err := Stop(missing, &out); err != nil || !strings.HasPrefix(out.String(), "Nothing to stop") {
		t.Errorf("stop of nothing: %v %q", err, out.String())
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pids"), []byte(fmt.Sprintf("%d server\n", os.Getpid())), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		out.Reset()
		if err := Stop(dir, &out); err != nil || strings.Contains(out.String(), "Stopped") && !strings.Contains(out.String(), "The quick start is stopped") {
			t.Errorf("stop: %v %q", err, out.String())
		}
		if strings.Contains(out.String(), "Stopped hangar server") {
			t.Errorf("stop signalled a process that is not the quick start's: %q", out.String())
		}
	}
}

// TestEditorAnswers: the quick start waits for the workspace URL to answer through the proxy, which
// it dials directly (the workspace's name resolves nowhere), as the admin; a 503 (the workspace is
// not running yet) is not an answer.
func TestEditorAnswers(t *testing.T) {
	var running atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "60001-first--admin.workspaces.localhost:8080" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "who", http.StatusUnauthorized)
			return
		}
		if !running.Load() {
			http.Error(w, "Workspace not running", http.StatusServiceUnavailable)
			return
		}
		http.Redirect(w, r, "/?folder=/projects", http.StatusFound)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	url := "http://60001-first--admin.workspaces.localhost:8080/"
	if editorAnswers(context.Background(), addr, url, "tok") {
		t.Error("a 503 counted as the editor answering")
	}
	running.Store(true)
	if !editorAnswers(context.Background(), addr, url, "tok") {
		t.Error("the editor's answer was not seen")
	}
	if editorAnswers(context.Background(), addr, url, "other") {
		t.Error("a 401 counted as the editor answering")
	}
}

// TestStopRefusesADataDirOthersCanWrite: stop runs, as root, the scripts/kube-down of the checkout
// that state.json names; in a data directory another user can write (one made in /tmp beforehand),
// that user's state.json must not make stop run their script. The quick start itself refuses such
// a directory the same way (checkDataDir).
func TestStopRefusesADataDirOthersCanWrite(t *testing.T) {
	base := t.TempDir()
	marker := filepath.Join(base, "ran")
	fake := filepath.Join(base, "src")
	if err := os.MkdirAll(filepath.Join(fake, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fake, "scripts", "kube-down"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plant := func(dir string) {
		if err := os.MkdirAll(filepath.Join(dir, "cluster"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cluster", "pids"), []byte("1 x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(`{"source":"`+fake+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A directory everybody may write.
	open := filepath.Join(base, "open")
	plant(open)
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	dirs := []string{open}
	if os.Geteuid() == 0 { // as the quick start runs; only root can give a directory to another user
		// Another user's directory.
		other := filepath.Join(base, "other")
		plant(other)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		// A directory of root's inside another user's: they can move it away and put their own there.
		inOther := filepath.Join(base, "parent", "qs")
		plant(inOther)
		if err := os.Chown(filepath.Dir(inOther), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, other, inOther)
	}
	for _, dir := range dirs {
		var out bytes.Buffer
		err := Stop(dir, &out)
		if err == nil || !strings.Contains(err.Error(), "--data-dir") {
			t.Errorf("stop in %s: want a refusal naming --data-dir, got %v (%q)", dir, err, out.String())
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("stop in %s ran the kube-down that another user's state.json named", dir)
		}
	}
	// Root's (the running user's) own directory is fine.
	mine := filepath.Join(base, "mine")
	plant(mine)
	if err := os.Chmod(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Stop(mine, &out); err != nil || !strings.Contains(out.String(), "Stopped the local cluster") {
		t.Errorf("stop in root's own directory: %v %q", err, out.String())
	}
}

// TestFindSourceRefusesACheckoutOthersCanChange: the quick start runs the checkout's scripts as
// root. A "checkout" another user can change is refused, whether given or found by walking up
// from the current directory (anyone may put scripts/kube-up and tools/kube/go.mod into /tmp).
func TestFindSourceRefusesACheckoutOthersCanChange(t *testing.T) {
	base := t.TempDir()
	plant := func(dir string) {
		for _, d := range []string{filepath.Join(dir, "scripts"), filepath.Join(dir, "tools", "kube"), filepath.Join(dir, "work")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "scripts", "kube-up"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tools", "kube", "go.mod"), []byte("module x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A directory everybody may write, as /tmp without its sticky bit would be, with a planted
	// "checkout"; and a checkout whose script everybody may change.
	open := filepath.Join(base, "open")
	plant(open)
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(base, "loose")
	plant(loose)
	if err := os.Chmod(filepath.Join(loose, "scripts", "kube-up"), 0o777); err != nil {
		t.Fatal(err)
	}
	dirs := []string{open, loose}
	if os.Geteuid() == 0 { // as the quick start runs; only root can give a directory to another user
		other := filepath.Join(base, "other")
		plant(other)
		if err := os.Chown(filepath.Join(other, "scripts", "kube-up"), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, other)
	}
	for _, dir := range dirs {
		if _, err := findSource(dir); err == nil || !strings.Contains(err.Error(), "the source checkout "+dir) {
			t.Errorf("--source %s: want a refusal naming the checkout, got %v", dir, err)
		}
		t.Chdir(filepath.Join(dir, "work"))
		if src, err := findSource(""); err == nil {
			t.Errorf("from inside %s: took %s as the checkout", dir, src)
		}
	}
	// A checkout only root (or you) can change is fine.
	mine := filepath.Join(base, "mine")
	plant(mine)
	if got, err := findSource(mine); err != nil || got != mine {
		t.Errorf("a checkout of yours: %q %v", got, err)
	}
}

// TestInstallDeps: on a machine lacking what the cluster or the editor needs, the quick start runs
// scripts/install-deps quickstart (with its progress said), or, told not to install, names the
// missing packages and the command; with nothing missing it runs nothing.
func TestInstallDeps(t *testing.T) {
	for _, tc := range []struct {
		name, missing string
		refuse        bool
		wantErr, want string // want: what the fake script was run with, after --check
	}{
		{"nothing missing", "", false, "", ""},
		{"installs", "containerd npm", false, "", "quickstart\n"},
		{"refuses", "containerd npm", true, "need these Debian packages, missing here: containerd npm; install them", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := t.TempDir()
			ran := filepath.Join(src, "ran")
			if err := os.Mkdir(filepath.Join(src, "scripts"), 0o755); err != nil {
				t.Fatal(err)
			}
			script := fmt.Sprintf("#!/bin/sh\nif [ \"$2\" = --check ]; then echo '%s'; exit 0; fi\necho \"$@\" >> %s\n", tc.missing, ran)
			if err := os.WriteFile(filepath.Join(src, "scripts", "install-deps"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			var said bytes.Buffer
			l := layout{dir: t.TempDir()}
			err := installDeps(context.Background(), &progressWriter{w: &said}, l, src, tc.refuse)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("installDeps: %v, want %q", err, tc.wantErr)
			}
			b, _ := os.ReadFile(ran)
			if string(b) != tc.want {
				t.Errorf("scripts/install-deps was run with %q, want %q", b, tc.want)
			}
			if tc.want != "" && !strings.Contains(said.String(), "installing the Debian packages the local cluster and the editor's image need: "+tc.missing) {
				t.Errorf("the quick start said:\n%s", said.String())
			}
		})
	}
}
