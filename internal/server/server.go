// Package server is `hangar server`'s HTTP side: the user API, the agent reconcile endpoint, health
// and metrics. Handlers are thin: they authenticate, decode, call the domain (workspace, reconcile,
// devfile) and the store, and encode. Authorization happens in one place (authUser/authAgent) and
// fails closed.
package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/hangar-dev/hangar/internal/audit"
	"github.com/hangar-dev/hangar/internal/autobuild"
	"github.com/hangar-dev/hangar/internal/backend"
	"github.com/hangar-dev/hangar/internal/backend/kube"
	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/errs"
	"github.com/hangar-dev/hangar/internal/externalauth"
	"github.com/hangar-dev/hangar/internal/gitssh"
	"github.com/hangar-dev/hangar/internal/prebuilds"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/tracing"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Options configure a Server.
type Options struct {
	Store  store.Store
	Clock  clock.Clock
	Logger *slog.Logger
	// After starts the timer of an agent's wait (GET /api/v1/agent/wait) once it blocks; default
	// time.After. Tests inject one they fire at will, and learn from its call that the wait blocks.
	After func(time.Duration) <-chan time.Time
	// Builder runs the Terraform backend (default: one over Store, Clock and Logger).
	Builder *tfbackend.Service
	// Kube is the Kubernetes backend's service (default: one over Store).
	Kube *kube.Service
	// RecheckInterval is how often open connections of Terraform workspaces' helpers and of their
	// users are checked again (DefaultConnRecheckInterval); RecheckAfter makes its timers (default
	// time.After; tests fire their own).
	RecheckInterval time.Duration
	RecheckAfter    func(time.Duration) <-chan time.Time
	// ReplicaID names this server process among replicas sharing a store (default: the host name
	// and a random suffix): the helpers of Terraform workspaces connected to it are recorded under
	// it.
	ReplicaID string
	// RelayURL is this replica's URL as the other replicas reach it ("": it takes no relayed
	// connections; relay.go).
	RelayURL string
	// HelperTokenKeys, when set, give the helpers of Kubernetes workspaces tokens
	// (workspace.KubeHelperToken under the first key; any of them checks one: a rotation puts a new
	// key first; every replica must have the same keys) and HelperURL() as the server's URL, to ask
	// for their owner's git credentials. None: they get neither.
	HelperTokenKeys [][]byte
	HelperURL       func() string
	// Apps configures the serving of Terraform workspaces' apps (apps.go); its zero value serves
	// none.
	Apps AppsOptions
	// AuditRetention is how long audit entries are kept (0: forever); AuditRetention().Run
	// enforces it.
	AuditRetention time.Duration
	// Hardening: the proxies whose X-Forwarded-For is believed, the failed-authentication rate
	// limit and the caps on long-polls and streams (limits.go; zero values: the defaults).
	TrustedProxies []netip.Prefix
	AuthLimit      AuthLimit
	StreamLimits   StreamLimits
	// OIDC configures sign-in through an OpenID Connect provider (oidc.go); nil: none.
	OIDC *OIDCOptions
	// ExternalAuth links users to forges and hands their tokens to git (externalauth.go); nil:
	// no forge is configured.
	ExternalAuth *externalauth.Service
	// GitSSH keeps users' git SSH keys and signs for their workspaces (gitssh.go); nil: the
	// server has no key file to seal them with, and refuses.
	GitSSH *gitssh.Service
	// HeartbeatAfter makes the timers of the live workspace stream's heartbeats (events.go;
	// default time.After; tests fire their own).
	HeartbeatAfter func(time.Duration) <-chan time.Time
	// TokenLifetime is a new API token's lifetime when its request names none
	// (DefaultTokenLifetime); MaxTokenLifetime bounds what a request may ask
	// (DefaultMaxTokenLifetime).
	TokenLifetime, MaxTokenLifetime time.Duration
}

