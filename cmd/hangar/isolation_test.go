package main_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testutil/pgtest"
)

// The template-isolation test (docs/architecture.md, "Template isolation"): the built hangar binary
// runs `hangar server` with its in-process provisioners and the real terraform; a template tries,
// with local-exec and with terraform's own file functions, to read the admin token, the database,
// the server's environment (a secret set in it) and the directory of another build running at the
// same moment. With isolation (the default, as root) every attempt fails, and the build log says
// so; with --insecure-no-template-isolation the same template reads the token and the other build
// (so the probes do work), while the environment stays scrubbed.

// isolationServer is a `hangar server` process.
type isolationServer struct {
	t       *testing.T
	bin     string
	dataDir string
	url     string
	token   string
	pid     int
	// configFile is the server's --config file (readable by everyone, as an operator might leave
	// it), holding configSecret in a comment: templates must not read it.
	configFile, configSecret string
}

const isolationLimit = 3 * time.Minute

func startIsolationServer(t *testing.T, bin, secret string, extraEnv []string, args ...string) *isolationServer {
	t.Helper()
	if _, err := exec.LookPath("terraform"); err != nil {
		t.Fatalf("this test runs the real terraform, which is not on PATH: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("this test runs `hangar server` with template isolation, which needs root (CI runs as root); it runs as user %d", os.Geteuid())
	}
	// The data directory outside /tmp (as by default, ~/.local/share/hangar): a build has a private
	// /tmp anyway, so under it the test would not show that the data directory itself is hidden.
	s := &isolationServer{t: t, bin: bin, dataDir: filepath.Join(sharedDir(t), "data")}
	// Outside /tmp, which every build gets a private one of anyway.
	s.configFile, s.configSecret = filepath.Join(sharedDir(t), "server.yaml"), randomSecret(t, "config-secret-")
	if err := os.WriteFile(s.configFile, []byte("# database password: "+s.configSecret+"\nlog-level: info\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args = append([]string{"--config", s.configFile}, args...)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, append([]string{"server", "--data-dir", s.dataDir, "--listen", "127.0.0.1:0",
		"--provisioners", "2", "--lifecycle-interval", "0", "--prebuild-interval", "0"}, args...)...)
	cmd.Env = append(append(os.Environ(), "ISOLATION_TEST_SECRET="+secret), extraEnv...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", stderr.String())
		}
	})
	s.pid = cmd.Process.Pid
	listening := regexp.MustCompile(`listening on (\S+)`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case s.url = <-found:
	case <-time.After(isolationLimit):
		t.Fatalf("the server did not start:\n%s", stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(s.dataDir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	s.token = strings.TrimSpace(string(b))
	return s
}

// hangar runs the CLI as the admin and returns its output; it fails the test on failure.
func (s *isolationServer) hangar(args ...string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), isolationLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Env = append(os.Environ(), "HANGAR_URL="+s.url, "HANGAR_TOKEN="+s.token, "HOME="+s.t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("hangar %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// push pushes main.tf as the template name.
func (s *isolationServer) push(name, mainTF string) {
	s.t.Helper()
	dir := s.t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(mainTF), 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.hangar("templates", "push", name, "--directory", dir)
}

// victimTF writes a secret into its module directory and waits (at most two minutes) for the test
// to release it, so that its work directory exists while the attacker's build runs.
const victimTF = `variable "start_count" {
  type = number
}

resource "terraform_data" "victim" {
  count = var.start_count
  provisioner "local-exec" {
    command = "echo %s > victim.txt; i=0; while [ ! -e release ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done"
  }
}
`

// attackerTF tries to read what no template may: DATA is the data directory, PID the server's
// process, VICTIM the other build's work directory.
const attackerTF = `variable "start_count" {
  type = number
}

locals {
  data   = "DATA"
  victim = "VICTIM"
}

resource "terraform_data" "probe" {
  count = var.start_count
  provisioner "local-exec" {
    command = <<-EOT
      echo "probe user: $(id -u)"
      echo "probe token: $(cat ${local.data}/admin-token 2>&1)"
      echo "probe database: $(head -c 15 ${local.data}/hangar.db 2>&1)"
      echo "probe data dir: $(ls -A ${local.data} 2>&1 | tr '\n' ' ')"
      echo "probe server environment: $(cat /proc/PID/environ 2>&1 | tr '\0' '\n' | grep -e SECRET -e 'Permission denied' | tr '\n' ' ')"
      echo "probe own environment: $(env | grep -c ISOLATION_TEST) variables"
      echo "probe other build: $(cat ${local.victim}/module/victim.txt 2>&1)"
      echo "probe config file: $(cat CONFIGFILE 2>&1)"
    EOT
  }
}

output "token_file" {
  value = try(file("${local.data}/admin-token"), "unreadable")
}

output "database_exists" {
  value = fileexists("${local.data}/hangar.db")
}

output "other_build" {
  value = try(file("${local.victim}/module/victim.txt"), "unreadable")
}
`

// attack runs the victim and, while it runs, the attacker; it returns the attacker's build log.
func (s *isolationServer) attack(victimSecret string) (log, victimDir string) {
	s.t.Helper()
	s.push("victim", fmt.Sprintf(victimTF, victimSecret))
	s.hangar("create", "victim", "--template", "victim")
	// The victim's work directory, once its secret is written.
	deadline := time.After(isolationLimit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for victimDir == "" {
		m, _ := filepath.Glob(filepath.Join(s.dataDir, "provisioner", "*", "*", "module", "victim.txt"))
		if len(m) == 1 {
			victimDir = filepath.Dir(filepath.Dir(m[0]))
			break
		}
		select {
		case <-deadline:
			s.t.Fatalf("the victim's build never wrote its secret:\n%s", s.hangar("logs", "victim"))
		case <-tick.C:
		}
	}
	defer func() {
		// Release the victim: its build ends (or the server's shutdown interrupts it).
		if err := os.WriteFile(filepath.Join(victimDir, "module", "release"), nil, 0o644); err != nil {
			s.t.Error(err)
		}
	}()
	tf := strings.NewReplacer("DATA", s.dataDir, "VICTIM", victimDir, "PID", strconv.Itoa(s.pid), "CONFIGFILE", s.configFile).Replace(attackerTF)
	s.push("attacker", tf)
	s.hangar("create", "attacker", "--template", "attacker", "--wait")
	return s.hangar("logs", "attacker"), victimDir
}

func randomSecret(t *testing.T, prefix string) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

func mustContain(t *testing.T, log string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(log, w) {
			t.Errorf("the attacker's build log lacks %q:\n%s", w, log)
		}
	}
}

func mustNotContain(t *testing.T, log string, what map[string]string) {
	t.Helper()
	for name, secret := range what {
		if strings.Contains(log, secret) {
			t.Errorf("the attacker's build log shows %s (%q):\n%s", name, secret, log)
		}
	}
}

// TestTemplateIsolation: with isolation on (the default), a template reads none of the admin
// token, the database, the server's environment and another build's directory, on either store.
func TestTemplateIsolation(t *testing.T) {
	bin := buildHangar(t)
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			secret, victimSecret := randomSecret(t, "env-secret-"), randomSecret(t, "victim-secret-")
			var args, env []string
			pgURL := ""
			if store == "postgres" {
				pgURL = pgtest.NewDatabase(t)
				env = append(env, "HANGAR_POSTGRES_URL="+pgURL)
			}
			s := startIsolationServer(t, bin, secret, env, args...)
			log, _ := s.attack(victimSecret)

			hidden := map[string]string{"the admin token": s.token, "the server's secret variable": secret, "the other build's secret": victimSecret,
				"the server's config file": s.configSecret}
			if pgURL != "" {
				hidden["the Postgres URL"] = pgURL
			}
			mustNotContain(t, log, hidden)
			// What the user sees: each attempt failed, and why.
			mustContain(t, log,
				"probe user: 200000000", // an unprivileged build user (2000000000 or 2000000001), not root
				"probe token: cat: "+s.dataDir+"/admin-token: No such file or directory",
				"probe database: head: cannot open '"+s.dataDir+"/hangar.db' for reading: No such file or directory",
				"probe server environment: cat: /proc/"+strconv.Itoa(s.pid)+"/environ: Permission denied",
				"probe own environment: 0 variables",
				"probe other build: cat: ",
				"probe config file: ",
				`token_file = "unreadable"`,
				`database_exists = false`,
				`other_build = "unreadable"`,
			)
			// Of the data directory, only the way to the build's own directory is there.
			if !regexp.MustCompile(`(?m)probe data dir: provisioner\s*$`).MatchString(log) {
				t.Errorf("the attacker sees more of the data directory than the way to its own build:\n%s", log)
			}
			if strings.Contains(log, "SQLite format") {
				t.Errorf("the attacker read the database:\n%s", log)
			}
		})
	}
}

// TestTemplateIsolationControl: the same template on a server run with
// --insecure-no-template-isolation reads the token and the other build (the probes work, so the
// test above can fail), while the environment is still scrubbed (in every mode).
func TestTemplateIsolationControl(t *testing.T) {
	bin := buildHangar(t)
	secret, victimSecret := randomSecret(t, "env-secret-"), randomSecret(t, "victim-secret-")
	s := startIsolationServer(t, bin, secret, nil, "--insecure-no-template-isolation")
	log, _ := s.attack(victimSecret)
	mustContain(t, log,
		"probe user: 0",
		"probe token: "+s.token,
		"probe database: SQLite format 3",
		`database_exists = true`,
		"probe other build: "+victimSecret,
		"probe config file: # database password: "+s.configSecret,
		"probe own environment: 0 variables",
	)
	if strings.Contains(log, `other_build = "unreadable"`) || strings.Contains(log, `token_file = "unreadable"`) {
		t.Errorf("without isolation, file() could not read the token or the other build:\n%s", log)
	}
}

// TestTemplateIsolationRefusedWithoutRoot: a server that cannot isolate templates (not root)
// refuses to start its in-process provisioners and says why and what to do; with
// --insecure-no-template-isolation it starts and warns of the risk at start.
func TestTemplateIsolationRefusedWithoutRoot(t *testing.T) {
	bin := buildHangar(t)
	if os.Geteuid() != 0 {
		t.Fatalf("this test switches to an unprivileged user, which needs root (CI runs as root)")
	}
	const nobody = 65534
	// A data directory and the binary the unprivileged user can reach.
	dir, err := os.MkdirTemp("", "hangar-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(insecure bool) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), isolationLimit)
		defer cancel()
		args := []string{"server", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--provisioners", "1"}
		if insecure {
			args = append(args, "--insecure-no-template-isolation")
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if !insecure {
			err := cmd.Run()
			return out.String(), err
		}
		// Started: stop it once its provisioner is ready.
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = pw
		// Standard output in a buffer of its own: exec copies it from another goroutine, while this
		// one writes the log lines it reads (two writers of one strings.Builder lost lines).
		var stdout strings.Builder
		cmd.Stdout = &stdout
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "provisioner ready") {
				break
			}
		}
		cancel()
		err = cmd.Wait()
		return stdout.String() + out.String(), err
	}
	out, err := run(false)
	if err == nil {
		t.Fatalf("a server that cannot isolate templates started its provisioners:\n%s", out)
	}
	for _, want := range []string{"in-process provisioners:", "needs root; this process runs as user 65534", "--insecure-no-template-isolation", "--provisioners 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, out)
		}
	}
	out, _ = run(true)
	for _, want := range []string{"template isolation is OFF", "can read everything it can", "provisioner ready"} {
		if !strings.Contains(out, want) {
			t.Errorf("the insecure server's log lacks %q:\n%s", want, out)
		}
	}
}

