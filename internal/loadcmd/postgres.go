package loadcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// throwaway is a PostgreSQL server of the run's own, in a temporary directory, listening on
// loopback and a unix socket there, configured as the tests' (internal/testutil/pgtest: fsync,
// full_page_writes and synchronous_commit off), so that the figures compare with the benchmarks'.
// It is not the tests' shared server: other people's tests would load it, and it theirs.
type throwaway struct {
	url    string
	pid    int // the postmaster's
	bindir string
	dir    string
	asRoot bool
}

const throwawayConf = `
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
fsync = off
full_page_writes = off
synchronous_commit = off
max_connections = 300
log_min_messages = warning
`

func startPostgres(ctx context.Context, dir string) (*throwaway, error) {
	return startPostgresWith(ctx, dir, "")
}

// durableConf, appended to throwawayConf (later lines win), makes the throwaway as durable as
// PostgreSQL's defaults: the fault harness restarts it in immediate mode, and with
// synchronous_commit off a commit acknowledged to the client may not survive that (PostgreSQL's
// documented trade-off: up to three times wal_writer_delay of commits lost on a crash).
const durableConf = `
fsync = on
full_page_writes = on
synchronous_commit = on
`

// startPostgresWith is startPostgres with extra lines of configuration.
func startPostgresWith(ctx context.Context, dir, extraConf string) (*throwaway, error) {
	bindir, err := pgBinDir()
	if err != nil {
		return nil, err
	}
	pg := &throwaway{bindir: bindir, dir: dir, asRoot: os.Geteuid() == 0}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if pg.asRoot {
		// PostgreSQL refuses to run as root: its files and process belong to the postgres user.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, the database must run as the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, d := range []string{filepath.Dir(dir), dir} {
			if err := os.Chown(d, uid, gid); err != nil {
				return nil, err
			}
		}
	}
	data := filepath.Join(dir, "data")
	if err := pg.run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "-N"); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(throwawayConf, port, strings.ReplaceAll(dir, "'", "''")) + extraConf
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(conf)
	if err := errors.Join(err, f.Close()); err != nil {
		return nil, err
	}
	if err := pg.run("pg_ctl", "start", "-D", data, "-l", filepath.Join(dir, "postgres.log"), "-w", "-t", "60", "-s"); err != nil {
		return nil, err
	}
	pg.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err == nil {
		pg.pid, err = strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	}
	if err != nil {
		pg.stop()
		return nil, fmt.Errorf("read the postmaster's pid: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, pg.url)
	if err != nil {
		pg.stop()
		return nil, fmt.Errorf("connect to the run's postgres: %w", err)
	}
	var version string
	_ = conn.QueryRow(cctx, "SHOW server_version").Scan(&version)
	conn.Close(context.Background())
	fmt.Fprintf(os.Stderr, "started PostgreSQL %s (%s) on 127.0.0.1:%d in %s\n", version, bindir, port, dir)
	return pg, nil
}

func (pg *throwaway) stop() {
	_ = pg.run("pg_ctl", "stop", "-D", filepath.Join(pg.dir, "data"), "-m", "fast", "-w", "-t", "60", "-s")
}

// run runs a PostgreSQL program, as the postgres user when root.
func (pg *throwaway) run(prog string, args ...string) error {
	name, argv := filepath.Join(pg.bindir, prog), args
	if pg.asRoot {
		name, argv = "runuser", append([]string{"-u", "postgres", "--", name}, args...)
	}
	cmd := exec.Command(name, argv...)
	cmd.Dir = pg.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", prog, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// pgBinDir finds initdb, pg_ctl and postgres: `pg_config --bindir`, else the highest
// /usr/lib/postgresql/<version>/bin.
func pgBinDir() (string, error) {
	ok := func(dir string) bool {
		for _, p := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, p)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); ok(dir) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
		return v
	}
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, dir := range dirs {
		if ok(dir) {
			return dir, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl, postgres) in `pg_config --bindir` or /usr/lib/postgresql/*/bin: install postgresql-15, or pass --postgres-url")
}
