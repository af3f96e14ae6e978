// Package loadgen puts a Hangar server (one replica or several sharing a database) under the load
// of many agents and their users, over the real HTTP API, and measures it: N agents of M workspaces
// each, every agent sending a partial reconcile every interval (as `hangar agent` does when nothing
// wakes it sooner), and users changing desired states (PATCH /api/v1/workspaces/{owner/name}) at a
// steady rate. It reports the latency percentiles of both, their throughput, and the CPU each
// server process (and the database) used. `hangar load` (internal/loadcmd) starts the servers and
// calls Run; docs/benchmarks.md records figures.
//
// Agents and users are created through the admin API; the workspaces are inserted through the
// store in bulk (Seeder), since 100,000 creations through the API would take longer than the run.
// The seeded workspaces are Running, answered, and reported at resource version 1: the steady
// state of a fleet. Each simulated agent remembers what the server told it: a config it receives is
// "applied" at once (a new Deployment resource version, in the desired state), and reported in its
// next partial reconcile until the server echoes that version.
package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Seeder inserts workspaces in bulk (sqlstore.Store.InsertWorkspaces).
type Seeder interface {
	InsertWorkspaces(ctx context.Context, rows []workspace.Workspace) error
}

// Config says what load to generate, against what.
type Config struct {
	// Servers are the replicas' base URLs (http://127.0.0.1:port). Agent i talks to
	// Servers[i%len(Servers)]; user changes go to each in turn.
	Servers    []string
	AdminToken string
	Seeder     Seeder
	// Agents and WorkspacesPerAgent size the fleet; each agent has a user who owns its workspaces.
	Agents, WorkspacesPerAgent int
	// Interval is each agent's period between partial reconciles; the agents' first reconciles
	// come at random moments of the first interval.
	Interval time.Duration
	// UserChangesPerSecond is the rate of desired-state changes (Running ↔ Stopped of a random
	// workspace).
	UserChangesPerSecond float64
	// Warmup runs the load without measuring it; Duration is the measured time after it.
	Warmup, Duration time.Duration
	// Rounds, when above 0, replaces time by rounds (for tests): in each round UserChangesPerRound
	// users change a workspace one after the other, then every agent sends one partial reconcile, all
	// at once. Every change is therefore answered within its round. Interval, Warmup, Duration and
	// UserChangesPerSecond are ignored, and everything is measured.
	Rounds, UserChangesPerRound int
	// Step, in rounds, is called before each user change and before each round's reconciles: a
	// test advances its server's fake clock there, as real time passes between requests.
	Step func()
	// Processes are the server processes (and the database's) whose CPU time is reported, by name.
	Processes []Process
	// Counters are read at both ends of the measured window and reported as their difference
	// (Postgres: the sessions opened on the database).
	Counters []Counter
	// Now is the time the seeded rows were last answered at (nil: time.Now); tests pass the
	// server's clock.
	Now func() time.Time
	// Log receives progress lines (nil: none).
	Log io.Writer
	// Client is the HTTP client (nil: one that keeps enough idle connections to every server for
	// the agents never to reconnect, like real agents each keeping theirs).
	Client *http.Client
}

// Process names a process whose CPU time is measured: a server replica, or the database.
type Process struct {
	Name string
	// CPU returns the process's CPU time so far (user + system): ProcCPU(pid), or, for the
	// database, the sum over its processes.
	CPU func() (time.Duration, error)
}

// Counter is a number that only grows, such as the sessions a database opened.
type Counter struct {
	Name string
	Read func(ctx context.Context) (int64, error)
}

// Report is what a run measured.
type Report struct {
	Agents, Workspaces int
	Seeding            time.Duration // inserting the workspaces
	Measured           time.Duration // wall time of the measured window
	Reconciles         Latencies
	UserChanges        Latencies
	// Answered counts the workspaces the measured reconciles answered; Configs those answered with
	// a config to apply (a user change picked up).
	Answered, Configs int
	CPU               []CPU
	Counted           []Counted
}