// standaloneTF tries to read what `hangar provisioner` holds: its token file (TOKEN), its work
// directory (WORK) and its environment.
const standaloneTF = `variable "start_count" {
  type = number
}

resource "terraform_data" "probe" {
  count = var.start_count
  provisioner "local-exec" {
    command = <<-EOT
      echo "probe user: $(id -u)"
      echo "probe provisioner token: $(cat TOKEN 2>&1)"
      echo "probe work dir: $(ls -A WORK 2>&1 | tr '\n' ' ')"
      echo "probe own environment: $(env | grep -c ISOLATION_TEST) variables"
    EOT
  }
}
`

// TestTemplateIsolationStandalone: `hangar provisioner` (as root, isolated by default) runs a
// template that cannot read its token file, its work directory's other contents (the plugin
// mirror, kept states) or its environment.
func TestTemplateIsolationStandalone(t *testing.T) {
	bin := buildHangar(t)
	secret := randomSecret(t, "env-secret-")
	s := startIsolationServer(t, bin, secret, nil, "--provisioners", "0")
	m := regexp.MustCompile(`Token \(shown only once\): (\S+)`).FindStringSubmatch(s.hangar("provisioners", "create", "p1"))
	if m == nil {
		t.Fatal("provisioners create printed no token")
	}
	dir := t.TempDir()
	tokenFile, workDir := filepath.Join(dir, "p1.token"), filepath.Join(dir, "work")
	if err := os.WriteFile(tokenFile, []byte(m[1]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	prov := exec.CommandContext(ctx, bin, "provisioner", "--server", s.url, "--token-file", tokenFile, "--work-dir", workDir, "--identity", "p1")
	prov.Env = append(os.Environ(), "ISOLATION_TEST_SECRET="+secret)
	prov.Cancel = func() error { return prov.Process.Signal(syscall.SIGTERM) }
	var provLog strings.Builder
	prov.Stdout, prov.Stderr = &provLog, &provLog
	if err := prov.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = prov.Wait()
		if t.Failed() {
			t.Logf("provisioner log:\n%s", provLog.String())
		}
	})
	s.push("probe", strings.NewReplacer("TOKEN", tokenFile, "WORK", workDir).Replace(standaloneTF))
	s.hangar("create", "p", "--template", "probe", "--wait")
	log := s.hangar("logs", "p")
	mustNotContain(t, log, map[string]string{"the provisioner's token": m[1], "the provisioner's secret variable": secret})
	mustContain(t, log,
		"probe user: 20000001", // 2000000100, or the next free uid when another daemon of the host has it
		"probe provisioner token: cat: "+tokenFile+": No such file or directory",
		"probe own environment: 0 variables",
	)
	// Of the work directory, only this build's own directory is there (not .plugins, .unreported).
	if !regexp.MustCompile(`(?m)probe work dir: [0-9a-f-]{36}\s*$`).MatchString(log) {
		t.Errorf("the template sees more of the work directory than its own build:\n%s", log)
	}
}
