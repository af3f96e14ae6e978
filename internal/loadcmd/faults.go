package loadcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hangar-dev/hangar/internal/loadgen"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/build"
	"github.com/hangar-dev/hangar/internal/cmdopt"
	"github.com/hangar-dev/hangar/internal/provisioner/terraform"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/tfmodule"
)

// `hangar load faults` (hidden) is the fault harness (docs/benchmarks.md, "Faults"): on loopback
// only, it starts its own PostgreSQL, two `hangar server` replicas sharing it, a simulated agent in
// a process of its own (`hangar load sim-agent`, whose cluster is a file) and a real `hangar
// provisioner` running the real terraform; puts them under the load of users changing desired
// states (agent and Terraform workspaces); and, one after the other, kills a replica (kill -9),
// the agent (kill -9), the provisioner (kill -9) and restarts PostgreSQL (immediate mode: no
// clean shutdown), each restarted after --down. Every change a server acknowledged (a 2xx on the
// PATCH) is recorded; after each fault the load stops and the harness waits until every
// workspace converged, and checks that no acknowledged change was lost. It reports, per fault,
// the time until the component was back and until everything converged. Bounded: each wait has a
// deadline, and everything it started is stopped and removed.

// Fault names, in the order they run by default.
const (
	FaultReplica     = "replica"
	FaultAgent       = "agent"
	FaultProvisioner = "provisioner"
	FaultPostgres    = "postgres"
)

// AllFaults are the faults the harness knows.
var AllFaults = []string{FaultReplica, FaultAgent, FaultProvisioner, FaultPostgres}

// FaultConfig configures a run of the fault harness.
type FaultConfig struct {
	// Binary is the hangar binary the servers, the agent and the provisioner run.
	Binary string
	// Terraform is the terraform binary of the provisioner.
	Terraform string
	// Workspaces are the agent's workspaces, TFWorkspaces the Terraform ones.
	Workspaces, TFWorkspaces int
	// ChangesPerSecond is the users' rate of desired-state changes.
	ChangesPerSecond float64
	// Settle is the load before each fault; Down how long the killed component stays down.
	Settle, Down time.Duration
	// ConvergeTimeout bounds each wait for convergence.
	ConvergeTimeout time.Duration
	// Faults run in this order (AllFaults when empty).
	Faults []string
	// Dir is where the run's files go (a temporary directory, removed after, when empty).
	Dir string
	// UnsafeCommit runs PostgreSQL with synchronous_commit off (and fsync off), as the tests and
	// `hangar load` do, instead of PostgreSQL's durable defaults: to show what a database crash
	// then loses (docs/benchmarks.md, "Faults").
	UnsafeCommit bool
	// Log receives progress lines (nil: none).
	Log io.Writer
}

// FaultResult is what one fault measured.
type FaultResult struct {
	Fault string
	// Back is from the kill until the component served again (a replica ready, the agent's
	// first reconcile answered, the provisioner's restart, PostgreSQL accepting and a write through
	// each replica acknowledged); Converged from the kill until every workspace converged.
	Back, Converged time.Duration
	// Acked, Refused and Failed count the user changes while the fault's load ran: acknowledged
	// (2xx), refused (4xx: a build already running, say) and failed (no answer or 5xx: in doubt).
	Acked, Refused, Failed int
	// Lost lists the acknowledged changes not found after convergence ("owner/name: want X, has
	// Y"); the goal is none.
	Lost []string
	// TFFailed counts the Terraform workspaces whose last build failed (their desired state kept);
	// TFErrors says why.
	TFFailed int
	TFErrors []string
	// InFlight (provisioner) counts the builds running when it was killed; Adopted the builds the
	// restarted provisioner adopted (its log says so).
	InFlight, Adopted int
}

// FaultReport is a run's results.
type FaultReport struct {
	Setup   time.Duration
	Results []FaultResult
}

// Lost is every lost acknowledged change of the run.
func (r FaultReport) Lost() []string {
	var out []string
	for _, f := range r.Results {
		out = append(out, f.Lost...)
	}
	return out
}