// Counted is how much a counter grew during the measured window.
type Counted struct {
	Name      string
	N         int64
	PerSecond float64
}

// CPU is the share of one core a process used during the measured window.
type CPU struct {
	Name    string
	Used    time.Duration
	OfACore float64 // Used ÷ Measured
}

// Latencies summarise the requests of one kind in the measured window.
type Latencies struct {
	Count, Errors int
	P50, P99, Max time.Duration
	PerSecond     float64
	FirstError    string
	samples       []time.Duration
}

func (l *Latencies) summarise(window time.Duration) {
	sort.Slice(l.samples, func(i, j int) bool { return l.samples[i] < l.samples[j] })
	l.Count = len(l.samples)
	l.P50, l.P99 = Percentile(l.samples, 50), Percentile(l.samples, 99)
	if l.Count > 0 {
		l.Max = l.samples[l.Count-1]
	}
	if window > 0 {
		l.PerSecond = float64(l.Count) / window.Seconds()
	}
}

// Percentile is the nearest-rank percentile p of sorted samples (0 when there are none).
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// String is the report as a few lines of text.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fleet: %d agents × %d workspaces = %d workspaces (seeded in %v)\n", r.Agents, r.Workspaces/max(r.Agents, 1), r.Workspaces, r.Seeding.Round(time.Millisecond))
	fmt.Fprintf(&b, "measured: %v\n", r.Measured.Round(time.Millisecond))
	line := func(what string, l Latencies) {
		fmt.Fprintf(&b, "%-13s %7d ok %5d errors  %7.1f/s  p50 %8v  p99 %8v  max %8v\n", what, l.Count, l.Errors, l.PerSecond,
			roundLatency(l.P50), roundLatency(l.P99), roundLatency(l.Max))
		if l.FirstError != "" {
			fmt.Fprintf(&b, "  first error: %s\n", l.FirstError)
		}
	}
	line("reconciles", r.Reconciles)
	line("user changes", r.UserChanges)
	fmt.Fprintf(&b, "answered workspaces: %d (%d with a config)\n", r.Answered, r.Configs)
	for _, c := range r.CPU {
		fmt.Fprintf(&b, "cpu %-10s %6.1f%% of a core (%v)\n", c.Name, 100*c.OfACore, c.Used.Round(10*time.Millisecond))
	}
	for _, c := range r.Counted {
		fmt.Fprintf(&b, "%s: %d (%.1f/s)\n", c.Name, c.N, c.PerSecond)
	}
	return b.String()
}

func roundLatency(d time.Duration) time.Duration {
	if d < 10*time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(100 * time.Microsecond)
}

// simulated is one simulated agent.
type simulated struct {
	id, name, token, server string
	mu                      sync.Mutex
	ws                      map[string]*deployment // by cluster name
}

// deployment is what a simulated agent's cluster holds of one workspace.
type deployment struct {
	namespace string
	running   bool
	rv        int
	echoed    bool // the server echoed rv: nothing to report
}

// userWorkspace is a workspace as its owner sees it.
type userWorkspace struct {
	ref, token, server string
	mu                 sync.Mutex
	running            bool // the desired state this user last asked for
}

type run struct {
	cfg    Config
	client *http.Client
	agents []*simulated
	wss    []*userWorkspace

	mu                    sync.Mutex
	measuring             bool
	rec, user             Latencies
	answered, configs     int
	recErrs, userErrs     int
	firstRecErr, firstUsr string
}