// Server serves Hangar's HTTP API.
type Server struct {
	store   store.Store
	clock   clock.Clock
	log     *slog.Logger
	metrics *metrics
	ops     *opsMetrics // httpmetrics.go
	kube    *kube.Service
	// helperTokenKeys check the tokens of Kubernetes workspaces' helpers (Options.HelperTokenKeys).
	helperTokenKeys [][]byte
	gitSSH          *gitssh.Service
	mux             *http.ServeMux
	after           func(time.Duration) <-chan time.Time
	builder         *tfbackend.Service
	// backends sends desired-state changes to the service of each workspace's backend.
	backends backend.Router
	// lifecycle is the lifecycle executor over backends (run by Run; tests Tick it).
	lifecycle *autobuild.Executor
	// auditor records the actions made through the API and by the executor (audit.go);
	// retention bounds what it keeps.
	auditor   *audit.Recorder
	retention audit.Retention
	// prebuilds is the prebuild reconciler (its Run is a background loop; tests Tick it).
	prebuilds *prebuilds.Reconciler

	// agents are the Terraform workspaces' helpers connected to this process.
	agents agentRegistry
	// metadata holds the workspaces' latest metadata reports (metadata.go).
	metadata     metadataCache
	recheck      time.Duration
	recheckAfter func(time.Duration) <-chan time.Time
	replica      string

	relayURL       string
	relayTransport *http.Transport

	// apps serves Terraform workspaces' apps on their own hosts (nil: none).
	apps *apps

	// oidc is the OpenID Connect provider users sign in with (nil: none).
	oidc *oidcSignIn
	// extAuth is the forges users link (nil: none).
	extAuth *externalauth.Service

	// csrf guards the browser's form posts (sign-in, sign-out).
	csrf *http.CrossOriginProtection

	// seen throttles the records of agents' calls (agentseen.go).
	seen seenThrottle
	// heartbeatAfter times the live workspace stream's heartbeats (events.go).
	heartbeatAfter func(time.Duration) <-chan time.Time
	// tokenDefault and tokenMax are the lifetimes of new API tokens (tokens.go).
	tokenDefault, tokenMax time.Duration

	shutdownMu sync.Mutex
	shutdowns  map[*http.Server]chan struct{} // see shutdownOf

	// trustedProxies, authFailures and streams: limits.go.
	trustedProxies []netip.Prefix
	authFailures   *authLimiter
	streams        *streamLimiter
	// stateBodies bounds the state pushes' bodies in flight (bodies.go).
	stateBodies *bodyLimiter
}

// New returns a server.
func New(opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if opts.RecheckInterval <= 0 {
		opts.RecheckInterval = DefaultConnRecheckInterval
	}
	if opts.RecheckAfter == nil {
		opts.RecheckAfter = time.After
	}
	if opts.ReplicaID == "" {
		host, _ := os.Hostname()
		opts.ReplicaID = host + "/" + uuid.NewString()[:8]
	}
	if opts.TokenLifetime <= 0 {
		opts.TokenLifetime = DefaultTokenLifetime
	}
	if opts.MaxTokenLifetime <= 0 {
		opts.MaxTokenLifetime = DefaultMaxTokenLifetime
	}
	if opts.Builder == nil {
		opts.Builder = tfbackend.New(tfbackend.Options{Store: opts.Store, Clock: opts.Clock, Logger: opts.Logger})
	}
	if opts.Kube == nil {
		opts.Kube = kube.New(opts.Store, opts.Clock, opts.Logger)
		if len(opts.HelperTokenKeys) > 0 && opts.HelperURL != nil {
			opts.Kube.SetHelperTokens(opts.HelperTokenKeys[0], opts.HelperURL, opts.ExternalAuth != nil)
		}
	}
	s := &Server{store: opts.Store, clock: opts.Clock, log: opts.Logger, kube: opts.Kube, after: opts.After,
		builder: opts.Builder, shutdowns: map[*http.Server]chan struct{}{}, csrf: http.NewCrossOriginProtection(),
		agents: agentRegistry{live: map[string]*agentConn{}}, recheck: opts.RecheckInterval, recheckAfter: opts.RecheckAfter, replica: opts.ReplicaID}
	s.tokenDefault, s.tokenMax = opts.TokenLifetime, opts.MaxTokenLifetime
	s.helperTokenKeys = opts.HelperTokenKeys
	s.gitSSH = opts.GitSSH
	s.backends = backend.Router{Store: opts.Store, Kubernetes: opts.Kube, Terraform: opts.Builder}
	s.metrics = newMetrics(opts.Store, opts.Builder, opts.Clock.Now)
	s.ops = newOpsMetrics(s.metrics.reg, opts.Store)
	s.auditor = &audit.Recorder{W: opts.Store, Now: opts.Clock.Now, Log: opts.Logger.With("component", "audit")}
	s.retention = audit.Retention{Store: opts.Store, Now: opts.Clock.Now, Keep: opts.AuditRetention, Log: opts.Logger.With("component", "audit")}
	s.lifecycle = &autobuild.Executor{Store: opts.Store, Backends: s.backends, Clock: opts.Clock, Log: opts.Logger.With("component", "lifecycle"),
		Observe: s.metrics.observeLifecycle, Audit: s.auditor}
	s.prebuilds = &prebuilds.Reconciler{Store: opts.Store, Builder: opts.Builder, Clock: opts.Clock, Log: opts.Logger.With("component", "prebuilds"),
		Replica: opts.ReplicaID, Created: s.metrics.observePrebuildCreated, Audit: s.auditor}
	s.relayURL, s.relayTransport = opts.RelayURL, newRelayTransport()
	s.heartbeatAfter = opts.HeartbeatAfter
	if s.heartbeatAfter == nil {
		s.heartbeatAfter = time.After
	}
	s.apps = s.newApps(opts.Apps)
	s.trustedProxies, s.streams = opts.TrustedProxies, newStreamLimiter(opts.StreamLimits)
	s.stateBodies = newBodyLimiter(BodyBudgetBytes)
	s.authFailures = newAuthLimiter(opts.AuthLimit, opts.Clock.Now, opts.Logger.With("component", "limits"))
	s.oidc = newOIDCSignIn(opts.OIDC)
	s.extAuth = opts.ExternalAuth
	s.mux = http.NewServeMux()
	s.routes()
	return s
}

