// Package loadcmd is `hangar load` (hidden): it starts `hangar server` replicas on loopback (on
// SQLite, or sharing a Postgres database it starts in a temporary directory unless given one),
// seeds a fleet of agents and workspaces, and puts them under load with internal/loadgen. Bounded:
// it stops after --warmup + --duration, and removes what it started. docs/benchmarks.md, "Load:
// 1,000 agents × 100 workspaces", records its figures.
package loadcmd

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/cmdopt"
	"github.com/hangar-dev/hangar/internal/loadgen"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/store/sqlite"
	"github.com/hangar-dev/hangar/internal/store/sqlstore"
)

// Config is the command's options, as given.
type Config struct {
	Store, Replicas, Agents, Workspaces, Interval, UserChanges, Warmup, Duration string
	PostgresURL, PostgresParams, PostgresMaxConns, ServerBinary, LogLevel        string
}

// Command returns `hangar load`.
func Command() *cobra.Command {
	var cfg Config
	opts := []cmdopt.Option{
		cmdopt.String(&cfg.Store, "store", "HANGAR_LOAD_STORE", "sqlite", "sqlite or postgres").Arg("STORE"),
		cmdopt.String(&cfg.Replicas, "replicas", "HANGAR_LOAD_REPLICAS", "", "server replicas (default: 1 on sqlite, 2 on postgres, sharing the database)").Arg("N"),
		cmdopt.Int(&cfg.Agents, "agents", "HANGAR_LOAD_AGENTS", "1000", "agents"),
		cmdopt.Int(&cfg.Workspaces, "workspaces", "HANGAR_LOAD_WORKSPACES", "100", "workspaces per agent"),
		cmdopt.Duration(&cfg.Interval, "interval", "HANGAR_LOAD_INTERVAL", "10s", "each agent's period between partial reconciles"),
		cmdopt.Int(&cfg.UserChanges, "user-changes", "HANGAR_LOAD_USER_CHANGES", "10", "desired-state changes by users per second"),
		cmdopt.Duration(&cfg.Warmup, "warmup", "HANGAR_LOAD_WARMUP", "20s", "load before measuring"),
		cmdopt.Duration(&cfg.Duration, "duration", "HANGAR_LOAD_DURATION", "60s", "measured load after the warmup (at most 10m)"),
		cmdopt.String(&cfg.PostgresURL, "postgres-url", "HANGAR_LOAD_POSTGRES_URL", "", "a superuser URL of a Postgres server on loopback to create the run's database on (default: start one in a temporary directory, as the tests do: fsync off)"),
		cmdopt.String(&cfg.PostgresParams, "postgres-params", "HANGAR_LOAD_POSTGRES_PARAMS", "", "connection parameters added to the servers' database URL, such as default_query_exec_mode=exec to compare pgx's statement modes").Arg("PARAMS"),
		cmdopt.String(&cfg.PostgresMaxConns, "postgres-max-conns", "HANGAR_LOAD_POSTGRES_MAX_CONNS", "", "passed to each server as --postgres-max-conns (default: the server's default)").Arg("N"),
		cmdopt.String(&cfg.ServerBinary, "server-binary", "HANGAR_LOAD_SERVER_BINARY", "", "the hangar binary to run the servers with, e.g. an older build as a baseline (default: this one)").Arg("PATH"),
		cmdopt.String(&cfg.LogLevel, "server-log-level", "HANGAR_LOAD_SERVER_LOG_LEVEL", "warn", "the servers' --log-level (their logs go to server-<n>.log in the run's directory)").Arg("LEVEL"),
	}
	cmd := &cobra.Command{
		Use:    "load",
		Short:  "Put Hangar servers on loopback under the load of many agents and users, and report latencies and CPU",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Run(ctx, cfg, cmd.OutOrStdout())
		},
	}
	cmdopt.Register(cmd, opts)
	cmd.AddCommand(faultsCommand(), simAgentCommand()) // the fault harness (faults.go)
	return cmd
}