// Run sets the fleet up, runs the load, and reports. It stops early, with an error, when ctx ends.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Agents < 1 || cfg.WorkspacesPerAgent < 1 || len(cfg.Servers) == 0 || cfg.Seeder == nil {
		return Report{}, errors.New("loadgen: want at least one agent, one workspace each, a server and a seeder")
	}
	if cfg.Rounds == 0 && (cfg.Interval <= 0 || cfg.Duration <= 0) {
		return Report{}, errors.New("loadgen: want an interval and a duration (or rounds)")
	}
	r := &run{cfg: cfg, client: cfg.Client}
	if r.client == nil {
		r.client = &http.Client{Timeout: time.Minute, Transport: &http.Transport{
			MaxIdleConns: 4 * cfg.Agents, MaxIdleConnsPerHost: 2 * cfg.Agents, IdleConnTimeout: 5 * time.Minute}}
	}
	rep := Report{Agents: cfg.Agents, Workspaces: cfg.Agents * cfg.WorkspacesPerAgent}
	if err := r.setUp(ctx, &rep); err != nil {
		return rep, err
	}
	var cpu0 []time.Duration
	var count0 []int64
	var start time.Time
	begin := func() error {
		var err error
		if cpu0, err = r.cpu(); err != nil {
			return err
		}
		if count0, err = r.count(ctx); err != nil {
			return err
		}
		r.mu.Lock()
		r.measuring = true
		r.mu.Unlock()
		start = time.Now()
		return nil
	}
	var err error
	if cfg.Rounds > 0 {
		if err := begin(); err != nil {
			return rep, err
		}
		err = r.rounds(ctx)
	} else {
		err = r.timed(ctx, begin)
	}
	if err != nil {
		return rep, err
	}
	rep.Measured = time.Since(start)
	cpu1, err := r.cpu()
	if err != nil {
		return rep, err
	}
	for i, p := range cfg.Processes {
		used := cpu1[i] - cpu0[i]
		rep.CPU = append(rep.CPU, CPU{Name: p.Name, Used: used, OfACore: used.Seconds() / rep.Measured.Seconds()})
	}
	count1, err := r.count(ctx)
	if err != nil {
		return rep, err
	}
	for i, c := range cfg.Counters {
		n := count1[i] - count0[i]
		rep.Counted = append(rep.Counted, Counted{Name: c.Name, N: n, PerSecond: float64(n) / rep.Measured.Seconds()})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.summarise(rep.Measured)
	r.user.summarise(rep.Measured)
	r.rec.Errors, r.rec.FirstError = r.recErrs, r.firstRecErr
	r.user.Errors, r.user.FirstError = r.userErrs, r.firstUsr
	rep.Reconciles, rep.UserChanges = r.rec, r.user
	rep.Answered, rep.Configs = r.answered, r.configs
	return rep, nil
}

func (r *run) logf(format string, args ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, format+"\n", args...)
	}
}

func (r *run) cpu() ([]time.Duration, error) {
	out := make([]time.Duration, len(r.cfg.Processes))
	for i, p := range r.cfg.Processes {
		d, err := p.CPU()
		if err != nil {
			return nil, fmt.Errorf("cpu time of %s: %w", p.Name, err)
		}
		out[i] = d
	}
	return out, nil
}

func (r *run) count(ctx context.Context) ([]int64, error) {
	out := make([]int64, len(r.cfg.Counters))
	for i, c := range r.cfg.Counters {
		n, err := c.Read(ctx)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", c.Name, err)
		}
		out[i] = n
	}
	return out, nil
}

