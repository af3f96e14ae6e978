// Package pgtest gives tests a fresh database on a real PostgreSQL server.
//
// NewDatabase uses the server named by HANGAR_TEST_POSTGRES_URL when that is set. Otherwise it
// starts (once, shared by every test binary of a `go test ./...` run, and kept running afterwards)
// a throwaway server of its own:
//
//   - directory: $HANGAR_PGTEST_DIR, else $TMPDIR/hangar-pgtest-<uid> (TMPDIR defaults to /tmp);
//     holding lock (flock), port, bindir, postgres.log, data/ and the unix socket;
//   - binaries: $HANGAR_PGTEST_BINDIR, else `pg_config --bindir`, else the highest
//     /usr/lib/postgresql/<version>/bin, else initdb on PATH;
//   - run as the postgres user (through runuser) when the tests run as root;
//   - listening on 127.0.0.1 on a free port, trust authentication, superuser "postgres",
//     fsync/full_page_writes/synchronous_commit off, max_connections=300.
//
// scripts/pgtest-stop stops that server.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// EnvURL names a superuser URL of an existing server to create the test databases on.
	EnvURL = "HANGAR_TEST_POSTGRES_URL"
	// EnvDir overrides the directory of the throwaway server.
	EnvDir = "HANGAR_PGTEST_DIR"
	// EnvBinDir overrides the directory holding initdb, pg_ctl and postgres.
	EnvBinDir = "HANGAR_PGTEST_BINDIR"

	dbPrefix = "hangar_test_"
)

const howToFix = `pgtest needs a PostgreSQL server. Either:
  - install the server binaries (Debian: apt-get install -y postgresql-15; pgtest finds them via
    pg_config --bindir or /usr/lib/postgresql/*/bin, or set ` + EnvBinDir + ` to the directory holding
    initdb, pg_ctl and postgres) and pgtest starts a throwaway server itself; as root it runs it as
    the "postgres" user, which the Debian package creates; or
  - set ` + EnvURL + ` to a superuser URL of a running server, e.g.
    postgres://postgres:secret@127.0.0.1:5432/postgres?sslmode=disable`

var (
	mu          sync.Mutex
	cachedAdmin string // admin URL of the throwaway server, once this process has made sure of it
)

// NewDatabase returns the connection URL (postgres://...) of a new, empty database on a real
// Postgres server, dropped when the test ends. It never skips: if no server can be had it fails the
// test with a message saying how to fix it.
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin, err := adminURL(t)
	if err != nil {
		t.Fatalf("pgtest: %v\n%s", err, howToFix)
	}
	name := dbPrefix + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	if err := adminExec(ctx, admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s on %s: %v\n%s", name, redact(admin), err, howToFix)
	}
	t.Logf("pgtest: created database %s in %v", name, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		err := adminExec(ctx, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		if err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// adminURL returns a superuser URL of the server to use.
func adminURL(t testing.TB) (string, error) {
	if u := os.Getenv(EnvURL); u != "" {
		if _, err := withDatabase(u, "postgres"); err != nil {
			return "", fmt.Errorf("%s: %w", EnvURL, err)
		}
		return u, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if cachedAdmin != "" {
		return cachedAdmin, nil
	}
	s, err := newServer()
	if err != nil {
		return "", err
	}
	u, err := s.ensure(t)
	if err != nil {
		return "", err
	}
	cachedAdmin = u
	return u, nil
}

func adminExec(ctx context.Context, admin, sql string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns u with its database (path) replaced by name.
func withDatabase(u, name string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("bad URL: %v", err)
	}
	if p.Scheme != "postgres" && p.Scheme != "postgresql" {
		return "", fmt.Errorf("URL %q: want a postgres:// URL", redact(u))
	}
	p.Path = "/" + name
	p.RawPath = ""
	return p.String(), nil
}

func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparseable URL)"
	}
	return p.Redacted()
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// server is the throwaway server shared by the test binaries of one user on this machine.
type server struct {
	base   string
	data   string
	asRoot bool // run the PostgreSQL programs as the postgres user through runuser
}

func newServer() (*server, error) {
	base := os.Getenv(EnvDir)
	if base == "" {
		base = filepath.Join(os.TempDir(), fmt.Sprintf("hangar-pgtest-%d", os.Getuid()))
	}
	base, err := filepath.Abs(base)
	if err != nil {
		return nil, err
	}
	return &server{base: base, data: filepath.Join(base, "data"), asRoot: os.Geteuid() == 0}, nil
}

func (s *server) adminURL(port int) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
}

