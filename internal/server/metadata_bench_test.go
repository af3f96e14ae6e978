package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// BenchmarkMetadataReports (docs/benchmarks.md, "Inside the workspace: the cost of metadata"): the
// server's cost of 1,000 Kubernetes workspaces' helpers reporting every protocol.MetadataInterval,
// on both stores. One op is one report: PUT protocol.MetadataPath with the workspace's helper
// token through the server's handler (token check, the workspace's row, JSON, recordMetadata and
// its writes), without the network. The fake clock moves 10 ms per report, so 1,000 reports are
// 10 s of simulated time and each workspace reports once per 10 s; run with -benchtime 12000x
// (2 simulated minutes) so that the once-a-minute writes happen a whole number of times.
//
//   - report/connections: the default policy (activity counts connections): the server keeps the
//     report and writes it at most once a minute per workspace;
//   - report/work: the policy's activity is work and every report shows work: the work is
//     written too, at most every 30 s per workspace;
//   - baseline/bad-report: the same report with one invalid item, refused with a 400 after the
//     token, the workspace's row and the JSON decoding: everything a report costs but recording;
//   - baseline/user-get: the owner's GET of the workspace, what the web page asks every 10 s
//     while it shows a running workspace.
//
// Metrics: the process's CPU time per request (getrusage, user + system: the handler, the store
// driver and, on SQLite, the database itself; on Postgres its backends' CPU is pg-cpu-ns/op, read
// from /proc), requests/s on one goroutine (wall), and the store's writes per simulated second
// counted by a wrapper of the store (this test's only: the product is not changed).
func BenchmarkMetadataReports(b *testing.B) {
	for _, engine := range servertest.Engines {
		b.Run(engine, func(b *testing.B) {
			me := seedMetadataBench(b, engine, 1000)
			idle := me.body(b, protocol.Activity{CPUCores: 0.01})
			work := me.body(b, protocol.Activity{CPUCores: 0.6, TopProcess: "go", Matched: "go test ./... (pid 4242)"})
			bad := bytes.Replace(idle, []byte(`"key":"branch"`), []byte(`"key":"Not A Key"`), 1)
			if bytes.Equal(bad, idle) {
				b.Fatal("the bad report is not bad")
			}
			// Every workspace has reported once: each entry is in memory (its alerts and kept
			// report read, its first write done), as on a server that has run a while.
			for i := range me.idle {
				me.report(b, me.idleTokens[i], idle, http.StatusOK)
				me.report(b, me.workTokens[i], work, http.StatusOK)
			}
			me.env.Clock.Advance(10 * time.Second)
			b.Run("report/connections", func(b *testing.B) {
				me.run(b, func(i int) { me.report(b, me.idleTokens[i%len(me.idleTokens)], idle, http.StatusOK) })
			})
			b.Run("report/work", func(b *testing.B) {
				me.run(b, func(i int) { me.report(b, me.workTokens[i%len(me.workTokens)], work, http.StatusOK) })
			})
			b.Run("baseline/bad-report", func(b *testing.B) {
				me.run(b, func(i int) { me.report(b, me.idleTokens[i%len(me.idleTokens)], bad, http.StatusBadRequest) })
			})
			b.Run("baseline/user-get", func(b *testing.B) {
				me.run(b, func(i int) { me.get(b, me.idle[i%len(me.idle)].Name) })
			})
		})
	}
}

// countingStore counts the writes a report can make, and the reads every report makes.
type countingStore struct {
	store.Store
	metadataWrites, workWrites, alertWrites, workspaceReads, agentReads atomic.Int64
}

func (c *countingStore) SetWorkspaceMetadata(ctx context.Context, id string, report []byte, at time.Time) error {
	c.metadataWrites.Add(1)
	return c.Store.SetWorkspaceMetadata(ctx, id, report, at)
}

func (c *countingStore) RecordWork(ctx context.Context, id string, at time.Time, reason string) error {
	c.workWrites.Add(1)
	return c.Store.RecordWork(ctx, id, at, reason)
}

func (c *countingStore) RecordWorkspaceAlert(ctx context.Context, id string, a workspace.Alert) (bool, error) {
	c.alertWrites.Add(1)
	return c.Store.RecordWorkspaceAlert(ctx, id, a)
}