// setUp creates the agents and their users through the admin API, and seeds the workspaces.
func (r *run) setUp(ctx context.Context, rep *Report) error {
	cfg := r.cfg
	admin, err := sdk.New(cfg.Servers[0], cfg.AdminToken)
	if err != nil {
		return err
	}
	started := time.Now()
	prefix := fmt.Sprintf("load-%s", uuid.NewString()[:6]) // several runs may share a database
	users := make([]sdk.User, cfg.Agents)
	r.agents = make([]*simulated, cfg.Agents)
	err = parallel(ctx, cfg.Agents, 16, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("%s-%04d", prefix, i)
		u, err := admin.CreateUser(ctx, sdk.CreateUserRequest{Username: name})
		if err != nil {
			return fmt.Errorf("create user %s: %w", name, err)
		}
		a, err := admin.CreateAgent(ctx, sdk.CreateAgentRequest{Name: name})
		if err != nil {
			return fmt.Errorf("create agent %s: %w", name, err)
		}
		users[i] = u
		r.agents[i] = &simulated{id: a.ID, name: a.Name, token: a.Token, server: cfg.Servers[i%len(cfg.Servers)], ws: map[string]*deployment{}}
		return nil
	})
	if err != nil {
		return err
	}
	r.logf("created %d agents and their users in %v", cfg.Agents, time.Since(started).Round(time.Millisecond))

	started = time.Now()
	text := string(devfile.Default())
	now := time.Now()
	if cfg.Now != nil {
		now = cfg.Now()
	}
	now = now.UTC().Truncate(time.Microsecond)
	before := now.Add(-time.Minute)
	rv := "1"
	rows := make([]workspace.Workspace, 0, min(cfg.Agents*cfg.WorkspacesPerAgent, 20000))
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		if err := cfg.Seeder.InsertWorkspaces(ctx, rows); err != nil {
			return fmt.Errorf("seed workspaces: %w", err)
		}
		rows = rows[:0]
		return nil
	}
	for i, a := range r.agents {
		for k := 0; k < cfg.WorkspacesPerAgent; k++ {
			id := uuid.NewString()
			name := fmt.Sprintf("ws-%04d", k)
			kube := workspace.KubeName(name, id)
			ns := workspace.Namespace(kube)
			rows = append(rows, workspace.Workspace{ID: id, Name: name, KubeName: kube, OwnerID: users[i].ID, AgentID: a.id, Namespace: ns,
				Devfile: text, DesiredState: workspace.Running, ActualState: workspace.Running, DesiredStateUpdatedAt: before,
				ActualStateUpdatedAt: &before, RespondedToAgentAt: &now, DeploymentResourceVersion: &rv, CreatedAt: before,
				Backend: workspace.KindKubernetes})
			a.ws[kube] = &deployment{namespace: ns, running: true, rv: 1, echoed: true}
			r.wss = append(r.wss, &userWorkspace{ref: users[i].Username + "/" + name, token: users[i].Token,
				server: cfg.Servers[len(r.wss)%len(cfg.Servers)], running: true})
			if len(rows) == cap(rows) {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	rep.Seeding = time.Since(started)
	r.logf("seeded %d workspaces in %v", len(r.wss), rep.Seeding.Round(time.Millisecond))
	return nil
}

// rounds runs cfg.Rounds rounds (see Config.Rounds).
func (r *run) rounds(ctx context.Context) error {
	next := 0
	for round := 0; round < r.cfg.Rounds; round++ {
		for c := 0; c < r.cfg.UserChangesPerRound; c++ {
			// Spread over the fleet, and never one workspace twice in a round while there are more.
			r.step()
			r.change(ctx, r.wss[next*7919%len(r.wss)])
			next++
		}
		r.step()
		var wg sync.WaitGroup
		for _, a := range r.agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.reconcile(ctx, a)
			}()
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) step() {
	if r.cfg.Step != nil {
		r.cfg.Step()
	}
}

// timed runs the load for Warmup + Duration; begin starts the measured window.
func (r *run) timed(ctx context.Context, begin func() error) error {
	cfg := r.cfg
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	phase := rand.New(rand.NewPCG(3, 4))
	for _, a := range r.agents {
		// Each agent's timer starts when its agent did: at a random moment, not evenly spread, so
		// that requests meet at times as real agents' do.
		offset := time.Duration(phase.Int64N(int64(cfg.Interval)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !Wait(lctx, offset) {
				return
			}
			t := time.NewTicker(cfg.Interval)
			defer t.Stop()
			for {
				r.reconcile(lctx, a)
				select {
				case <-lctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	if cfg.UserChangesPerSecond > 0 {
		// Each changer owns the workspaces of its index modulo changers, so that no two change one
		// workspace at once; a slow answer delays one changer, not the rate.
		const changers = 8
		ticks := make(chan struct{})
		for c := 0; c < changers; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rnd := rand.New(rand.NewPCG(uint64(c), 7))
				mine := (len(r.wss) - c + changers - 1) / changers
				for range ticks {
					if mine > 0 {
						r.change(lctx, r.wss[c+changers*rnd.IntN(mine)])
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(ticks)
			t := time.NewTicker(time.Duration(float64(time.Second) / cfg.UserChangesPerSecond))
			defer t.Stop()
			for {
				select {
				case <-lctx.Done():
					return
				case <-t.C:
					select {
					case ticks <- struct{}{}:
					default: // every changer is busy: the server is slower than the rate; skip
					}
				}
			}
		}()
	}
	r.logf("warming up for %v", cfg.Warmup)
	if !Wait(ctx, cfg.Warmup) {
		return ctx.Err()
	}
	if err := begin(); err != nil {
		return err
	}
	r.logf("measuring for %v", cfg.Duration)
	if !Wait(ctx, cfg.Duration) {
		return ctx.Err()
	}
	// Requests still in flight finish (and count, if they began in the window) before the end is
	// taken: stop only the loops.
	r.mu.Lock()
	r.measuring = false
	r.mu.Unlock()
	stop()
	wg.Wait()
	return nil
}

// Wait waits for d or the end of ctx, and says whether d passed (the load and fault harnesses
// measure real time on purpose).
func Wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// reconcile sends one partial reconcile of agent a, reporting the Deployments whose resource
// version the server has not echoed, and "applies" the configs of the answer.
func (r *run) reconcile(ctx context.Context, a *simulated) {
	a.mu.Lock()
	infos := []protocol.WorkspaceAgentInfo{}
	for name, d := range a.ws {
		if !d.echoed {
			infos = append(infos, protocol.WorkspaceAgentInfo{Name: name, Namespace: d.namespace, LatestK8sDeploymentInfo: deploymentInfo(d)})
		}
	}
	a.mu.Unlock()
	var resp protocol.ReconcileResponse
	began, took, err := r.call(ctx, "POST", a.server+protocol.ReconcilePath, a.token,
		protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: infos}, &resp)
	if ctx.Err() != nil && err != nil {
		return // the run ended
	}
	configs := 0
	if err == nil {
		a.mu.Lock()
		for _, w := range resp.WorkspaceRailsInfos {
			d := a.ws[w.Name]
			if d == nil {
				err = fmt.Errorf("agent %s: answered about workspace %s, which it does not have", a.name, w.Name)
				break
			}
			if w.ConfigToApply != "" {
				configs++
				d.running = w.DesiredState == string(workspace.Running)
				d.rv++
				d.echoed = false
				continue
			}
			if w.DeploymentResourceVersion == fmt.Sprint(d.rv) {
				d.echoed = true
			}
		}
		a.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !began {
		return
	}
	if err != nil {
		r.recErrs++
		if r.firstRecErr == "" {
			r.firstRecErr = err.Error()
		}
		return
	}
	r.rec.samples = append(r.rec.samples, took)
	r.answered += len(resp.WorkspaceRailsInfos)
	r.configs += configs
}

// change toggles a workspace's desired state between Running and Stopped, as its owner.
func (r *run) change(ctx context.Context, w *userWorkspace) {
	w.mu.Lock()
	defer w.mu.Unlock()
	to := workspace.Running
	if w.running {
		to = workspace.Stopped
	}
	var out sdk.Workspace
	began, took, err := r.call(ctx, "PATCH", w.server+"/api/v1/workspaces/"+url.PathEscape(w.ref), w.token,
		sdk.UpdateWorkspaceRequest{DesiredState: string(to)}, &out)
	if ctx.Err() != nil && err != nil {
		return
	}
	if err == nil {
		w.running = !w.running
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !began {
		return
	}
	if err != nil {
		r.userErrs++
		if r.firstUsr == "" {
			r.firstUsr = err.Error()
		}
		return
	}
	r.user.samples = append(r.user.samples, took)
}

// deploymentInfo is the Deployment a simulated cluster holds: settled in the state last applied.
func deploymentInfo(d *deployment) *protocol.DeploymentInfo {
	info := &protocol.DeploymentInfo{Metadata: protocol.DeploymentMetadata{ResourceVersion: fmt.Sprint(d.rv)}}
	cond := func(typ, reason string) protocol.DeploymentCondition {
		return protocol.DeploymentCondition{Type: typ, Status: "True", Reason: reason}
	}
	if d.running {
		one := int32(1)
		info.Spec = &protocol.DeploymentSpec{Replicas: &one}
		info.Status = &protocol.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1,
			Conditions: []protocol.DeploymentCondition{cond("Available", "MinimumReplicasAvailable"), cond("Progressing", "NewReplicaSetAvailable")}}
		return info
	}
	zero := int32(0)
	info.Spec = &protocol.DeploymentSpec{Replicas: &zero}
	info.Status = &protocol.DeploymentStatus{
		Conditions: []protocol.DeploymentCondition{cond("Available", "MinimumReplicasAvailable"), cond("Progressing", "NewReplicaSetAvailable")}}
	return info
}

// parallel runs fn for 0..n-1, at most width at once, and returns the first error.
func parallel(ctx context.Context, n, width int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

// call sends one API request with a JSON body and decodes the JSON answer into out. It says
// whether the request began in the measured window, and how long it took.
func (r *run) call(ctx context.Context, method, target, token string, in, out any) (began bool, took time.Duration, err error) {
	body, err := json.Marshal(in)
	if err != nil {
		return false, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return false, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	r.mu.Lock()
	began = r.measuring
	r.mu.Unlock()
	start := time.Now()
	resp, err := r.client.Do(req)
	if err != nil {
		return began, 0, fmt.Errorf("%s %s: %w", method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	took = time.Since(start)
	if err != nil {
		return began, took, fmt.Errorf("%s %s: read the answer: %w", method, req.URL.Path, err)
	}
	if resp.StatusCode/100 != 2 {
		return began, took, fmt.Errorf("%s %s: %s: %s", method, req.URL.Path, resp.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return began, took, fmt.Errorf("%s %s: decode the answer: %w", method, req.URL.Path, err)
	}
	return began, took, nil
}

// ProcCPU returns a function that reads the CPU time (user + system) process pid used so far, from
// /proc/<pid>/stat (Linux).
func ProcCPU(pid int) func() (time.Duration, error) {
	return func() (time.Duration, error) { return procCPU(pid) }
}

// ProcTreeCPU is ProcCPU of a process and its children, those alive and those it waited for
// (Postgres: the postmaster and its backends, including the sessions that ended).
func ProcTreeCPU(pid int) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		fields, err := procStat(pid)
		if err != nil {
			return 0, err
		}
		total, err := ticks(pid, fields, 11, 12, 13, 14) // utime, stime, cutime, cstime
		if err != nil {
			return 0, err
		}
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return 0, err
		}
		for _, e := range entries {
			child, err := strconv.Atoi(e.Name())
			if err != nil || child == pid {
				continue
			}
			fields, err := procStat(child)
			if err != nil || fields[1] != strconv.Itoa(pid) { // gone, or not a child
				continue
			}
			if d, err := ticks(child, fields, 11, 12); err == nil {
				total += d
			}
		}
		return total, nil
	}
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// procStat returns the fields of /proc/<pid>/stat after the command: state is [0], ppid [1],
// utime [11], stime [12], cutime [13], cstime [14].
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 15 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	return fields, nil
}

// ticks sums the given fields of a process's stat, in clock ticks, as a duration.
func ticks(pid int, fields []string, at ...int) (time.Duration, error) {
	var sum int64
	for _, i := range at {
		v, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		sum += v
	}
	return time.Duration(sum) * time.Second / clockTicks, nil
}

func procCPU(pid int) (time.Duration, error) {
	fields, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	return ticks(pid, fields, 11, 12)
}
