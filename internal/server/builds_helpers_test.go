package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/tfmodule"
)

// The Terraform backend's test kit: a server with a terraform template and a provisioner, and the
// test playing the provisioner over HTTP (no Terraform runs).

// tfModuleSource is the module of these tests: one terraform_data resource per start.
const tfModuleSource = `variable "start_count" {
  type = number
}

resource "terraform_data" "home" {
  count = var.start_count
}
`

// tfModule packs tfModuleSource as a template archive.
func tfModule(t testing.TB) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(tfModuleSource), 0o644); err != nil {
		t.Fatal(err)
	}
	archive, err := tfmodule.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	return archive
}

// tfState is a Terraform state with serial n; its output holds a marker that no log or error body
// may contain.
func tfState(n int) []byte {
	return fmt.Appendf(nil, `{"version":4,"terraform_version":"1.9.8","serial":%d,"lineage":"hangar-test","outputs":{"password":{"value":"state-secret-%d","type":"string","sensitive":true}},"resources":[]}`, n, n)
}

// syncBuffer collects the server's log.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // a value after each write (coalescing), for waitFor
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written == nil {
		s.written = make(chan struct{}, 1)
	}
	select {
	case s.written <- struct{}{}:
	default:
	}
	return s.b.Write(p)
}

// waitFor waits until the log holds one of subs, and returns it.
func (s *syncBuffer) waitFor(t testing.TB, subs ...string) string {
	t.Helper()
	s.mu.Lock()
	if s.written == nil {
		s.written = make(chan struct{}, 1)
	}
	ch := s.written
	s.mu.Unlock()
	deadline := time.After(30 * time.Second) // a bound on a hang, not a timing assertion
	for {
		text := s.String()
		for _, sub := range subs {
			if strings.Contains(text, sub) {
				return sub
			}
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("the log never showed any of %q:\n%s", subs, text)
		}
	}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// tfEnv is a server whose builder the test holds (to reap), with the terraform template "tf"
// pushed, the provisioner "p1" registered, and its log (debug level) captured.
type tfEnv struct {
	*servertest.Env
	Builder *tfbackend.Service
	Log     *syncBuffer
	Archive []byte
	Prov    string // p1's token
}

func newTFEnv(t testing.TB, engine string, opts ...servertest.Option) *tfEnv {
	t.Helper()
	te := &tfEnv{Log: &syncBuffer{}}
	capture := func(o *server.Options) {
		o.Logger = slog.New(slog.NewTextHandler(te.Log, &slog.HandlerOptions{Level: slog.LevelDebug}))
		te.Builder = tfbackend.New(tfbackend.Options{Store: o.Store, Clock: o.Clock, Logger: o.Logger,
			HeartbeatTimeout: 5 * time.Minute, PendingTimeout: 30 * time.Minute})
		o.Builder = te.Builder
	}
	te.Env = servertest.NewWith(t, engine, append([]servertest.Option{capture}, opts...)...)
	te.Archive = tfModule(t)
	var tmpl sdk.Template
	mustCall(t, te.Env, te.AdminToken, "POST", "/api/v1/templates/tf/versions",
		sdk.CreateTemplateVersionRequest{Kind: "terraform", Archive: te.Archive}, http.StatusCreated, &tmpl)
	if tmpl.Kind != "terraform" || tmpl.ActiveVersion != 1 || len(tmpl.Versions) != 1 || !slicesEqual(tmpl.Versions[0].Variables, []string{"start_count"}) {
		t.Fatalf("pushed template %+v", tmpl)
	}
	te.Prov = createProvisioner(t, te.Env, "p1")
	return te
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

// createProvisioner registers a provisioner and returns its token.
func createProvisioner(t testing.TB, env *servertest.Env, name string) string {
	t.Helper()
	var p sdk.Provisioner
	mustCall(t, env, env.AdminToken, "POST", "/api/v1/provisioners", sdk.CreateProvisionerRequest{Name: name}, http.StatusCreated, &p)
	if !strings.HasPrefix(p.Token, "hgp_") {
		t.Fatalf("provisioner token %q", p.Token)
	}
	return p.Token
}

// worker plays one provisioner daemon: a provisioner token and a worker id.
type worker struct {
	t     testing.TB
	env   *servertest.Env
	token string
	id    string
}

func (w worker) post(path, jobID string, body any) (int, []byte) {
	w.t.Helper()
	return call(w.t, w.env, w.token, "POST", strings.Replace(path, "{id}", jobID, 1), body)
}

func (w worker) must(path, jobID string, body, out any) {
	w.t.Helper()
	status, b := w.post(path, jobID, body)
	if status != http.StatusOK {
		w.t.Fatalf("%s by %s: %d %s", path, w.id, status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			w.t.Fatalf("%s: decode %s: %v", path, b, err)
		}
	}
}

// acquire claims a job without waiting; nil if none is pending.
func (w worker) acquire() *protocol.ProvisionerJob {
	w.t.Helper()
	var r protocol.AcquireResponse
	w.must(protocol.ProvisionerAcquirePath, "", protocol.AcquireRequest{WorkerID: w.id}, &r)
	return r.Job
}

// mustAcquire claims the job of build number of workspace ws.
func (w worker) mustAcquire(ws string, number int) *protocol.ProvisionerJob {
	w.t.Helper()
	j := w.acquire()
	if j == nil {
		w.t.Fatalf("no job to acquire, want build #%d of %s", number, ws)
	}
	if j.WorkspaceName != ws || j.BuildNumber != number {
		w.t.Fatalf("acquired build #%d of %s, want #%d of %s", j.BuildNumber, j.WorkspaceName, number, ws)
	}
	return j
}

// heartbeat reports without waiting and returns whether the build is canceled.
func (w worker) heartbeat(jobID string) bool {
	w.t.Helper()
	var r protocol.HeartbeatResponse
	w.must(protocol.ProvisionerHeartbeatPath, jobID, protocol.HeartbeatRequest{WorkerID: w.id}, &r)
	return r.Canceled
}

func (w worker) log(jobID string, outputs ...string) {
	w.t.Helper()
	lines := make([]protocol.LogLine, len(outputs))
	for i, o := range outputs {
		lines[i] = protocol.LogLine{Stage: "Applying", Level: "info", Output: o}
	}
	var r map[string]int
	w.must(protocol.ProvisionerLogsPath, jobID, protocol.LogsRequest{WorkerID: w.id, Lines: lines}, &r)
	if r["appended"] != len(outputs) {
		w.t.Fatalf("logs answered %v, want %d appended", r, len(outputs))
	}
}

func (w worker) finish(jobID string, f protocol.FinishRequest) {
	w.t.Helper()
	f.WorkerID = w.id
	w.must(protocol.ProvisionerFinishPath, jobID, f, nil)
}

// run acquires the job of build number of ws and finishes it with f.
func (w worker) run(ws string, number int, f protocol.FinishRequest) *protocol.ProvisionerJob {
	w.t.Helper()
	j := w.mustAcquire(ws, number)
	w.finish(j.ID, f)
	return j
}

func getBuild(t testing.TB, env *servertest.Env, token, ws string, number int) sdk.Build {
	t.Helper()
	seg := "latest"
	if number > 0 {
		seg = strconv.Itoa(number)
	}
	var b sdk.Build
	mustCall(t, env, token, "GET", "/api/v1/workspaces/"+ws+"/builds/"+seg, nil, http.StatusOK, &b)
	return b
}

func listBuilds(t testing.TB, env *servertest.Env, token, ws string) []sdk.Build {
	t.Helper()
	var bs []sdk.Build
	mustCall(t, env, token, "GET", "/api/v1/workspaces/"+ws+"/builds", nil, http.StatusOK, &bs)
	return bs
}

func newBuild(t testing.TB, env *servertest.Env, token, ws string, req sdk.CreateBuildRequest) sdk.Build {
	t.Helper()
	var b sdk.Build
	mustCall(t, env, token, "POST", "/api/v1/workspaces/"+ws+"/builds", req, http.StatusCreated, &b)
	return b
}

func getWorkspace(t testing.TB, env *servertest.Env, token, ws string) sdk.Workspace {
	t.Helper()
	var w sdk.Workspace
	mustCall(t, env, token, "GET", "/api/v1/workspaces/"+ws, nil, http.StatusOK, &w)
	return w
}

// send is call with a content type of the caller's choice (none if empty) and a streamed body; it
// returns the status, the headers and the body.
func send(t testing.TB, env *servertest.Env, token, method, path, contentType string, body io.Reader) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, env.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

// pullState reads GET /workspaces/{ws}/state<query>: the status, the state (or error body) and the
// build number the server names.
func pullState(t testing.TB, env *servertest.Env, token, ws, query string) (int, []byte, string) {
	t.Helper()
	status, h, b := send(t, env, token, "GET", "/api/v1/workspaces/"+ws+"/state"+query, "", nil)
	return status, b, h.Get("Hangar-Build-Number")
}

// wantState fails unless the state of ws (query selects the build) is want, of build number.
func wantState(t testing.TB, env *servertest.Env, token, ws, query string, want []byte, number int) {
	t.Helper()
	status, b, n := pullState(t, env, token, ws, query)
	if status != http.StatusOK || !bytes.Equal(b, want) || n != strconv.Itoa(number) {
		t.Fatalf("state of %s%s: %d build %q %s, want 200 build %d %s", ws, query, status, n, b, number, want)
	}
}

// logLines reads a build's log (number 0: the latest; query: ?after=...&follow=...) as lines.
func logLines(t testing.TB, env *servertest.Env, token, ws string, number int, query string) []sdk.BuildLog {
	t.Helper()
	seg := "latest"
	if number > 0 {
		seg = strconv.Itoa(number)
	}
	status, h, b := send(t, env, token, "GET", fmt.Sprintf("/api/v1/workspaces/%s/builds/%s/logs%s", ws, seg, query), "", nil)
	if status != http.StatusOK || h.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("logs of %s #%d%s: %d %s %s", ws, number, query, status, h.Get("Content-Type"), b)
	}
	var out []sdk.BuildLog
	for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var l sdk.BuildLog
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, l)
	}
	return out
}