func (c *countingStore) ClearWorkspaceAlert(ctx context.Context, id, kind, subject string, at time.Time) error {
	c.alertWrites.Add(1)
	return c.Store.ClearWorkspaceAlert(ctx, id, kind, subject, at)
}

func (c *countingStore) WorkspaceByID(ctx context.Context, id string) (workspace.Workspace, error) {
	c.workspaceReads.Add(1)
	return c.Store.WorkspaceByID(ctx, id)
}

func (c *countingStore) AgentByName(ctx context.Context, name string) (workspace.Agent, error) {
	c.agentReads.Add(1)
	return c.Store.AgentByName(ctx, name)
}

type metadataBench struct {
	env                    *servertest.Env
	counts                 *countingStore
	devToken               string
	handler                http.Handler
	idle, work             []workspace.Workspace
	idleTokens, workTokens []string
}

// seedMetadataBench starts a server whose store is counted, with two agents of n Running
// workspaces each, owned by one user: "idle" under the default policy, "busy" under a policy
// whose activity is work.
func seedMetadataBench(b *testing.B, engine string, n int) *metadataBench {
	b.Helper()
	me := &metadataBench{}
	env := servertest.NewWith(b, engine, withHelperTokens, func(o *server.Options) {
		me.counts = &countingStore{Store: o.Store}
		o.Store = me.counts
	})
	me.env, me.handler = env, env.Server.Handler()
	ctx := context.Background()
	createAgent(b, env, "idle", nil)
	createAgent(b, env, "busy", map[string]any{"lifecycle": map[string]any{"default_ttl": "1h", "activity": "work",
		"activity_processes": []string{"make", "go test"}}})
	me.devToken = createUser(b, env, "dev")
	owner, err := env.Store.UserByUsername(ctx, "dev")
	if err != nil {
		b.Fatal(err)
	}
	key := []byte("a key of 32 bytes for the tests.") // withHelperTokens's
	now := env.Clock.Now()
	var all []workspace.Workspace
	for _, agentName := range []string{"idle", "busy"} {
		agent, err := env.Store.AgentByName(ctx, agentName)
		if err != nil {
			b.Fatal(err)
		}
		first := agentName + "-00000"
		mustCall(b, env, me.devToken, "POST", "/api/v1/workspaces", map[string]any{"name": first, "agent": agentName}, http.StatusCreated, nil)
		w := stored(b, env, first)
		rows := []workspace.Workspace{w}
		for i := 1; i < n; i++ {
			name := fmt.Sprintf("%s-%05d", agentName, i)
			w := workspace.Workspace{ID: uuid.NewString(), Name: name, OwnerID: owner.ID, OwnerName: owner.Username, AgentID: agent.ID, AgentName: agent.Name,
				Backend: workspace.KindKubernetes, Namespace: "hangar-" + name, Devfile: rows[0].Devfile, DesiredState: workspace.Running,
				ActualState: workspace.CreationRequested, DesiredStateUpdatedAt: now, CreatedAt: now}
			if err := env.Store.CreateWorkspace(ctx, w, -1, -1); err != nil {
				b.Fatal(err)
			}
			rows = append(rows, w)
		}
		tokens := make([]string, len(rows))
		for i, w := range rows {
			tokens[i] = workspace.KubeHelperToken(key, w.ID)
		}
		if agentName == "idle" {
			me.idle, me.idleTokens = rows, tokens
		} else {
			me.work, me.workTokens = rows, tokens
		}
		all = append(all, rows...)
	}
	env.Clock.Advance(time.Minute)
	answered := env.Clock.Now()
	rv := "1"
	for i := range all {
		all[i].ActualState = workspace.Running
		all[i].ActualStateUpdatedAt = &answered
		all[i].RespondedToAgentAt = &answered
		all[i].DeploymentResourceVersion = &rv
	}
	if err := env.Store.UpdateWorkspacesBatch(ctx, all); err != nil {
		b.Fatal(err)
	}
	env.Clock.Advance(time.Minute)
	return me
}

