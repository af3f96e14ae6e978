package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// call sends a request with a bearer token and returns the status and body.
func call(t testing.TB, env *servertest.Env, token, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, env.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// mustCall is call that fails the test unless the status is want, and decodes the body into out.
func mustCall(t testing.TB, env *servertest.Env, token, method, path string, body any, want int, out any) {
	t.Helper()
	status, b := call(t, env, token, method, path, body)
	if status != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

func apiError(t testing.TB, b []byte) sdk.Error {
	t.Helper()
	var e sdk.Error
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body %s: %v", b, err)
	}
	return e
}

// createAgent registers an agent and returns its token.
func createAgent(t testing.TB, env *servertest.Env, name string, config any) string {
	t.Helper()
	var a sdk.Agent
	body := map[string]any{"name": name}
	if config != nil {
		body["config"] = config
	}
	mustCall(t, env, env.AdminToken, "POST", "/api/v1/agents", body, http.StatusCreated, &a)
	return a.Token
}

// createUser creates a user and returns its token.
func createUser(t testing.TB, env *servertest.Env, name string) string {
	t.Helper()
	var u sdk.User
	mustCall(t, env, env.AdminToken, "POST", "/api/v1/users", map[string]any{"username": name}, http.StatusCreated, &u)
	return u.Token
}

func reconcileCall(t testing.TB, env *servertest.Env, agentToken string, req protocol.ReconcileRequest) protocol.ReconcileResponse {
	t.Helper()
	var resp protocol.ReconcileResponse
	mustCall(t, env, agentToken, "POST", protocol.ReconcilePath, req, http.StatusOK, &resp)
	return resp
}

func int32p(i int32) *int32 { return &i }

// deploymentIn returns the Deployment an agent reports for a workspace in state st, with resource
// version rv, following the anchors' rules (reconcile.DeploymentState).
func deploymentIn(st string, rv int) *protocol.DeploymentInfo {
	d := &protocol.DeploymentInfo{Metadata: protocol.DeploymentMetadata{ResourceVersion: strconv.Itoa(rv)}}
	cond := func(typ, reason string) protocol.DeploymentCondition {
		return protocol.DeploymentCondition{Type: typ, Status: "True", Reason: reason}
	}
	switch st {
	case "Starting":
		d.Spec = &protocol.DeploymentSpec{Replicas: int32p(1)}
		d.Status = &protocol.DeploymentStatus{Replicas: 1, UnavailableReplicas: 1, Conditions: []protocol.DeploymentCondition{
			cond("Available", "MinimumReplicasUnavailable"), cond("Progressing", "NewReplicaSetCreated")}}
	case "Running":
		d.Spec = &protocol.DeploymentSpec{Replicas: int32p(1)}
		d.Status = &protocol.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1, Conditions: []protocol.DeploymentCondition{
			cond("Available", "MinimumReplicasAvailable"), cond("Progressing", "NewReplicaSetAvailable")}}
	case "Stopping":
		d.Spec = &protocol.DeploymentSpec{Replicas: int32p(0)}
		d.Status = &protocol.DeploymentStatus{Replicas: 1, AvailableReplicas: 1, Conditions: []protocol.DeploymentCondition{
			cond("Available", "MinimumReplicasAvailable"), cond("Progressing", "ReplicaSetUpdated")}}
	case "Stopped":
		d.Spec = &protocol.DeploymentSpec{Replicas: int32p(0)}
		d.Status = &protocol.DeploymentStatus{Conditions: []protocol.DeploymentCondition{
			cond("Available", "MinimumReplicasAvailable"), cond("Progressing", "NewReplicaSetAvailable")}}
	case "Failed":
		d.Spec = &protocol.DeploymentSpec{Replicas: int32p(1)}
		d.Status = &protocol.DeploymentStatus{Replicas: 1, UnavailableReplicas: 1, Conditions: []protocol.DeploymentCondition{
			cond("Available", "MinimumReplicasUnavailable"),
			{Type: "Progressing", Status: "False", Reason: "ProgressDeadlineExceeded"}}}
	default:
		panic(fmt.Sprintf("no deployment for state %q", st))
	}
	return d
}

// stored reads the workspace named name that is not Terminated (the newest if all are), whoever
// owns it: tests give each workspace a name of its own unless they test names per owner.
func stored(t testing.TB, env *servertest.Env, name string) workspace.Workspace {
	t.Helper()
	all, err := env.Store.ListWorkspaces(context.Background(), store.ListFilter{Terminated: true})
	if err != nil {
		t.Fatal(err)
	}
	var found *workspace.Workspace
	for i, w := range all {
		if w.Name != name {
			continue
		}
		if found == nil || (found.ActualState == workspace.Terminated && w.ActualState != workspace.Terminated) {
			found = &all[i]
		}
	}
	if found == nil {
		t.Fatalf("no workspace %q is stored", name)
	}
	return *found
}

// infoOf is an agent report about the workspace named name, by its cluster name and namespace.
func infoOf(t testing.TB, env *servertest.Env, name string) protocol.WorkspaceAgentInfo {
	t.Helper()
	w := stored(t, env, name)
	return protocol.WorkspaceAgentInfo{Name: w.KubeName, Namespace: w.Namespace}
}

// withHelperTokens gives a test server a key for Kubernetes helpers' tokens and a URL for them.
func withHelperTokens(o *server.Options) {
	o.HelperTokenKeys = [][]byte{[]byte("a key of 32 bytes for the tests.")}
	o.HelperURL = func() string { return "http://127.0.0.1:1" }
}

// helperTokens reads, from a full reconcile's configs, the helper token of each workspace of the
// agent, by its cluster name.
func helperTokens(t testing.TB, env *servertest.Env, agentToken string) map[string]string {
	t.Helper()
	resp := reconcileCall(t, env, agentToken, protocol.ReconcileRequest{UpdateType: protocol.UpdateFull, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
	tokens := map[string]string{}
	for _, w := range resp.WorkspaceRailsInfos {
		m := regexp.MustCompile(`(?m)^  helper-token: (\S+)$`).FindStringSubmatch(w.ConfigToApply)
		if m == nil {
			t.Fatalf("%s: no helper token", w.Name)
		}
		tokens[w.Name] = m[1]
	}
	return tokens
}