// String is the report as a table.
func (r FaultReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "setup: %v\n", r.Setup.Round(time.Millisecond))
	fmt.Fprintf(&b, "%-12s %10s %10s %7s %8s %7s %5s %9s %9s\n", "fault", "back", "converged", "acked", "refused", "failed", "lost", "tf-failed", "adopted")
	for _, f := range r.Results {
		adopted := "-"
		if f.Fault == FaultProvisioner {
			adopted = fmt.Sprintf("%d/%d", f.Adopted, f.InFlight)
		}
		fmt.Fprintf(&b, "%-12s %10v %10v %7d %8d %7d %5d %9d %9s\n", f.Fault, f.Back.Round(time.Millisecond), f.Converged.Round(time.Millisecond),
			f.Acked, f.Refused, f.Failed, len(f.Lost), f.TFFailed, adopted)
		for _, l := range f.Lost {
			fmt.Fprintf(&b, "  lost: %s\n", l)
		}
		for _, e := range f.TFErrors {
			fmt.Fprintf(&b, "  terraform build failed: %s\n", e)
		}
	}
	return b.String()
}

func faultsCommand() *cobra.Command {
	var workspaces, tfWorkspaces, rate, settle, down, timeout, faults, terraform, dir, unsafe string
	cmd := &cobra.Command{
		Use:    "faults",
		Short:  "Kill server replicas, the agent and the provisioner and restart PostgreSQL under load; check no acknowledged change is lost",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg := FaultConfig{Terraform: terraform, Dir: dir, UnsafeCommit: unsafe == "true", Log: cmd.ErrOrStderr()}
			if unsafe != "true" && unsafe != "false" {
				return fmt.Errorf("--postgres-unsafe-commit: want true or false, got %q", unsafe)
			}
			var err error
			if cfg.Binary, err = os.Executable(); err != nil {
				return err
			}
			for _, o := range []struct {
				flag, v string
				to      *int
				hi      int
			}{{"workspaces", workspaces, &cfg.Workspaces, 5000}, {"tf-workspaces", tfWorkspaces, &cfg.TFWorkspaces, 50}} {
				n, err := strconv.Atoi(o.v)
				if err != nil || n < 0 || n > o.hi {
					return fmt.Errorf("--%s: want a whole number from 0 to %d, got %q", o.flag, o.hi, o.v)
				}
				*o.to = n
			}
			if cfg.ChangesPerSecond, err = strconv.ParseFloat(rate, 64); err != nil || cfg.ChangesPerSecond <= 0 || cfg.ChangesPerSecond > 1000 {
				return fmt.Errorf("--user-changes: want a rate above 0, up to 1000 a second, got %q", rate)
			}
			for _, o := range []struct {
				flag, v string
				to      *time.Duration
			}{{"settle", settle, &cfg.Settle}, {"down", down, &cfg.Down}, {"converge-timeout", timeout, &cfg.ConvergeTimeout}} {
				d, err := time.ParseDuration(o.v)
				if err != nil || d < 0 || d > 10*time.Minute {
					return fmt.Errorf("--%s: want a duration up to 10m, got %q", o.flag, o.v)
				}
				*o.to = d
			}
			for _, f := range strings.Split(faults, ",") {
				if !slices.Contains(AllFaults, f) {
					return fmt.Errorf("--faults: want a comma-separated list of %s, got %q", strings.Join(AllFaults, ", "), f)
				}
				cfg.Faults = append(cfg.Faults, f)
			}
			rep, err := RunFaults(ctx, cfg)
			fmt.Fprint(cmd.OutOrStdout(), rep.String())
			if err != nil {
				return err
			}
			if lost := rep.Lost(); len(lost) > 0 {
				return fmt.Errorf("%d acknowledged changes lost", len(lost))
			}
			return nil
		},
	}
	cmdopt.Register(cmd, []cmdopt.Option{
		cmdopt.String(&workspaces, "workspaces", "HANGAR_FAULTS_WORKSPACES", "200", "workspaces of the (simulated) agent"),
		cmdopt.String(&tfWorkspaces, "tf-workspaces", "HANGAR_FAULTS_TF_WORKSPACES", "4", "Terraform workspaces, built by the real provisioner and terraform"),
		cmdopt.String(&rate, "user-changes", "HANGAR_FAULTS_USER_CHANGES", "20", "desired-state changes by users per second"),
		cmdopt.String(&settle, "settle", "HANGAR_FAULTS_SETTLE", "20s", "load before each fault"),
		cmdopt.String(&down, "down", "HANGAR_FAULTS_DOWN", "2s", "how long a killed component stays down before it is restarted"),
		cmdopt.String(&timeout, "converge-timeout", "HANGAR_FAULTS_CONVERGE_TIMEOUT", "3m", "the longest wait for convergence after a fault"),
		cmdopt.String(&faults, "faults", "HANGAR_FAULTS_FAULTS", strings.Join(AllFaults, ","), "the faults, in order"),
		cmdopt.String(&terraform, "terraform", "HANGAR_TERRAFORM", "terraform", "the terraform binary of the provisioner"),
		cmdopt.String(&unsafe, "postgres-unsafe-commit", "HANGAR_FAULTS_POSTGRES_UNSAFE_COMMIT", "false", "run PostgreSQL with synchronous_commit and fsync off, as the tests do, to see what its restart loses then"),
		cmdopt.String(&dir, "dir", "HANGAR_FAULTS_DIR", "", "keep the run's files (logs, database, cluster file) in this new directory (default: a temporary one, removed)"),
	})
	return cmd
}