// ensure makes sure the server runs and returns its admin URL. It holds the directory's lock
// throughout, so concurrent test binaries start one server between them.
func (s *server) ensure(t testing.TB) (string, error) {
	if err := s.prepareBase(); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(s.base, "lock"), 5*time.Minute)
	if err != nil {
		return "", err
	}
	defer unlock()

	if u, ok := s.probe(); ok {
		return u, nil
	}

	start := time.Now()
	bindir, err := findBinDir()
	if err != nil {
		return "", err
	}
	if err := s.stopStale(bindir); err != nil {
		return "", err
	}
	if err := s.initdb(bindir); err != nil {
		return "", err
	}
	initDone := time.Now()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return "", err
		}
		if lastErr = s.start(bindir, port); lastErr != nil {
			continue
		}
		u := s.adminURL(port)
		if err := s.ping(u); err != nil {
			lastErr = fmt.Errorf("server started on port %d but does not answer: %v", port, err)
			_ = s.pgctl(bindir, "stop", "-D", s.data, "-m", "immediate", "-w")
			continue
		}
		if err := os.WriteFile(filepath.Join(s.base, "bindir"), []byte(bindir+"\n"), 0o644); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(s.base, "port"), []byte(strconv.Itoa(port)+"\n"), 0o644); err != nil {
			return "", err
		}
		t.Logf("pgtest: started PostgreSQL (%s) in %s on 127.0.0.1:%d (initdb %v, start %v)",
			bindir, s.base, port, initDone.Sub(start).Round(time.Millisecond), time.Since(initDone).Round(time.Millisecond))
		return u, nil
	}
	return "", fmt.Errorf("start PostgreSQL in %s: %v", s.data, lastErr)
}

// prepareBase creates the base directory, owned by the postgres user when running as root.
func (s *server) prepareBase() error {
	if err := os.MkdirAll(s.base, 0o700); err != nil {
		return fmt.Errorf("create %s: %v", s.base, err)
	}
	fi, err := os.Lstat(s.base)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", s.base)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if s.asRoot {
		uid, gid, err := postgresUser()
		if err != nil {
			return err
		}
		if st == nil || int(st.Uid) != uid {
			if err := os.Chown(s.base, uid, gid); err != nil {
				return fmt.Errorf("chown %s to postgres: %v", s.base, err)
			}
		}
	} else if st != nil && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s belongs to uid %d, not to this user (%d): remove it or set %s", s.base, st.Uid, os.Getuid(), EnvDir)
	}
	return nil
}