// wantError fails unless status and body are the API error want (message), with detail containing
// each of details.
func wantError(t testing.TB, what string, status int, body []byte, wantStatus int, message string, details ...string) {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("%s: %d %s, want %d", what, status, body, wantStatus)
	}
	e := apiError(t, body)
	if server.StatusOfCode(e.Code) != status {
		t.Errorf("%s: code %q is not the code of a %d (body %s)", what, e.Code, status, body)
	}
	if message != "" && e.Message != message {
		t.Errorf("%s: message %q, want %q (body %s)", what, e.Message, message, body)
	}
	for _, d := range details {
		if !strings.Contains(e.Detail, d) {
			t.Errorf("%s: detail %q lacks %q", what, e.Detail, d)
		}
	}
}

// wantField fails unless the answer is a 400 with a validation naming field.
func wantField(t testing.TB, what string, status int, body []byte, field string) {
	t.Helper()
	if status != http.StatusBadRequest {
		t.Fatalf("%s: %d %s, want 400 naming %s", what, status, body, field)
	}
	for _, v := range apiError(t, body).Validations {
		if v.Field == field && v.Detail != "" {
			return
		}
	}
	t.Errorf("%s: no validation naming %q: %s", what, field, body)
}

// repeatReader yields n copies of one byte.
type repeatReader struct {
	b byte
	n int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), r.n)
	for i := range p[:k] {
		p[i] = r.b
	}
	r.n -= k
	return int(k), nil
}

// tfArchive packs the files given (name → content) as a module archive.
func tfArchive(t testing.TB, files map[string]string) []byte {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	archive, err := tfmodule.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	return archive
}
