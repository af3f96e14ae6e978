// Package systemd holds the checks of Hangar's systemd unit (hangar-server.service and its TLS
// drop-in, docs/deploy-vm.md): systemd itself parses them.
package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/provisioner/sandbox"
)

// analyze runs systemd-analyze (Debian's systemd package; .ci/run installs it).
func analyze(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze is needed to check the unit (apt-get install systemd): %v", err)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// installed writes the unit and its drop-in as they are installed, into a directory of their own,
// with ExecStart pointing at an executable that exists here (verify checks it is one), and
// returns the unit's path. edit, if set, changes the files' text first.
func installed(t *testing.T, edit func(string) string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "hangar-server.service.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for src, dst := range map[string]string{"hangar-server.service": "hangar-server.service", "tls.conf": "hangar-server.service.d/tls.conf",
		"hangar-backup.service": "hangar-backup.service", "hangar-backup.timer": "hangar-backup.timer"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), "ExecStart=/usr/local/bin/hangar ", "ExecStart="+self+" ")
		text = strings.ReplaceAll(text, "ExecStart=/usr/local/sbin/hangar-backup\n", "ExecStart="+self+"\n")
		if edit != nil {
			text = edit(text)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "hangar-server.service")
}

// TestUnitVerifies: systemd-analyze verify finds nothing to say about the units, the server's with
// its drop-in and the backup's service and timer (it exits 0 even on unknown keys and bad values,
// so any output is a failure), and it does complain about a broken copy, so the check is not blind.
func TestUnitVerifies(t *testing.T) {
	unit := installed(t, nil)
	for _, u := range []string{unit, filepath.Join(filepath.Dir(unit), "hangar-backup.service"), filepath.Join(filepath.Dir(unit), "hangar-backup.timer")} {
		if out, err := analyze(t, "verify", u); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("systemd-analyze verify %s: %v\n%s", filepath.Base(u), err, out)
		}
	}
	broken := installed(t, func(s string) string {
		s = strings.Replace(s, "ProtectSystem=strict", "ProtectSystem=strcit", 1)
		return strings.Replace(s, "\nEnvironment=HANGAR_TLS_CERT_FILE", "\nEnviroment=HANGAR_TLS_CERT_FILE", 1)
	})
	out, _ := analyze(t, "verify", broken)
	if !strings.Contains(out, "hangar-server.service:") || !strings.Contains(out, "strcit") || !strings.Contains(out, "tls.conf:") || !strings.Contains(out, "Enviroment") {
		t.Errorf("systemd-analyze verify does not report the broken copy's two mistakes:\n%s", out)
	}
}

// TestUnitIsHardened: systemd's own exposure score of the unit (0 best, 10 worst) stays at most
// 4.0, "OK" (3.6: it runs as root for template isolation, with nine capabilities); and the
// settings the guide promises are there.
func TestUnitIsHardened(t *testing.T) {
	unit := installed(t, nil)
	if out, err := analyze(t, "security", "--offline=yes", "--threshold=40", unit); err != nil {
		t.Errorf("systemd-analyze security: exposure above 4.0 (%v):\n%s", err, out)
	} else {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		t.Log(lines[len(lines)-1])
	}
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"StateDirectory=hangar", "ProtectSystem=strict", "NoNewPrivileges=yes", "ProtectHome=yes", "PrivateTmp=yes",
		"CapabilityBoundingSet=CAP_SYS_ADMIN CAP_SETUID CAP_SETGID CAP_CHOWN CAP_FOWNER CAP_DAC_OVERRIDE CAP_DAC_READ_SEARCH CAP_KILL CAP_NET_BIND_SERVICE\n",
		"RestrictNamespaces=mnt", "SystemCallFilter=@system-service @mount\n", "KillMode=mixed", "Environment=HANGAR_DATA_DIR=%S/hangar "} {
		if !strings.Contains(string(b), "\n"+want) {
			t.Errorf("the unit lacks %q", want)
		}
	}
}

// TestUnitLetsBuildUsersBeClaimed: ProtectSystem=strict leaves /run read-only, where the
// in-process provisioners claim their build users (sandbox.LockDir): the unit makes that directory
// its runtime directory, writable, and keeps it when the server stops (other daemons of the host
// hold their locks there). Without it the server refused to start with template isolation.
func TestUnitLetsBuildUsersBeClaimed(t *testing.T) {
	name, ok := strings.CutPrefix(sandbox.LockDir, "/run/")
	if !ok || strings.Contains(name, "/") {
		t.Fatalf("sandbox.LockDir %s is not a directory of /run: the unit's RuntimeDirectory cannot make it writable", sandbox.LockDir)
	}
	b, err := os.ReadFile(installed(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ProtectSystem=strict\n", "RuntimeDirectory=" + name + "\n", "RuntimeDirectoryPreserve=yes\n"} {
		if !strings.Contains(string(b), "\n"+want) {
			t.Errorf("the unit lacks %q: the build users' locks in %s could not be written", strings.TrimSpace(want), sandbox.LockDir)
		}
	}
}
