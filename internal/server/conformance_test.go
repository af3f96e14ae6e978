package server_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// The conformance suite runs every scenario table of the seed
// (testdata/workspace-reconciliation-logic.md, a copy of ../shared/seeds/) and of
// testdata/decided-scenarios.md through the real HTTP endpoints, on SQLite and on Postgres, and checks
// every column of every row: the config_to_apply column against the reconcile response, and
// desired_state, actual_state, desired_state_updated_at and responded_to_agent_at against what the
// user API shows after the event.

type scenarioRow struct {
	request                                 string
	config                                  string // Y, N or -
	desired, actual, desiredAt, respondedAt string
}

type scenario struct {
	title string
	rows  []scenarioRow
}

func parseScenarios(t *testing.T, path string) []scenario {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []scenario
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if title, ok := strings.CutPrefix(line, "### "); ok {
			out = append(out, scenario{title: title})
			continue
		}
		if !strings.HasPrefix(line, "|") || strings.Contains(line, "`request`") || strings.Contains(line, ":--") || strings.Contains(line, ":-:") || len(out) == 0 {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 6 {
			t.Fatalf("%s: row with %d cells: %s", path, len(cells), line)
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(strings.ReplaceAll(cells[i], "`", ""))
		}
		last := &out[len(out)-1]
		last.rows = append(last.rows, scenarioRow{cells[0], cells[1], cells[2], cells[3], cells[4], cells[5]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSeedScenarios(t *testing.T) {
	seed := parseScenarios(t, "testdata/workspace-reconciliation-logic.md")
	if len(seed) != 27 {
		t.Fatalf("parsed %d scenario tables from the seed, want 27", len(seed))
	}
	decided := parseScenarios(t, "testdata/decided-scenarios.md")
	all := append(seed, decided...)
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			env := servertest.NewWith(t, engine)
			agentToken := createAgent(t, env, "agent", nil)
			userToken := createUser(t, env, "dev")
			for i, sc := range all {
				t.Run(fmt.Sprintf("%02d %s", i+1, sc.title), func(t *testing.T) {
					runScenario(t, env, agentToken, userToken, fmt.Sprintf("ws-%d", i+1), sc)
				})
			}
		})
	}
}

func clockAt(t *testing.T, hhmm string) time.Time {
	t.Helper()
	tm, err := time.Parse("15:04", hhmm)
	if err != nil {
		t.Fatalf("time %q: %v", hhmm, err)
	}
	return time.Date(2026, 1, 1, tm.Hour(), tm.Minute(), 0, 0, time.UTC)
}

func runScenario(t *testing.T, env *servertest.Env, agentToken, userToken, name string, sc scenario) {
	noUpdateScenario := strings.HasPrefix(sc.title, "No update")
	rv := 100
	lastRV := ""
	var lastEvent time.Time
	for i, row := range sc.rows {
		step := fmt.Sprintf("row %d (%s)", i+1, row.request)
		var resp *protocol.ReconcileResponse
		switch {
		case strings.HasPrefix(row.request, "CURRENT_DB_STATE"):
			if strings.Contains(row.request, "Empty database") {
				continue
			}
			// The table's premise: a workspace whose row holds these values.
			env.Clock.Set(clockAt(t, "04:00"))
			mustCall(t, env, userToken, "POST", "/api/v1/workspaces", map[string]any{"name": name, "agent": "agent"}, http.StatusCreated, nil)
			_, err := env.Store.UpdateWorkspace(t.Context(), store.WorkspaceRef{ID: stored(t, env, name).ID}, func(w workspace.Workspace) (workspace.Workspace, error) {
				w.DesiredState, w.ActualState = workspace.State(row.desired), workspace.State(row.actual)
				w.DesiredStateUpdatedAt = clockAt(t, row.desiredAt)
				r := clockAt(t, row.respondedAt)
				w.RespondedToAgentAt = &r
				if w.ActualState == workspace.Error {
					w.ErrorType, w.ErrorMessage = protocol.ErrorTypeApplier, "earlier apply failed"
				}
				return w, nil
			})
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			lastEvent = clockAt(t, row.respondedAt)
		case strings.HasPrefix(row.request, "USER_ACTION") || strings.HasPrefix(row.request, "User "):
			env.Clock.Set(clockAt(t, row.desiredAt))
			lastEvent = env.Clock.Now()
			text := row.request
			switch {
			case strings.Contains(text, "requested a new workspace"):
				mustCall(t, env, userToken, "POST", "/api/v1/workspaces", map[string]any{"name": name, "agent": "agent"}, http.StatusCreated, nil)
			default:
				desired := map[string]string{"stops": "Stopped", "starts": "Running", "terminates": "Terminated", "restarts": "RestartRequested"}
				var to string
				for verb, st := range desired {
					if strings.Contains(text, "User "+verb) {
						to = st
					}
				}
				if to == "" {
					t.Fatalf("%s: unknown user action", step)
				}
				mustCall(t, env, userToken, "PATCH", "/api/v1/workspaces/"+name, map[string]string{"desired_state": to}, http.StatusOK, nil)
			}
		case strings.HasPrefix(row.request, "AGENT_ACTION"):
			at := lastEvent.Add(time.Minute)
			if row.respondedAt != "" && clockAt(t, row.respondedAt).After(lastEvent) {
				at = clockAt(t, row.respondedAt)
			}
			env.Clock.Set(at)
			lastEvent = at
			req := protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}}
			if reported, ok := strings.CutPrefix(row.request, "AGENT_ACTION - agentk reports it as "); ok {
				reported, _, _ = strings.Cut(reported, ",")
				// The agent names the workspace by its cluster name and namespace.
				info := infoOf(t, env, name)
				switch reported {
				case "Error":
					info.ErrorDetails = &protocol.ErrorDetails{ErrorType: protocol.ErrorTypeApplier, ErrorMessage: "admission webhook denied the request"}
				case "Terminated":
					info.TerminationProgress = protocol.TerminationTerminated
				case "Failing":
					reported = "Failed"
					fallthrough
				default:
					rv++
					info.LatestK8sDeploymentInfo = deploymentIn(reported, rv)
					lastRV = fmt.Sprint(rv)
				}
				req.WorkspaceAgentInfos = append(req.WorkspaceAgentInfos, info)
			} else if !strings.Contains(row.request, "reports no info") {
				t.Fatalf("%s: unknown agent action", step)
			}
			r := reconcileCall(t, env, agentToken, req)
			resp = &r
		default:
			t.Fatalf("%s: unknown request kind", step)
		}

		// What the user API shows after the event: the table's last four columns.
		var ws sdk.Workspace
		mustCall(t, env, userToken, "GET", "/api/v1/workspaces/"+name, nil, http.StatusOK, &ws)
		if ws.DesiredState != row.desired || ws.ActualState != row.actual {
			t.Errorf("%s: desired/actual = %s/%s, want %s/%s", step, ws.DesiredState, ws.ActualState, row.desired, row.actual)
		}
		if got := hhmm(ws.DesiredStateUpdatedAt); got != row.desiredAt {
			t.Errorf("%s: desired_state_updated_at = %s, want %s", step, got, row.desiredAt)
		}
		if got := hhmm(ws.RespondedToAgentAt); got != row.respondedAt {
			t.Errorf("%s: responded_to_agent_at = %s, want %q", step, got, row.respondedAt)
		}

		if resp == nil {
			if row.config != "-" {
				t.Errorf("%s: config column %q on a non-agent row", step, row.config)
			}
			continue
		}
		// The config column, and deployment_resource_version's inclusion, against the response.
		var info *protocol.WorkspaceRailsInfo
		for i := range resp.WorkspaceRailsInfos {
			if resp.WorkspaceRailsInfos[i].Name == stored(t, env, name).KubeName {
				info = &resp.WorkspaceRailsInfos[i]
			}
		}
		if noUpdateScenario {
			if info != nil {
				t.Errorf("%s: workspace is in the response (with deployment_resource_version %q), want it left out", step, info.DeploymentResourceVersion)
			}
			if row.config != "N" {
				t.Errorf("%s: table says config %q", step, row.config)
			}
			continue
		}
		if info == nil {
			t.Fatalf("%s: workspace missing from the response %+v", step, resp.WorkspaceRailsInfos)
		}
		gotConfig := "N"
		if info.ConfigToApply != "" {
			gotConfig = "Y"
			if !strings.Contains(info.ConfigToApply, "kind: Deployment") {
				t.Errorf("%s: config_to_apply has no Deployment:\n%s", step, info.ConfigToApply)
			}
		}
		if gotConfig != row.config {
			t.Errorf("%s: config_to_apply included = %s, want %s", step, gotConfig, row.config)
		}
		if info.DesiredState != row.desired || info.ActualState != row.actual {
			t.Errorf("%s: response desired/actual = %s/%s, want %s/%s", step, info.DesiredState, info.ActualState, row.desired, row.actual)
		}
		if info.DeploymentResourceVersion != lastRV {
			t.Errorf("%s: deployment_resource_version = %q, want %q", step, info.DeploymentResourceVersion, lastRV)
		}
		if row.actual == "Error" {
			if ws.Error == nil || ws.Error.Type != protocol.ErrorTypeApplier || ws.Error.Message == "" {
				t.Errorf("%s: the user sees error %+v, want the applier error", step, ws.Error)
			}
		} else if ws.Error != nil {
			t.Errorf("%s: the user sees error %+v in state %s", step, ws.Error, row.actual)
		}
	}
}

func hhmm(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format("15:04")
}