// child is a process of the harness that it can kill -9 and start again, with the same arguments.
type child struct {
	name, bin, logPath string
	args               []string
	cmd                *exec.Cmd
	exited             chan struct{}
}

func (c *child) start() error {
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "---- %s start %s\n", c.name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(c.bin, c.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = cleanEnv()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", c.name, err)
	}
	c.cmd, c.exited = cmd, make(chan struct{})
	exited := c.exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return nil
}

// kill9 sends SIGKILL to the process (not to its children: a provisioner's terraform lives on,
// as after `kill -9 <pid>`) and waits for it to exit.
func (c *child) kill9() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.exited
}

// stop ends the process (SIGTERM, then SIGKILL after 10 s).
func (c *child) stop() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		c.kill9()
	}
}

// faultRun is one run of the harness.
type faultRun struct {
	cfg         FaultConfig
	dir         string
	pg          *throwaway
	servers     []*child
	urls        []string
	agent, prov *child
	admin       *sdk.Client
	adminToken  string
	client      *http.Client

	wss []*faultWorkspace
}

// faultWorkspace is a workspace as its owner knows it: what the servers acknowledged.
type faultWorkspace struct {
	ref, token string
	terraform  bool
	mu         sync.Mutex
	acked      string // the desired state last acknowledged
	inDoubt    string // a change sent without an answer since (it may or may not have been made)
}

func (r *faultRun) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "faults: "+format+"\n", args...)
	}
}

// RunFaults runs the harness (see the top of this file).
func RunFaults(ctx context.Context, cfg FaultConfig) (FaultReport, error) {
	var rep FaultReport
	if cfg.Workspaces+cfg.TFWorkspaces < 1 || cfg.ChangesPerSecond <= 0 || cfg.ConvergeTimeout <= 0 {
		return rep, errors.New("faults: want workspaces, a rate of changes and a convergence timeout")
	}
	if len(cfg.Faults) == 0 {
		cfg.Faults = AllFaults
	}
	r := &faultRun{cfg: cfg, client: &http.Client{Timeout: 30 * time.Second}}
	r.dir = cfg.Dir
	if r.dir == "" {
		dir, err := os.MkdirTemp("", "hangar-faults-")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(dir)
		r.dir = dir
	}
	defer r.stopAll()
	began := time.Now()
	if err := r.setUp(ctx); err != nil {
		return rep, err
	}
	// Everything settles once before the first fault: the workspaces were just created.
	if _, err := r.converge(ctx, time.Now()); err != nil {
		return rep, fmt.Errorf("before the first fault: %w", err)
	}
	rep.Setup = time.Since(began)
	r.logf("set up in %v: 2 replicas, %d agent workspaces, %d Terraform workspaces", rep.Setup.Round(time.Millisecond), cfg.Workspaces, cfg.TFWorkspaces)
	for _, f := range cfg.Faults {
		res, err := r.fault(ctx, f)
		rep.Results = append(rep.Results, res)
		if err != nil {
			return rep, fmt.Errorf("fault %s: %w", f, err)
		}
		r.logf("%s: back in %v, converged in %v; %d changes acknowledged, %d lost", f, res.Back.Round(time.Millisecond), res.Converged.Round(time.Millisecond), res.Acked, len(res.Lost))
	}
	return rep, nil
}