// Backends returns the services that change workspaces, by backend.
func (s *Server) Backends() backend.Router { return s.backends }

// Lifecycle returns the lifecycle executor, which changes workspaces over Backends as their
// schedules and policies say (its Run is the server's background loop; tests call Tick).
func (s *Server) Lifecycle() *autobuild.Executor { return s.lifecycle }

// AuditRetention returns the retention of the audit log (its Run is a background loop of the
// server; tests call Prune).
func (s *Server) AuditRetention() audit.Retention { return s.retention }

// Prebuilds returns the prebuild reconciler, which keeps the presets' pools of prebuilt workspaces
// (its Run is the server's background loop; tests call Tick).
func (s *Server) Prebuilds() *prebuilds.Reconciler { return s.prebuilds }

// Handler returns the root handler (traced when tracing is on: internal/tracing).
func (s *Server) Handler() http.Handler {
	return tracing.Handler(s.instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.apps.serves(r) {
			// A workspace's app: never the server's own pages or API, which that workspace's
			// pages could otherwise call as the same origin.
			release, err := s.openStream(w, r, "", 0) // an app's request may be a download, a WebSocket
			if err != nil {
				s.fail(w, r, err)
				return
			}
			defer release()
			if c, ok := s.appsElsewhere(r); ok {
				s.relay(w, r, c, true)
				return
			}
			s.apps.handler.ServeHTTP(w, r)
			return
		}
		if w = s.harden(w, r); w == nil {
			return // headers.go
		}
		// No name or parameter of the API may hold a NUL character, and Postgres refuses them in
		// text: answer the request here instead of with a database error.
		if strings.IndexByte(r.URL.Path, 0) >= 0 || strings.IndexByte(r.URL.RawQuery, 0) >= 0 || strings.Contains(r.URL.RawQuery, "%00") {
			s.fail(w, r, errBadRequest("invalid request", sdk.Validation{Field: "path", Detail: "must not contain a NUL character"}))
			return
		}
		s.mux.ServeHTTP(w, r)
	})))
}

type userHandler func(w http.ResponseWriter, r *http.Request, u workspace.User) error
type agentHandler func(w http.ResponseWriter, r *http.Request, a workspace.Agent) error

// Route is one endpoint the server serves.
type Route struct {
	Method, Pattern string
}

// Routes lists the API endpoints, for the OpenAPI test: each must be documented.
func (s *Server) Routes() []Route {
	out := make([]Route, 0, len(s.routeTable()))
	for _, r := range s.routeTable() {
		out = append(out, Route{Method: r.method, Pattern: r.pattern})
	}
	return out
}

type routeEntry struct {
	method, pattern string
	handler         http.Handler
}