func postgresUser() (uid, gid int, err error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return 0, 0, fmt.Errorf("running as root, so the server must run as the \"postgres\" user, but: %v", err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, nil
}

// probe reports whether the server recorded in the port file is ours and running.
func (s *server) probe() (string, bool) {
	b, err := os.ReadFile(filepath.Join(s.base, "port"))
	if err != nil {
		return "", false
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return "", false
	}
	u := s.adminURL(port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.ping(u)
		if err == nil {
			return u, true
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "53300" { // too many connections: it is up
			return u, true
		}
		// Wait only while our postmaster lives (starting up, or briefly overloaded).
		if s.postmasterPID() == 0 || time.Now().After(deadline) {
			return "", false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ping connects and checks that the server is ours (its data directory is s.data).
func (s *server) ping(u string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var dir string
	if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&dir); err != nil {
		return err
	}
	if filepath.Clean(dir) != s.data {
		return fmt.Errorf("the server there serves %s, not %s", dir, s.data)
	}
	return nil
}

// postmasterPID returns the pid in data/postmaster.pid if that process is a live postgres, else 0.
func (s *server) postmasterPID() int {
	b, err := os.ReadFile(filepath.Join(s.data, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil { // gone (a stale pid file)
		return 0
	}
	if c := strings.TrimSpace(string(comm)); c != "postgres" && c != "postmaster" {
		return 0
	}
	return pid
}

// stopStale stops a postmaster of ours that does not answer and removes the old data directory.
func (s *server) stopStale(bindir string) error {
	if pid := s.postmasterPID(); pid != 0 {
		if err := s.pgctl(bindir, "stop", "-D", s.data, "-m", "immediate", "-w", "-t", "30"); err != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			time.Sleep(500 * time.Millisecond)
		}
	}
	for _, p := range []string{"port", "postgres.log"} {
		if err := os.Remove(filepath.Join(s.base, p)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	if err := os.RemoveAll(s.data); err != nil {
		return fmt.Errorf("remove old %s: %v", s.data, err)
	}
	return nil
}

const serverConf = `
# added by hangar's pgtest: a throwaway server for tests
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
fsync = off
full_page_writes = off
synchronous_commit = off
max_connections = 300
log_min_messages = warning
log_checkpoints = off
`

func (s *server) initdb(bindir string) error {
	if err := s.run(filepath.Join(bindir, "initdb"), "-D", s.data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "-N"); err != nil {
		return fmt.Errorf("initdb: %v", err)
	}
	f, err := os.OpenFile(filepath.Join(s.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, serverConf, strings.ReplaceAll(s.base, "'", "''")); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (s *server) start(bindir string, port int) error {
	err := s.pgctl(bindir, "start", "-D", s.data, "-l", filepath.Join(s.base, "postgres.log"),
		"-w", "-t", "120", "-s", "-o", "-p "+strconv.Itoa(port))
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.base, "postgres.log"))
		if len(log) > 4000 {
			log = log[len(log)-4000:]
		}
		return fmt.Errorf("pg_ctl start on port %d: %v\npostgres.log:\n%s", port, err, log)
	}
	return nil
}

func (s *server) pgctl(bindir string, args ...string) error {
	return s.run(filepath.Join(bindir, "pg_ctl"), args...)
}

// run runs a PostgreSQL program (as the postgres user when root), in its own session, with its
// output in a file: a server it starts must hold neither the test's terminal nor its pipes.
func (s *server) run(prog string, args ...string) error {
	name, argv := prog, args
	if s.asRoot {
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			return fmt.Errorf("running as root needs runuser (util-linux) to run %s as postgres: %v", filepath.Base(prog), err)
		}
		name, argv = runuser, append([]string{"-u", "postgres", "--", prog}, args...)
	}
	out, err := os.CreateTemp("", "hangar-pgtest-out-*")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := exec.Command(name, argv...)
	cmd.Dir = s.base
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Run()
	if err != nil {
		b, _ := os.ReadFile(out.Name())
		return fmt.Errorf("%s %s: %v\n%s", filepath.Base(prog), strings.Join(args, " "), err, bytes.TrimSpace(b))
	}
	return nil
}

// findBinDir finds a directory holding initdb, pg_ctl and postgres.
func findBinDir() (string, error) {
	ok := func(dir string) bool {
		for _, p := range []string{"initdb", "pg_ctl", "postgres"} {
			fi, err := os.Stat(filepath.Join(dir, p))
			if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv(EnvBinDir); dir != "" {
		if !ok(dir) {
			return "", fmt.Errorf("%s=%s does not hold initdb, pg_ctl and postgres", EnvBinDir, dir)
		}
		return dir, nil
	}
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.Command(pgConfig, "--bindir").Output(); err == nil {
			if dir := strings.TrimSpace(string(out)); ok(dir) {
				return dir, nil
			}
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, dir := range dirs {
		if ok(dir) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && ok(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl, postgres) found via " + EnvBinDir +
		", pg_config --bindir, /usr/lib/postgresql/*/bin or PATH")
}

// versionOf returns the version number in /usr/lib/postgresql/<version>/bin.
func versionOf(dir string) float64 {
	v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
	if err != nil {
		return -1
	}
	return v
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lockFile takes an exclusive flock on path, waiting at most timeout.
func lockFile(path string, timeout time.Duration) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %v", path, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, fmt.Errorf("lock %s: %v", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("lock %s: still held by another process after %v", path, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