func (r *faultRun) stopAll() {
	for _, c := range append([]*child{r.agent, r.prov}, r.servers...) {
		if c != nil {
			c.stop()
		}
	}
	if r.pg != nil {
		r.pg.stop()
	}
}

// faultModule is the Terraform workspaces' template: a resource per start, nothing outside
// terraform.
const faultModule = `variable "start_count" {
  type = number
}

resource "terraform_data" "machine" {
  count = var.start_count
}
`

func (r *faultRun) setUp(ctx context.Context) error {
	conf := durableConf
	if r.cfg.UnsafeCommit {
		conf = ""
	}
	pg, err := startPostgresWith(ctx, filepath.Join(r.dir, "pg"), conf)
	if err != nil {
		return err
	}
	r.pg = pg
	dbURL, err := createDatabase(ctx, pg.url, "hangar_faults")
	if err != nil {
		return err
	}
	for i := range 2 {
		port, err := freePort()
		if err != nil {
			return err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		data := filepath.Join(r.dir, fmt.Sprintf("server-%d", i))
		if err := os.MkdirAll(data, 0o700); err != nil {
			return err
		}
		c := &child{name: fmt.Sprintf("replica-%d", i), bin: r.cfg.Binary, logPath: data + ".log",
			args: []string{"server", "--listen", addr, "--data-dir", data, "--provisioners", "0", "--log-level", "info", "--postgres-url", dbURL}}
		r.servers, r.urls = append(r.servers, c), append(r.urls, "http://"+addr)
		if err := c.start(); err != nil {
			return err
		}
		if err := r.waitReady(ctx, i); err != nil {
			return err
		}
	}
	token, err := os.ReadFile(filepath.Join(r.dir, "server-0", "admin-token"))
	if err != nil {
		return fmt.Errorf("read the admin token: %w", err)
	}
	r.adminToken = strings.TrimSpace(string(token))
	if r.admin, err = sdk.New(r.urls[0], r.adminToken); err != nil {
		return err
	}
	user, err := r.admin.CreateUser(ctx, sdk.CreateUserRequest{Username: "dev"})
	if err != nil {
		return err
	}
	agent, err := r.admin.CreateAgent(ctx, sdk.CreateAgentRequest{Name: "sim"})
	if err != nil {
		return err
	}
	agentToken := filepath.Join(r.dir, "agent-token")
	if err := os.WriteFile(agentToken, []byte(agent.Token), 0o600); err != nil {
		return err
	}
	r.agent = &child{name: "agent", bin: r.cfg.Binary, logPath: filepath.Join(r.dir, "agent.log"),
		args: []string{"load", "sim-agent", "--servers", strings.Join(r.urls, ","), "--token-file", agentToken,
			"--cluster-file", filepath.Join(r.dir, "cluster.json"), "--interval", "500ms"}}
	if err := r.agent.start(); err != nil {
		return err
	}
	userClient, err := sdk.New(r.urls[1], user.Token)
	if err != nil {
		return err
	}
	for i := range r.cfg.Workspaces {
		name := fmt.Sprintf("ws-%04d", i)
		if _, err := userClient.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: name, Agent: "sim"}); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		r.wss = append(r.wss, &faultWorkspace{ref: "dev/" + name, token: user.Token, acked: "Running"})
	}
	if r.cfg.TFWorkspaces > 0 {
		mod := filepath.Join(r.dir, "module")
		if err := os.MkdirAll(mod, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(mod, "main.tf"), []byte(faultModule), 0o600); err != nil {
			return err
		}
		archive, err := tfmodule.Pack(mod)
		if err != nil {
			return err
		}
		if _, err := r.admin.PushTemplateVersion(ctx, "machine", sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: archive}); err != nil {
			return err
		}
		p, err := r.admin.CreateProvisioner(ctx, sdk.CreateProvisionerRequest{Name: "faults"})
		if err != nil {
			return err
		}
		provToken := filepath.Join(r.dir, "provisioner-token")
		if err := os.WriteFile(provToken, []byte(p.Token), 0o600); err != nil {
			return err
		}
		// The provisioner talks to replica 1, which the replica fault leaves up.
		r.prov = &child{name: "provisioner", bin: r.cfg.Binary, logPath: filepath.Join(r.dir, "provisioner.log"),
			args: []string{"provisioner", "--server", r.urls[1], "--token-file", provToken, "--terraform", r.cfg.Terraform,
				"--work-dir", filepath.Join(r.dir, "provisioner"), "--identity", "faults", "--log-level", "info"}}
		if err := r.prov.start(); err != nil {
			return err
		}
		for i := range r.cfg.TFWorkspaces {
			name := fmt.Sprintf("tf-%02d", i)
			if _, err := userClient.CreateWorkspace(ctx, sdk.CreateWorkspaceRequest{Name: name, Template: "machine"}); err != nil {
				return fmt.Errorf("create %s: %w", name, err)
			}
			r.wss = append(r.wss, &faultWorkspace{ref: "dev/" + name, token: user.Token, terraform: true, acked: "Running"})
		}
	}
	return nil
}