// body is a typical report of an idle workspace's helper: CPU, memory, one volume, one custom
// value, and activity.
func (me *metadataBench) body(b *testing.B, a protocol.Activity) []byte {
	const gib = int64(1) << 30
	j, err := json.Marshal(protocol.MetadataReport{CollectedAt: me.env.Clock.Now(), Resources: protocol.Resources{
		CPU:     &protocol.CPUUsage{UsedCores: 0.02, LimitCores: 2},
		Memory:  &protocol.MemoryUsage{UsedBytes: 300 << 20, LimitBytes: 4 * gib, Threshold: 90},
		Volumes: []protocol.VolumeUsage{{Path: "/projects", UsedBytes: 3 * gib, TotalBytes: 10 * gib, Threshold: 90}},
	}, Items: []protocol.MetadataValue{{Key: "branch", DisplayName: "Branch", Value: "main", CollectedAt: me.env.Clock.Now()}}, Activity: &a})
	if err != nil {
		b.Fatal(err)
	}
	return j
}

func (me *metadataBench) report(b *testing.B, token string, body []byte, want int) {
	req := httptest.NewRequest("PUT", protocol.MetadataPath, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	me.handler.ServeHTTP(rec, req)
	if rec.Code != want {
		b.Fatalf("report: %d %s, want %d", rec.Code, rec.Body.String(), want)
	}
}

func (me *metadataBench) get(b *testing.B, name string) {
	req := httptest.NewRequest("GET", "/api/v1/workspaces/"+name, nil)
	req.Header.Set("Authorization", "Bearer "+me.devToken)
	rec := httptest.NewRecorder()
	me.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"resources"`) {
		b.Fatalf("GET %s: %d %.300s", name, rec.Code, rec.Body.String())
	}
}

// run times b.N requests, the clock moving 10 ms before each, and reports the metrics.
func (me *metadataBench) run(b *testing.B, request func(i int)) {
	c := me.counts
	writes := func() int64 { return c.metadataWrites.Load() + c.workWrites.Load() + c.alertWrites.Load() }
	w0, m0, k0, ws0, a0 := writes(), c.metadataWrites.Load(), c.workWrites.Load(), c.workspaceReads.Load(), c.agentReads.Load()
	pg0 := me.postgresCPU(b, nil)
	cpu0 := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		me.env.Clock.Advance(protocol.MetadataInterval / 1000)
		request(i)
	}
	b.StopTimer()
	cpu := processCPU() - cpu0
	simulated := (time.Duration(b.N) * protocol.MetadataInterval / 1000).Seconds()
	n := float64(b.N)
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/op")
	b.ReportMetric(n/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(float64(writes()-w0)/simulated, "writes/sim-s")
	b.ReportMetric(float64(c.metadataWrites.Load()-m0)/simulated, "metadata-writes/sim-s")
	b.ReportMetric(float64(c.workWrites.Load()-k0)/simulated, "work-writes/sim-s")
	b.ReportMetric(float64(c.workspaceReads.Load()-ws0+c.agentReads.Load()-a0)/n, "counted-reads/op")
	if pg0 != nil {
		b.ReportMetric(float64(me.postgresCPU(b, pg0)[0].Nanoseconds())/n, "pg-cpu-ns/op")
	}
}

// processCPU is the user and system CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// postgresCPU reads the CPU time of the Postgres backends serving this benchmark's database
// (from /proc: the server runs on this machine). With before nil it returns the time of each
// backend, by PID (index 0 unused); else the total since before in [0] (a backend started since
// counts whole). nil on SQLite.
func (me *metadataBench) postgresCPU(b *testing.B, before map[int]time.Duration) map[int]time.Duration {
	if me.env.PostgresURL == "" {
		return nil
	}
	db, err := sql.Open("pgx", me.env.PostgresURL)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	now := map[int]time.Duration{}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatal(err)
		}
		now[pid] = procCPU(pid)
	}
	if before == nil {
		return now
	}
	var total time.Duration
	for pid, t := range now {
		total += t - before[pid]
	}
	return map[int]time.Duration{0: total}
}

// procCPU is a process's user and system time from /proc/PID/stat (in clock ticks of 10 ms).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
