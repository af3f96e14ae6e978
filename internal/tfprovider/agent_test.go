package tfprovider

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// fakeHangar writes an executable that prints its arguments and the helper's token.
func fakeHangar(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nprintf '%s|' \"$@\"\necho \"token=$HANGAR_HELPER_TOKEN\"\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

func runInit(t *testing.T, script, path string, args ...string) (string, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "init.sh")
	if err := os.WriteFile(f, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", append([]string{f}, args...)...)
	cmd.Env = []string{"PATH=" + path}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The init script runs the helper with the URL, its extra arguments and the token in the
// environment, quoting whatever the values hold; without hangar_binary it finds hangar on PATH,
// and says so when there is none.
func TestInitScript(t *testing.T) {
	dir := t.TempDir()
	odd := filepath.Join(dir, "it's a dir", "hangar")
	fakeHangar(t, odd)
	url, token := "http://h:1/a b'c", "hwa_x'y $(z)"
	out, err := runInit(t, InitScript(Helper{Binary: odd, ConnectURL: url, Token: token}), "/usr/bin:/bin", "--state-dir", "/s")
	want := "workspace-helper|--connect-url|" + url + "|--state-dir|/s|token=" + token + "\n"
	if err != nil || out != want {
		t.Fatalf("with hangar_binary: %v\n%q\nwant %q", err, out, want)
	}
	onPath := filepath.Join(dir, "bin", "hangar")
	fakeHangar(t, onPath)
	if out, err := runInit(t, InitScript(Helper{ConnectURL: url, Token: token}), filepath.Dir(onPath)+":/usr/bin:/bin"); err != nil || !strings.HasPrefix(out, "workspace-helper|") {
		t.Fatalf("from PATH: %v\n%s", err, out)
	}
	out, err = runInit(t, InitScript(Helper{ConnectURL: url, Token: token}), "/nonexistent")
	if err == nil || !strings.Contains(out, "no hangar binary on PATH (set hangar_binary)") {
		t.Fatalf("without hangar: %v\n%s", err, out)
	}
	if strings.Contains(InitScript(Helper{ConnectURL: url, Token: token}), "--token") {
		t.Fatal("the token is on the helper's command line")
	}
}

// The host key goes to the helper in its environment, as the token does; newHostKey makes one the
// helper parses.
func TestInitScriptHostKey(t *testing.T) {
	key, err := newHostKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ssh.ParsePrivateKey([]byte(key)); err != nil {
		t.Fatalf("the generated host key does not parse: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "hangar")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nprintf '%s' \"$HANGAR_HELPER_HOST_KEY\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := InitScript(Helper{Binary: bin, ConnectURL: "http://h:1", Token: "hwa_x", HostKey: key})
	if out, err := runInit(t, script, "/usr/bin:/bin"); err != nil || out != key {
		t.Fatalf("the helper got the host key %q (%v), want %q", out, err, key)
	}
	if strings.Contains(script, "--host-key") {
		t.Fatal("the host key is on the helper's command line")
	}
}