// waitReady waits until replica i answers /readyz.
func (r *faultRun) waitReady(ctx context.Context, i int) error {
	c := r.servers[i]
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := r.client.Get(r.urls[i] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-c.exited:
			return fmt.Errorf("%s exited before it was ready; see %s", c.name, c.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after a minute; see %s", c.name, c.logPath)
		}
	}
}

// load changes desired states at the configured rate until stop is closed, and counts.
type loadCounts struct {
	mu                     sync.Mutex
	acked, refused, failed int
}

func (r *faultRun) load(ctx context.Context, stop <-chan struct{}, counts *loadCounts) {
	const changers = 8
	var wg sync.WaitGroup
	ticks := make(chan struct{})
	for c := range changers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each changer owns the workspaces of its index modulo changers: one workspace's
			// changes are sequential, so that "the last acknowledged" is well defined.
			rnd := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			var mine []*faultWorkspace
			for i := c; i < len(r.wss); i += changers {
				mine = append(mine, r.wss[i])
			}
			n := 0
			for range ticks {
				if len(mine) == 0 {
					continue
				}
				n++
				r.change(ctx, mine[rnd.IntN(len(mine))], r.urls[n%len(r.urls)], counts)
			}
		}()
	}
	t := time.NewTicker(time.Duration(float64(time.Second) / r.cfg.ChangesPerSecond))
	defer t.Stop()
	defer wg.Wait()
	defer close(ticks)
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			select {
			case ticks <- struct{}{}:
			default: // every changer waits for an answer: skip
			}
		}
	}
}

// change toggles w's desired state through server, and records the answer: a 2xx is an
// acknowledged change, a 4xx a refusal, anything else (no answer, 5xx) a change in doubt.
func (r *faultRun) change(ctx context.Context, w *faultWorkspace, server string, counts *loadCounts) {
	w.mu.Lock()
	defer w.mu.Unlock()
	to := "Stopped"
	if w.acked == "Stopped" {
		to = "Running"
	}
	body, _ := json.Marshal(sdk.UpdateWorkspaceRequest{DesiredState: to})
	req, err := http.NewRequestWithContext(ctx, "PATCH", server+"/api/v1/workspaces/"+neturl.PathEscape(w.ref), bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	status := 0
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		status = resp.StatusCode
	}
	counts.mu.Lock()
	defer counts.mu.Unlock()
	switch {
	case status/100 == 2:
		w.acked, w.inDoubt = to, ""
		counts.acked++
	case status/100 == 4:
		counts.refused++
	default:
		w.inDoubt = to
		counts.failed++
	}
}