func (s *Server) routeTable() []routeEntry {
	return []routeEntry{
		{"GET", "/healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })},
		{"GET", "/readyz", http.HandlerFunc(s.readyz)},
		{"GET", "/metrics", s.metrics.handler()},
		{"GET", "/api/v1/openapi.yaml", http.HandlerFunc(s.openapi)},

		{"POST", "/api/v1/agent/reconcile", s.authAgent(s.reconcile)},
		{"GET", "/api/v1/agent/info", s.authAgent(s.agentInfo)},
		{"GET", "/api/v1/agent/wait", s.authAgent(s.wait)},
		{"GET", protocol.ProxyRevocationsPath, s.authAgent(s.proxyRevocations)},

		{"POST", protocol.ProxyExchangePath, s.authAgent(s.proxyExchange)},
		{"POST", protocol.ProxyCheckPath, s.authAgent(s.proxyCheck)},
		{"POST", protocol.ProxySSHCheckPath, s.authAgent(s.proxySSHCheck)},
		{"POST", protocol.ProxyActivityPath, s.authAgent(s.proxyActivity)},
		{"GET", "/signin", http.HandlerFunc(s.signinPage)},
		{"POST", "/signin", s.csrf.Handler(http.HandlerFunc(s.signin))},
		{"POST", "/signout", s.csrf.Handler(http.HandlerFunc(s.signout))},
		{"GET", protocol.ProxyAuthorizePath, http.HandlerFunc(s.proxyAuthorize)},
		{"GET", OIDCLoginPath, http.HandlerFunc(s.oidcLogin)},
		{"GET", OIDCCallbackPath, http.HandlerFunc(s.oidcCallback)},
		{"GET", OIDCLogoutPath, http.HandlerFunc(s.oidcLogout)},
		{"GET", OIDCSignedOutPath, http.HandlerFunc(s.oidcSignedOut)},
		{"GET", ExternalAuthCallbackPath, http.HandlerFunc(s.externalAuthCallback)},

		{"GET", "/api/v1/users/me", s.authUser(s.me)},
		{"PATCH", "/api/v1/users/me", s.authUser(s.updateProfile)},
		{"GET", "/api/v1/users/me/ssh-keys", s.authUser(s.listSSHKeys)},
		{"POST", "/api/v1/users/me/ssh-keys", s.authUser(s.addSSHKey)},
		{"DELETE", "/api/v1/users/me/ssh-keys/{key}", s.authUser(s.removeSSHKey)},
		{"GET", "/api/v1/users/me/gitssh", s.authUser(s.gitSSHKey)},
		{"POST", "/api/v1/users/me/gitssh/rotate", s.authUser(s.rotateGitSSHKey)},
		{"GET", "/api/v1/external-auth", s.authUser(s.listExternalAuth)},
		{"POST", "/api/v1/external-auth/{id}/link", s.authUser(s.linkExternalAuth)},
		{"DELETE", "/api/v1/external-auth/{id}", s.authUser(s.unlinkExternalAuth)},
		{"POST", "/api/v1/users", s.authUser(s.adminOnly(s.createUser))},
		{"GET", "/api/v1/users", s.authUser(s.adminOnly(s.listUsers))},
		{"PATCH", "/api/v1/users/{username}", s.authUser(s.adminOnly(s.updateUser))},
		{"DELETE", "/api/v1/users/{username}", s.authUser(s.adminOnly(s.deleteUser))},
		{"POST", "/api/v1/users/{username}/token", s.authUser(s.rotateToken)},
		{"POST", "/api/v1/tokens", s.authUser(s.createToken)},
		{"GET", "/api/v1/tokens", s.authUser(s.listTokens)},
		{"DELETE", "/api/v1/tokens/{token}", s.authUser(s.revokeToken)},
		{"POST", "/api/v1/agents", s.authUser(s.adminOnly(s.createAgent))},
		{"GET", "/api/v1/agents", s.authUser(s.listAgents)},
		{"PATCH", "/api/v1/agents/{name}", s.authUser(s.adminOnly(s.updateAgent))},
		{"POST", "/api/v1/agents/{name}/token", s.authUser(s.adminOnly(s.agentToken))},
		{"DELETE", "/api/v1/agents/{name}/token", s.authUser(s.adminOnly(s.agentToken))},
		{"GET", "/api/v1/audit", s.authUser(s.adminOnly(s.listAudit))},
		{"POST", "/api/v1/workspaces", s.authUser(s.createWorkspace)},
		{"GET", "/api/v1/workspaces", s.authUser(s.listWorkspaces)},
		{"GET", "/api/v1/workspaces/events", s.authUser(s.workspaceEvents)},
		{"GET", "/api/v1/workspaces/{name}", s.authUser(s.getWorkspace)},
		{"PATCH", "/api/v1/workspaces/{name}", s.authUser(s.updateWorkspace)},
		{"GET", "/api/v1/workspaces/{name}/ssh", s.authUser(s.workspaceSSH)},
		{"PUT", "/api/v1/workspaces/{name}/schedule", s.authUser(s.setSchedule)},
		{"POST", "/api/v1/workspaces/{name}/update", s.authUser(s.updateWorkspaceVersion)},
		{"GET", protocol.WorkspaceAgentConnectPath, http.HandlerFunc(s.workspaceAgentConnect)},
		{"POST", protocol.GitCredentialsPath, http.HandlerFunc(s.gitCredentials)},
		{"GET", protocol.GitSSHKeyPath, http.HandlerFunc(s.helperGitSSHKey)},
		{"POST", protocol.GitSSHSignPath, http.HandlerFunc(s.helperGitSSHSign)},
		{"PUT", protocol.DotfilesStatusPath, http.HandlerFunc(s.helperDotfiles)},
		{"PUT", protocol.StartupStepPath, http.HandlerFunc(s.helperStartupStep)},
		{"PUT", protocol.MetadataPath, http.HandlerFunc(s.helperMetadata)},

		{"POST", "/api/v1/templates/{name}/versions", s.authUser(s.adminOnly(s.pushTemplateVersion))},
		{"GET", "/api/v1/templates/{name}/versions", s.authUser(s.listTemplateVersions)},
		{"POST", "/api/v1/templates/{name}/versions/{number}/promote", s.authUser(s.adminOnly(s.promoteTemplateVersion))},
		{"GET", "/api/v1/templates/{name}/versions/{number}/archive", s.authUser(s.adminOnly(s.pullTemplateVersion))},
		{"GET", "/api/v1/templates", s.authUser(s.listTemplates)},
		{"GET", "/api/v1/templates/{name}", s.authUser(s.getTemplate)},
		{"DELETE", "/api/v1/templates/{name}", s.authUser(s.adminOnly(s.deleteTemplate))},
		{"PUT", "/api/v1/templates/{name}/lifecycle", s.authUser(s.adminOnly(s.setTemplateLifecycle))},
		{"GET", "/api/v1/templates/{name}/presets", s.authUser(s.listPresets)},
		{"PUT", "/api/v1/templates/{name}/presets/{preset}", s.authUser(s.adminOnly(s.putPreset))},
		{"DELETE", "/api/v1/templates/{name}/presets/{preset}", s.authUser(s.adminOnly(s.deletePreset))},
		{"POST", "/api/v1/workspaces/{name}/builds", s.authUser(s.createBuild)},
		{"GET", "/api/v1/workspaces/{name}/builds", s.authUser(s.listBuilds)},
		{"GET", "/api/v1/workspaces/{name}/builds/{number}", s.authUser(s.getBuild)},
		{"POST", "/api/v1/workspaces/{name}/builds/{number}/cancel", s.authUser(s.cancelBuild)},
		{"GET", "/api/v1/workspaces/{name}/builds/{number}/logs", s.authUser(s.buildLogs)},
		{"GET", "/api/v1/workspaces/{name}/state", s.authUser(s.pullState)},
		{"PUT", "/api/v1/workspaces/{name}/state", s.authUser(s.pushState)},

		{"POST", "/api/v1/provisioners", s.authUser(s.adminOnly(s.createProvisioner))},
		{"GET", "/api/v1/provisioners", s.authUser(s.adminOnly(s.listProvisioners))},
		{"POST", "/api/v1/provisioners/{name}/token", s.authUser(s.adminOnly(s.provisionerToken))},
		{"DELETE", "/api/v1/provisioners/{name}/token", s.authUser(s.adminOnly(s.provisionerToken))},
		{"POST", protocol.ProvisionerAcquirePath, s.authProvisioner(s.provisionerAcquire)},
		{"POST", protocol.ProvisionerHeartbeatPath, s.authProvisioner(s.provisionerHeartbeat)},
		{"POST", protocol.ProvisionerLogsPath, s.authProvisioner(s.provisionerLogs)},
		{"POST", protocol.ProvisionerFinishPath, s.authProvisioner(s.provisionerFinish)},
	}
}

func (s *Server) routes() {
	for _, r := range s.routeTable() {
		s.mux.Handle(r.method+" "+r.pattern, r.handler)
	}
	s.webRoutes() // the web UI's pages and assets (web.go)
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, errCode(errs.UnknownEndpoint, fmt.Sprintf("no API endpoint %s %s", r.Method, r.URL.Path), ""))
	})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		s.log.Warn("readiness check failed", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "database unavailable"})
		return
	}
	writeJSON(w, 200, map[string]string{"status": "ok"})
}