// Run runs one load and prints its report on out.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	if cfg.Store != "sqlite" && cfg.Store != "postgres" {
		return fmt.Errorf("--store: want sqlite or postgres, got %q", cfg.Store)
	}
	replicas := 1
	if cfg.Store == "postgres" {
		replicas = 2
	}
	if cfg.Replicas != "" {
		n, err := strconv.Atoi(cfg.Replicas)
		if err != nil || n < 1 || n > 8 || (n > 1 && cfg.Store == "sqlite") {
			return fmt.Errorf("--replicas: want 1 on sqlite, 1 to 8 on postgres, got %q", cfg.Replicas)
		}
		replicas = n
	}
	var agents, per int
	for _, o := range []struct {
		flag, v string
		to      *int
		lo, hi  int
	}{{"agents", cfg.Agents, &agents, 1, 10000}, {"workspaces", cfg.Workspaces, &per, 1, 10000}} {
		n, err := strconv.Atoi(o.v)
		if err != nil || n < o.lo || n > o.hi {
			return fmt.Errorf("--%s: want a whole number from %d to %d, got %q", o.flag, o.lo, o.hi, o.v)
		}
		*o.to = n
	}
	userChanges, err := strconv.ParseFloat(cfg.UserChanges, 64)
	if err != nil || userChanges < 0 || userChanges > 10000 {
		return fmt.Errorf("--user-changes: want a rate from 0 to 10000 a second, got %q", cfg.UserChanges)
	}
	durations := map[string]time.Duration{}
	for _, o := range []struct{ flag, v string }{{"interval", cfg.Interval}, {"warmup", cfg.Warmup}, {"duration", cfg.Duration}} {
		d, err := time.ParseDuration(o.v)
		if err != nil || d < 0 || d > 10*time.Minute || (o.flag != "warmup" && d == 0) {
			return fmt.Errorf("--%s: want a duration up to 10m (like 10s), got %q", o.flag, o.v)
		}
		durations[o.flag] = d
	}
	bin := cfg.ServerBinary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("find the hangar executable: %w", err)
		}
	}

	dir, err := os.MkdirTemp("", "hangar-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(out, "run directory: %s\n", dir)
	var processes []loadgen.Process
	var dbURL, serverURL string
	if cfg.Store == "postgres" {
		admin := cfg.PostgresURL
		if admin == "" {
			pg, err := startPostgres(ctx, filepath.Join(dir, "pg"))
			if err != nil {
				return err
			}
			defer pg.stop()
			admin = pg.url
			processes = append(processes, loadgen.Process{Name: "postgres", CPU: loadgen.ProcTreeCPU(pg.pid)})
		} else if err := loopback(admin); err != nil {
			return err
		}
		name := "hangar_load_" + strconv.FormatInt(time.Now().UnixNano(), 36)
		if dbURL, err = createDatabase(ctx, admin, name); err != nil {
			return err
		}
		serverURL = dbURL
		if cfg.PostgresParams != "" {
			extra, err := neturl.ParseQuery(cfg.PostgresParams)
			if err != nil {
				return fmt.Errorf("--postgres-params: %w", err)
			}
			u, _ := neturl.Parse(dbURL)
			q := u.Query()
			for k, vs := range extra {
				q[k] = vs
			}
			u.RawQuery = q.Encode()
			serverURL = u.String()
		}
		defer dropDatabase(admin, name)
	}

	var servers []string
	var replicaProcs []loadgen.Process
	for i := 0; i < replicas; i++ {
		srv, err := startServer(ctx, bin, filepath.Join(dir, fmt.Sprintf("server-%d", i)), serverURL, cfg.PostgresMaxConns, cfg.LogLevel)
		if err != nil {
			return err
		}
		defer srv.stop()
		servers = append(servers, srv.url)
		replicaProcs = append(replicaProcs, loadgen.Process{Name: fmt.Sprintf("replica-%d", i), CPU: loadgen.ProcCPU(srv.cmd.Process.Pid)})
	}
	processes = append(replicaProcs, processes...)
	token, err := os.ReadFile(filepath.Join(dir, "server-0", "admin-token"))
	if err != nil {
		return fmt.Errorf("read the admin token: %w", err)
	}

	// The seeder is this process's own store on the servers' database (SQLite: the first server's
	// file, which WAL mode lets two processes share).
	var seeder *sqlstore.Store
	if dbURL != "" {
		seeder, err = postgres.OpenPool(ctx, dbURL, postgres.Pool{MaxConns: 2})
	} else {
		seeder, err = sqlite.Open(ctx, filepath.Join(dir, "server-0", "hangar.db"))
	}
	if err != nil {
		return fmt.Errorf("open the store to seed it: %w", err)
	}
	defer seeder.Close()

	var counters []loadgen.Counter
	if dbURL != "" {
		// Every session a server opens costs a backend process, authentication, and cold caches
		// (catalog, prepared statements): the pool should open none once warm.
		counters = append(counters, loadgen.Counter{Name: "database sessions opened", Read: func(ctx context.Context) (int64, error) {
			var n int64
			err := seeder.DB().QueryRowContext(ctx, `SELECT sessions FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
			return n, err
		}})
	}
	fmt.Fprintf(out, "store: %s, %d replica(s), %d agents × %d workspaces, a partial reconcile every %v each, %g user changes/s\n",
		cfg.Store, replicas, agents, per, durations["interval"], userChanges)
	rep, err := loadgen.Run(ctx, loadgen.Config{
		Servers: servers, AdminToken: strings.TrimSpace(string(token)), Seeder: seeder,
		Agents: agents, WorkspacesPerAgent: per, Interval: durations["interval"], UserChangesPerSecond: userChanges,
		Warmup: durations["warmup"], Duration: durations["duration"], Processes: processes, Counters: counters, Log: out,
	})
	if err != nil {
		return err
	}
	fmt.Fprint(out, rep.String())
	return nil
}

// loopback refuses a database URL whose host is not a loopback address or a unix socket: the load
// stays on this machine.
func loopback(raw string) error {
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return fmt.Errorf("--postgres-url: %w", err)
	}
	host := cfg.Host
	if strings.HasPrefix(host, "/") || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--postgres-url: %s is not on loopback; the load runs on this machine only", host)
}

func createDatabase(ctx context.Context, admin, name string) (string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := neturl.Parse(admin)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

func dropDatabase(admin, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

// server is a `hangar server` child process.
type server struct {
	url    string
	cmd    *exec.Cmd
	exited chan struct{} // closed when it has exited
}

func startServer(ctx context.Context, bin, dataDir, dbURL, maxConns, logLevel string) (*server, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"server", "--listen", addr, "--data-dir", dataDir, "--provisioners", "0", "--log-level", logLevel}
	if dbURL != "" {
		args = append(args, "--postgres-url", dbURL)
		if maxConns != "" {
			args = append(args, "--postgres-max-conns", maxConns)
		}
	}
	logFile, err := os.Create(dataDir + ".log")
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = cleanEnv()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s server: %w", bin, err)
	}
	s := &server{url: "http://" + addr, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("server %s exited before it was ready (%v); see %s.log", dataDir, cmd.ProcessState, dataDir)
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("server %s not ready after a minute; see %s.log", dataDir, dataDir)
		}
	}
}

// stop ends the server (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// cleanEnv is this process's environment without the servers' own HANGAR_ options, so that only
// the flags given here configure them.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HANGAR_") {
			env = append(env, kv)
		}
	}
	return env
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