// fault runs one fault: load for Settle, the kill, Down, the restart, then convergence.
func (r *faultRun) fault(ctx context.Context, name string) (FaultResult, error) {
	res := FaultResult{Fault: name}
	if name == FaultProvisioner && r.prov == nil {
		return res, errors.New("no provisioner: run with Terraform workspaces")
	}
	counts := &loadCounts{}
	stop := make(chan struct{})
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		r.load(ctx, stop, counts)
	}()
	endLoad := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-loaded
	}
	defer endLoad()
	if !loadgen.Wait(ctx, r.cfg.Settle) {
		return res, ctx.Err()
	}
	r.logf("%s: kill", name)
	killed := time.Now()
	var err error
	switch name {
	case FaultReplica:
		r.servers[0].kill9()
		loadgen.Wait(ctx, r.cfg.Down)
		if err = r.servers[0].start(); err == nil {
			err = r.waitReady(ctx, 0)
		}
	case FaultAgent:
		r.agent.kill9()
		loadgen.Wait(ctx, r.cfg.Down)
		// Back at the first answer to the restarted agent: one given after its start (an answer
		// after the kill could be to a request the killed agent sent, which a loaded server took
		// longer than the kill to answer).
		restarted := time.Now()
		if err = r.agent.start(); err == nil {
			err = r.waitReconciled(ctx, restarted)
		}
	case FaultProvisioner:
		// Killed while terraform runs: wait (bounded) for a build that the provisioner claimed and
		// whose terraform started (its work directory exists for an adoption), and kill. A build
		// that ended between that look and the kill (a small apply is quick) is not in flight: the
		// server's view of that build (by number: a newer build of the same workspace, queued
		// meanwhile by the users' load, is no build the killed provisioner ran) after the kill says
		// which are. None left: start the provisioner again and try once more (at most 5).
		var building []buildRef
		for attempt := 1; ; attempt++ {
			for end := time.Now().Add(terraformWait); ; {
				if building, err = r.runningTerraform(ctx); err != nil {
					return res, err
				}
				if len(building) > 0 {
					break
				}
				if time.Now().After(end) {
					return res, fmt.Errorf("no build ran terraform within %v of load to kill the provisioner during", terraformWait)
				}
				if !loadgen.Wait(ctx, 20*time.Millisecond) {
					return res, ctx.Err()
				}
			}
			killed = time.Now()
			r.prov.kill9()
			seen := building
			if building, err = unfinished(seen, r.buildStatus(ctx)); err != nil {
				return res, err
			}
			if len(building) > 0 || attempt == 5 {
				break
			}
			r.logf("provisioner: the builds seen running terraform (%v) ended before the kill (attempt %d of 5): start it again", seen, attempt)
			if err := r.prov.start(); err != nil {
				return res, err
			}
		}
		res.InFlight = len(building)
		adopted0 := r.adopted()
		loadgen.Wait(ctx, r.cfg.Down)
		if err = r.prov.start(); err == nil {
			// Back once the builds in flight at the kill have ended (those builds: the workspace
			// may be building again by then, a user having changed it).
			for end := time.Now().Add(r.cfg.ConvergeTimeout); ; {
				left, berr := unfinished(building, r.buildStatus(ctx))
				if berr == nil && len(left) == 0 {
					break
				}
				if time.Now().After(end) {
					err = fmt.Errorf("the builds in flight at the kill (%v) did not end in time", building)
					break
				}
				if !loadgen.Wait(ctx, 50*time.Millisecond) {
					return res, ctx.Err()
				}
			}
		}
		res.Adopted = r.adopted() - adopted0
	case FaultPostgres:
		// Immediate mode: every PostgreSQL process quits at once, without a checkpoint; the start
		// that follows runs crash recovery from the WAL. (With UnsafeCommit, commits still in the
		// WAL buffers when it quits are lost.)
		err = r.pg.run("pg_ctl", "stop", "-D", filepath.Join(r.pg.dir, "data"), "-m", "immediate", "-w", "-t", "60", "-s")
		if err == nil {
			loadgen.Wait(ctx, r.cfg.Down)
			err = r.pg.run("pg_ctl", "start", "-D", filepath.Join(r.pg.dir, "data"), "-l", filepath.Join(r.pg.dir, "postgres.log"), "-w", "-t", "60", "-s")
		}
		if err == nil {
			err = r.waitWrites(ctx)
		}
	default:
		err = fmt.Errorf("unknown fault %q", name)
	}
	if err != nil {
		return res, err
	}
	res.Back = time.Since(killed)
	endLoad()
	res.Acked, res.Refused, res.Failed = counts.acked, counts.refused, counts.failed
	out, err := r.converge(ctx, killed)
	res.Converged, res.Lost, res.TFFailed, res.TFErrors = out.took, out.lost, out.tfFailed, out.tfErrors
	return res, err
}