// fail writes err as an API error; 5xx are logged with their detail.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The client went away (a provisioner ending its heartbeat long-poll when its job ends, a
		// closed CLI): nobody reads an answer, and nothing failed.
		s.log.Debug("client went away", "method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	status, body := statusOf(err)
	if status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	} else {
		s.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	writeJSON(w, status, body)
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(h, "Bearer ")
	token = strings.TrimSpace(token)
	return token, ok && token != ""
}

// HashToken is how tokens are stored: only their SHA-256.
func HashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// NewToken returns a new random token with a prefix saying what it is for.
func NewToken(prefix string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

const (
	userTokenPrefix  = "hgu_"
	agentTokenPrefix = "hga_"
)

func (s *Server) authUser(h userHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		if !ok {
			s.authBrowser(w, r, h) // the web UI's session cookie (browserauth.go)
			return
		}
		u, t, err := s.userByToken(r.Context(), token)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), tokenCtxKey{}, t))
		if err := h(w, r, u); err != nil {
			s.fail(w, r, err)
		}
	}
}

func (s *Server) adminOnly(h userHandler) userHandler {
	return func(w http.ResponseWriter, r *http.Request, u workspace.User) error {
		if !u.Admin {
			err := errForbidden("only an admin may do this")
			if r.Method != http.MethodGet {
				// A refused attempt at an admin's action is recorded: who tried what.
				s.auditor.Record(r.Context(), actorOf(u), audit.Forbidden, audit.Target{Name: r.Method + " " + r.URL.Path}, auditErr(err),
					map[string]any{"route": r.Pattern})
			}
			return err
		}
		return h(w, r, u)
	}
}