// waitReconciled waits until the agent's first reconcile after since reached a server: a
// workspace answered to the agent after it.
func (r *faultRun) waitReconciled(ctx context.Context, since time.Time) error {
	deadline := time.Now().Add(r.cfg.ConvergeTimeout)
	for time.Now().Before(deadline) {
		ws, err := r.list(ctx)
		if err == nil {
			for _, w := range ws {
				if w.RespondedToAgentAt != nil && w.RespondedToAgentAt.After(since) {
					return nil
				}
			}
		}
		if !loadgen.Wait(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
	return errors.New("the restarted agent did not reconcile in time")
}

// waitWrites waits until a write through each replica is acknowledged (the admin creating a
// token: a row written).
func (r *faultRun) waitWrites(ctx context.Context) error {
	deadline := time.Now().Add(r.cfg.ConvergeTimeout)
	for i := range r.urls {
		c, err := sdk.New(r.urls[i], r.adminToken)
		if err != nil {
			return err
		}
		for n := 0; ; n++ {
			name := fmt.Sprintf("probe-%d-%d", i, time.Now().UnixNano())
			if _, err := c.CreateToken(ctx, sdk.CreateTokenRequest{Name: name}); err == nil {
				break
			} else if time.Now().After(deadline) {
				return fmt.Errorf("replica-%d: no write acknowledged after the restart: %w", i, err)
			}
			if !loadgen.Wait(ctx, 50*time.Millisecond) {
				return ctx.Err()
			}
		}
	}
	return nil
}

// list reads every workspace through the first replica that answers.
func (r *faultRun) list(ctx context.Context) ([]sdk.Workspace, error) {
	var err error
	for _, u := range r.urls {
		var c *sdk.Client
		if c, err = sdk.New(u, r.adminToken); err != nil {
			return nil, err
		}
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ws, lerr := c.ListWorkspaces(lctx)
		cancel()
		if lerr == nil {
			return ws, nil
		}
		err = lerr
	}
	return nil, err
}

// building lists the Terraform workspaces whose build runs (actual Starting or Stopping).
func (r *faultRun) building(ctx context.Context) ([]string, error) {
	ws, err := r.list(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, w := range ws {
		if w.Backend == "terraform" && (w.ActualState == "Starting" || w.ActualState == "Stopping") {
			out = append(out, w.Owner+"/"+w.Name)
		}
	}
	return out, nil
}

// terraformWait bounds the wait for a build that runs terraform, to kill the provisioner during.
const terraformWait = time.Minute

// buildRef names one build of a workspace.
type buildRef struct {
	ws     string
	number int
}

func (b buildRef) String() string { return fmt.Sprintf("%s#%d", b.ws, b.number) }

// runningTerraform lists the Terraform workspaces' latest builds that the provisioner claimed
// (running) and whose terraform started: their log has a line of a terraform stage (init, apply or
// destroy). The work directory a restarted provisioner adopts exists from then on; a build that
// only logged "Setting up" may not have it yet (its first log lines are shipped while it is being
// made: under load, a kill can fall in between, and nothing is there to adopt).
func (r *faultRun) runningTerraform(ctx context.Context) ([]buildRef, error) {
	ws, err := r.building(ctx)
	if err != nil {
		return nil, err
	}
	var out []buildRef
	for _, ref := range ws {
		b, err := r.admin.Build(ctx, ref, 0)
		if err != nil || b.Status != string(build.Running) {
			continue
		}
		started := false
		if err := r.admin.BuildLogs(ctx, ref, b.Number, 0, false, func(l sdk.BuildLog) error {
			started = started || terraformStage(l.Stage)
			return nil
		}); err == nil && started {
			out = append(out, buildRef{ws: ref, number: b.Number})
		}
	}
	return out, nil
}

// terraformStage says whether a build log line of this stage was written once terraform ran.
func terraformStage(stage string) bool {
	switch stage {
	case terraform.StageInit, terraform.StageApply, terraform.StageDestroy:
		return true
	}
	return false
}

// buildStatus looks up a build's status through a replica.
func (r *faultRun) buildStatus(ctx context.Context) func(buildRef) (string, error) {
	return func(b buildRef) (string, error) {
		got, err := r.admin.Build(ctx, b.ws, b.number)
		return got.Status, err
	}
}

// unfinished keeps the builds whose job has not ended (pending, running or canceling).
func unfinished(builds []buildRef, status func(buildRef) (string, error)) ([]buildRef, error) {
	var out []buildRef
	for _, b := range builds {
		st, err := status(b)
		if err != nil {
			return nil, fmt.Errorf("build %v: %w", b, err)
		}
		if build.JobStatus(st).Active() {
			out = append(out, b)
		}
	}
	return out, nil
}

// adopted counts the builds the provisioner's log says it adopted from a killed predecessor.
func (r *faultRun) adopted() int {
	b, _ := os.ReadFile(r.prov.logPath)
	return bytes.Count(b, []byte("adopting a build a previous provisioner left unfinished"))
}

type convergence struct {
	took     time.Duration
	lost     []string
	tfFailed int
	tfErrors []string
}

// converge waits until every workspace converged: an agent workspace's actual state is its desired
// one; a Terraform workspace has no active build and its actual state is its desired one, or
// Failed (its build failed: the desired state is kept, and the user sees why). Then it checks
// every workspace's desired state is the last acknowledged change (or one sent without an
// answer, which may have been made).
func (r *faultRun) converge(ctx context.Context, since time.Time) (convergence, error) {
	var out convergence
	deadline := time.Now().Add(r.cfg.ConvergeTimeout)
	var pending []string
	for {
		ws, err := r.list(ctx)
		if err == nil {
			pending = pending[:0]
			out.tfFailed, out.tfErrors = 0, nil
			for _, w := range ws {
				switch {
				case w.ActualState == w.DesiredState:
				case w.Backend == "terraform" && (w.ActualState == "Failed" || w.ActualState == "Canceled"):
					out.tfFailed++
					if w.Error != nil {
						out.tfErrors = append(out.tfErrors, w.Owner+"/"+w.Name+": "+w.Error.Message)
					}
				default:
					pending = append(pending, fmt.Sprintf("%s/%s %s→%s", w.Owner, w.Name, w.ActualState, w.DesiredState))
				}
			}
			if len(pending) == 0 && len(ws) == len(r.wss) {
				out.took = time.Since(since)
				out.lost = r.lost(ws)
				return out, nil
			}
		}
		if time.Now().After(deadline) {
			sort.Strings(pending)
			return out, fmt.Errorf("not converged after %v (%v): %d workspaces pending, such as %v", r.cfg.ConvergeTimeout, err, len(pending), pending[:min(len(pending), 5)])
		}
		if !loadgen.Wait(ctx, 100*time.Millisecond) {
			return out, ctx.Err()
		}
	}
}

// lost compares what the servers hold with what they acknowledged.
func (r *faultRun) lost(ws []sdk.Workspace) []string {
	byRef := map[string]sdk.Workspace{}
	for _, w := range ws {
		byRef[w.Owner+"/"+w.Name] = w
	}
	var lost []string
	for _, fw := range r.wss {
		fw.mu.Lock()
		w, ok := byRef[fw.ref]
		switch {
		case !ok:
			lost = append(lost, fmt.Sprintf("%s: gone", fw.ref))
		case w.DesiredState != fw.acked && w.DesiredState != fw.inDoubt:
			lost = append(lost, fmt.Sprintf("%s: acknowledged %s, has %s", fw.ref, fw.acked, w.DesiredState))
		default:
			// What the server holds is now known: the doubt is settled.
			fw.acked, fw.inDoubt = w.DesiredState, ""
		}
		fw.mu.Unlock()
	}
	return lost
}

// loopbackURL refuses a server URL whose host is not a loopback address: the harness stays on
// this machine.
func loopbackURL(raw string) error {
	u, err := neturl.Parse(raw)
	if err != nil {
		return err
	}
	if h := u.Hostname(); h == "localhost" || net.ParseIP(h) != nil && net.ParseIP(h).IsLoopback() {
		return nil
	}
	return fmt.Errorf("%s is not on loopback; the harness runs on this machine only", raw)
}