func (s *Server) authAgent(h agentHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		if !ok {
			s.fail(w, r, errUnauthorized("missing bearer token: send Authorization: Bearer <agent token>"))
			return
		}
		a, err := s.agentByToken(r.Context(), token)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if err := h(w, r, a); err != nil {
			s.fail(w, r, err)
		}
	}
}

// Bootstrap creates the first user, `admin`, when the store has no user, and writes its token to
// <dataDir>/admin-token (mode 0600). It returns the token file's path and whether it created it.
func (s *Server) Bootstrap(ctx context.Context, dataDir string) (string, bool, error) {
	path := filepath.Join(dataDir, "admin-token")
	n, err := s.store.CountUsers(ctx)
	if err != nil {
		return path, false, fmt.Errorf("count users: %w", err)
	}
	if n > 0 {
		return path, false, nil
	}
	token := NewToken(userTokenPrefix)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return path, false, fmt.Errorf("create data directory: %w", err)
	}
	// Write the file first: a token stored in the database but lost on disk would lock the admin out.
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return path, false, fmt.Errorf("write admin token: %w", err)
	}
	// The bootstrap token does not expire: it is the way in of a new installation (revoke it once
	// admins have tokens of their own).
	now := s.clock.Now()
	err = s.store.CreateUserWithToken(ctx, workspace.User{ID: uuid.NewString(), Username: "admin", Admin: true, CreatedAt: now},
		store.APIToken{ID: uuid.NewString(), Name: BootstrapTokenName, Hash: HashToken(token), CreatedAt: now})
	if errors.Is(err, store.ErrConflict) {
		// Another replica bootstrapped at the same moment; its token file is the valid one.
		_ = os.Remove(path)
		return path, false, nil
	}
	if err != nil {
		return path, false, err
	}
	s.log.Info("created the admin user", "token_file", path)
	return path, true, nil
}
