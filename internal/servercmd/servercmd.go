// Package servercmd is `hangar server`: it reads options (flags, each also an environment variable),
// opens the store (SQLite in the data directory, or Postgres), bootstraps the admin, and serves.
package servercmd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/cmdopt"
	"github.com/hangar-dev/hangar/internal/externalauth"
	"github.com/hangar-dev/hangar/internal/gitssh"
	"github.com/hangar-dev/hangar/internal/logging"
	"github.com/hangar-dev/hangar/internal/provisioner"
	"github.com/hangar-dev/hangar/internal/provisioner/sandbox"
	"github.com/hangar-dev/hangar/internal/provisioner/terraform"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/store"
	"github.com/hangar-dev/hangar/internal/store/postgres"
	"github.com/hangar-dev/hangar/internal/store/sqlite"
	"github.com/hangar-dev/hangar/internal/tfprovider"
	"github.com/hangar-dev/hangar/internal/tracing"
)

// Config is the server's configuration.
type Config struct {
	Listen      string
	DataDir     string
	PostgresURL string
	// PostgresMaxConns sizes the Postgres connection pool (postgres.Pool.MaxConns).
	PostgresMaxConns string
	LogLevel         string
	LogFormat        string
	// Provisioners is how many in-process provisioners run Terraform builds (0: none; run
	// `hangar provisioner` elsewhere).
	Provisioners string
	// Terraform is the terraform binary the in-process provisioners run.
	Terraform string
	// HeartbeatTimeout and PendingTimeout configure the reaper of silent and unclaimed builds.
	HeartbeatTimeout, PendingTimeout string
	// PollInterval is the provisioners' backup poll for queued builds (wake-ups normally come at
	// once, across replicas through Postgres).
	PollInterval string
	// AccessURL is the server's URL as users and their browsers reach it (OIDC redirects, the
	// apps' scheme and port); empty: the address it listens on.
	AccessURL string
	// HelperURL is the server's URL as Terraform workspaces' machines reach it: their helpers
	// (hangar_agent's init script) connect out to it; empty: the access URL.
	HelperURL string
	// AppsZone is the DNS zone of Terraform workspaces' apps ("auto": apps.localhost when the
	// access URL is a loopback one, else none; "none": none).
	AppsZone string
	// RelayURL is this replica's URL as the other replicas reach it, to relay Terraform
	// workspaces' connections to the replica holding their helper ("": none).
	RelayURL string
	// LifecycleInterval is how often the lifecycle executor looks for changes due ("0": never).
	LifecycleInterval string
	// AuditRetention is how long audit entries are kept ("0": forever; "": the default).
	AuditRetention string
	// PrebuildInterval is how often the prebuild reconciler keeps the presets' pools ("0": never).
	PrebuildInterval string
	// Hardening: TLS, trusted proxies, caps per client (harden.go).
	Hardening HardeningConfig
	// OIDC configures sign-in with an OpenID Connect provider (oidc.go).
	OIDC OIDCConfig
	// ExternalAuth configures the forges users link (externalauth.go).
	ExternalAuth ExternalAuthConfig
	// TokenLifetime is a new API token's default lifetime, MaxTokenLifetime the longest a
	// request may ask ("": the defaults, 720h and 8760h).
	TokenLifetime, MaxTokenLifetime string
	// MaxStoragePerUser bounds the Terraform state and build log bytes each user's workspaces keep
	// (storage.go; "": the default).
	MaxStoragePerUser string
	// Isolation: how the in-process provisioners isolate template code (isolation.go).
	Isolation sandbox.Flags
	// OTelEndpoint turns tracing on (internal/tracing).
	OTelEndpoint string
	// ConfigFile is the --config file, hidden from templates with the other secrets (set by Command).
	ConfigFile string
}

// DefaultAuditRetention is how long audit entries are kept unless --audit-retention says otherwise.
const DefaultAuditRetention = "8760h"

// auditPruneInterval is how often the audit log's retention is enforced.
const auditPruneInterval = time.Hour

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "hangar")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "hangar")
	}
	return "hangar-data"
}

// Command returns `hangar server`.
func Command() *cobra.Command {
	var cfg Config
	opts := []cmdopt.Option{
		cmdopt.String(&cfg.Listen, "listen", "HANGAR_LISTEN", "127.0.0.1:7080", "address to serve the API on"),
		cmdopt.String(&cfg.DataDir, "data-dir", "HANGAR_DATA_DIR", defaultDataDir(), "directory for the embedded SQLite store and the admin token"),
		cmdopt.String(&cfg.PostgresURL, "postgres-url", "HANGAR_POSTGRES_URL", "", "use this Postgres database (postgres://...) instead of the embedded SQLite store; several servers may share it"),
		cmdopt.Int(&cfg.PostgresMaxConns, "postgres-max-conns", "HANGAR_POSTGRES_MAX_CONNS", strconv.Itoa(postgres.DefaultMaxConns), "with --postgres-url: the connections each server keeps open to Postgres (busy or idle; plus one that listens for the other replicas' changes); every replica's, plus some, must fit under the database's max_connections"),
		cmdopt.Int(&cfg.Provisioners, "provisioners", "HANGAR_PROVISIONERS", "1", "how many in-process provisioners run Terraform builds (0: none, run hangar provisioner instead)"),
		cmdopt.String(&cfg.Terraform, "terraform", "HANGAR_TERRAFORM", "terraform", "the terraform binary the in-process provisioners run").Arg("PATH"),
		cmdopt.Duration(&cfg.HeartbeatTimeout, "build-heartbeat-timeout", "HANGAR_BUILD_HEARTBEAT_TIMEOUT", "5m", "fail a running build whose provisioner has not reported for this long"),
		cmdopt.Duration(&cfg.PendingTimeout, "build-pending-timeout", "HANGAR_BUILD_PENDING_TIMEOUT", "30m", "fail a build no provisioner has picked up for this long"),
		cmdopt.String(&cfg.AccessURL, "access-url", "HANGAR_ACCESS_URL", "", "the server's URL as users and browsers reach it: the OIDC provider sends browsers back to <access URL>/oidc/callback, and Terraform workspaces' helpers connect out to it unless --helper-url says otherwise (default: http:// and the listen address, https:// with --tls-cert-file)"),
		cmdopt.String(&cfg.HelperURL, "helper-url", "HANGAR_HELPER_URL", "", "the server's URL as workspaces' helpers reach it, when it is not the access URL (a network of their own, such as the local cluster's: hangar quickstart relays http://10.99.0.2:PORT to the server): Terraform machines' helpers (hangar_agent's init script) connect out to it, and Kubernetes workspaces' helpers ask it for git credentials (default: the access URL)"),
		cmdopt.String(&cfg.AppsZone, "apps-zone", "HANGAR_APPS_ZONE", "auto", "DNS zone whose hosts <port>-<workspace>--<owner>.<zone> the server serves as Terraform workspaces' apps in the browser, through their helpers (a wildcard DNS record *.<zone> must lead to the server); the scheme and port are the access URL's. auto: apps.localhost when the access URL is a loopback one, else none; none: no apps").Arg("ZONE"),
		cmdopt.String(&cfg.RelayURL, "relay-url", "HANGAR_RELAY_URL", "", "with several replicas: this replica's own URL as the other replicas reach it (such as http://$(POD_IP):7080); they relay to it the users' connections to the Terraform workspaces whose helpers are connected here. Empty: they answer 503 and name this replica instead"),
		cmdopt.Duration(&cfg.LifecycleInterval, "lifecycle-interval", "HANGAR_LIFECYCLE_INTERVAL", "1m", "how often the lifecycle executor applies autostart schedules, autostop TTLs, failure TTLs, dormancy and the agents' lifetimes (0: never; every replica runs it, each change is made once)"),
		cmdopt.Duration(&cfg.TokenLifetime, "token-lifetime", "HANGAR_TOKEN_LIFETIME", "720h", "the lifetime of a new API token whose request names none (hangar tokens create, users create, rotate-token)"),
		cmdopt.Duration(&cfg.MaxTokenLifetime, "max-token-lifetime", "HANGAR_MAX_TOKEN_LIFETIME", "8760h", "the longest lifetime a new API token may be given"),
		cmdopt.Duration(&cfg.AuditRetention, "audit-retention", "HANGAR_AUDIT_RETENTION", DefaultAuditRetention, "how long the audit log keeps an entry (a duration such as 8760h, one year; 0 keeps every entry forever); older entries are deleted hourly, in bounded batches, by every replica"),
		cmdopt.Duration(&cfg.PrebuildInterval, "prebuild-interval", "HANGAR_PREBUILD_INTERVAL", "1m", "how often the prebuild reconciler creates and deletes prebuilt workspaces to keep the presets' pools (0: never; every replica runs it, each preset is reconciled by one replica at a time)"),
		cmdopt.String(&cfg.MaxStoragePerUser, "max-storage-per-user", "HANGAR_MAX_STORAGE_PER_USER", defaultMaxStoragePerUser, "the most bytes of Terraform state and build log a user's workspaces keep (such as 1Gi; 0: no limit); over it, a create, a start, a state push or a prebuild claim first removes all but each workspace's latest build's state and log, then is refused (a claim: built from scratch instead)").Arg("SIZE"),
		cmdopt.Duration(&cfg.PollInterval, "build-poll-interval", "HANGAR_BUILD_POLL_INTERVAL", "30s", "how often a waiting provisioner looks for queued builds in case a wake-up was lost"),
		cmdopt.String(&cfg.OIDC.IssuerURL, "oidc-issuer-url", "HANGAR_OIDC_ISSUER_URL", "", "sign users in with this OpenID Connect provider (its issuer URL, https://); its client must allow the redirect URI <access URL>/oidc/callback. Without it, users sign in with a token only"),
		cmdopt.String(&cfg.OIDC.ClientID, "oidc-client-id", "HANGAR_OIDC_CLIENT_ID", "", "with --oidc-issuer-url: the client id the provider gave Hangar").Arg("ID"),
		cmdopt.String(&cfg.OIDC.ClientSecretFile, "oidc-client-secret-file", "HANGAR_OIDC_CLIENT_SECRET_FILE", "", "with --oidc-issuer-url: a file holding the client secret (or set HANGAR_OIDC_CLIENT_SECRET, or --oidc-client-secret, which other users of the machine can see in the process list)"),
		cmdopt.List(&cfg.OIDC.Scopes, "oidc-scopes", "HANGAR_OIDC_SCOPES", "openid,email,profile", "the scopes asked of the provider (add groups when the provider sends the groups claim only for it)"),
		cmdopt.String(&cfg.OIDC.Name, "oidc-name", "HANGAR_OIDC_NAME", "", "the provider's name on the sign-in page's \"Sign in with <name>\" (default: the issuer's host)").Arg("NAME"),
		cmdopt.String(&cfg.OIDC.AdminGroup, "oidc-admin-group", "HANGAR_OIDC_ADMIN_GROUP", "", "users whose groups claim holds this group are admins (evaluated again at every sign-in)").Arg("GROUP"),
		cmdopt.String(&cfg.OIDC.GroupsClaim, "oidc-groups-claim", "HANGAR_OIDC_GROUPS_CLAIM", server.DefaultOIDCGroupsClaim, "the ID token's claim listing the user's groups").Arg("CLAIM"),
		cmdopt.List(&cfg.OIDC.AdminEmails, "oidc-admin-emails", "HANGAR_OIDC_ADMIN_EMAILS", "", "comma-separated email addresses of admins (evaluated again at every sign-in)"),
		cmdopt.Bool(&cfg.OIDC.ProviderLogout, "oidc-provider-logout", "HANGAR_OIDC_PROVIDER_LOGOUT", "true", "sign-out of a session begun through the provider signs out of the provider too, when its discovery has an end_session_endpoint; its client must allow the post-logout redirect URI <access URL>/oidc/signed-out"),
		cmdopt.List(&cfg.OIDC.AllowedDomains, "oidc-allowed-domains", "HANGAR_OIDC_ALLOWED_DOMAINS", "", "comma-separated email domains: only users with an email address in one of them may sign in (default: anyone the provider signs in)"),
		cmdopt.String(&cfg.ExternalAuth.ConfigFile, "external-auth-config", "HANGAR_EXTERNAL_AUTH_CONFIG", "", "a YAML or JSON file of the forges (GitHub, GitLab, Gitea/Forgejo, Bitbucket) users link their accounts at, for git in their workspaces: each an OAuth2 application whose redirect URI is <access URL>/external-auth/<id>/callback (docs/decisions.md, \"Forge identities\")").Arg("FILE"),
		cmdopt.String(&cfg.ExternalAuth.KeyFile, "external-auth-key-file", "HANGAR_EXTERNAL_AUTH_KEY_FILE", "", "with --external-auth-config: a file holding the key (base64 of 32 random bytes: openssl rand -base64 32) the forges' tokens are encrypted under at rest; required with it"),
		cmdopt.String(&cfg.OTelEndpoint, "otel-endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT", "", tracing.EndpointHelp).Arg("URL"),
		cmdopt.String(&cfg.LogLevel, "log-level", "HANGAR_LOG_LEVEL", "info", "debug, info, warn or error").Arg("LEVEL"),
		cmdopt.String(&cfg.LogFormat, "log-format", "HANGAR_LOG_FORMAT", "text", "text or json").Arg("FORMAT"),
	}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the Hangar server (API and agent reconcile endpoint)",
		Long: "Run the Hangar server. It keeps the desired state of every workspace in its store (SQLite in the data\n" +
			"directory by default, Postgres with --postgres-url) and answers users and agents.\n\n" +
			cmdopt.Precedence,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg.ConfigFile = cmdopt.ConfigFile(cmd, "HANGAR_SERVER_CONFIG")
			return Run(ctx, cfg, cmd.OutOrStdout())
		},
	}
	opts = append(opts, hardeningOptions(&cfg.Hardening)...)
	cmdopt.RegisterWithFile(cmd, "HANGAR_SERVER_CONFIG", append(opts, cfg.Isolation.Options(true)...))
	// Not through cmdopt: the environment variable would show as the flag's default in --help.
	cmd.Flags().StringVar(&cfg.OIDC.ClientSecret, "oidc-client-secret", "", "with --oidc-issuer-url: the client secret (env HANGAR_OIDC_CLIENT_SECRET; prefer it or --oidc-client-secret-file, which the process list does not show)")
	cmd.PreRun = func(*cobra.Command, []string) {
		if cfg.OIDC.ClientSecret == "" {
			cfg.OIDC.ClientSecret = os.Getenv("HANGAR_OIDC_CLIENT_SECRET")
		}
	}
	return cmd
}

// serverURLOption checks a URL of the server given with --NAME ("" stays ""), without its final "/".
func serverURLOption(name, raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := neturl.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--%s: want the server's http:// or https:// URL (no query), got %q", name, raw)
	}
	return strings.TrimSuffix(raw, "/"), nil
}

// Run serves until ctx ends. It prints where to go next on out.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	log, err := logging.New(cfg.LogLevel, cfg.LogFormat, os.Stderr)
	if err != nil {
		return err
	}
	shutdownTracing, err := tracing.Setup(ctx, "hangar-server", cfg.OTelEndpoint)
	if err != nil {
		return fmt.Errorf("--otel-endpoint (or %s): %w", tracing.EnvEndpoint, err)
	}
	defer func() { _ = tracing.Shutdown(shutdownTracing) }()
	hard, err := readHardening(cfg.Hardening, clock.Real{}, log)
	if err != nil {
		return err
	}
	nprov, err := strconv.Atoi(cfg.Provisioners)
	if err != nil || nprov < 0 || nprov > 64 {
		return fmt.Errorf("--provisioners: want a whole number from 0 to 64, got %q", cfg.Provisioners)
	}
	hbTimeout, err := time.ParseDuration(cfg.HeartbeatTimeout)
	if err != nil || hbTimeout < 10*time.Second {
		return fmt.Errorf("--build-heartbeat-timeout: want a duration of at least 10s (like 5m), got %q", cfg.HeartbeatTimeout)
	}
	pendingTimeout, err := time.ParseDuration(cfg.PendingTimeout)
	if err != nil || pendingTimeout < 10*time.Second {
		return fmt.Errorf("--build-pending-timeout: want a duration of at least 10s (like 30m), got %q", cfg.PendingTimeout)
	}
	pollInterval, err := time.ParseDuration(cfg.PollInterval)
	if err != nil || pollInterval < time.Second {
		return fmt.Errorf("--build-poll-interval: want a duration of at least 1s (like 30s), got %q", cfg.PollInterval)
	}
	if cfg.LifecycleInterval == "" {
		cfg.LifecycleInterval = "1m"
	}
	lifecycleInterval, err := time.ParseDuration(cfg.LifecycleInterval)
	if err != nil || (lifecycleInterval != 0 && lifecycleInterval < time.Second) {
		return fmt.Errorf("--lifecycle-interval: want 0 (off) or a duration of at least 1s (like 1m), got %q", cfg.LifecycleInterval)
	}
	tokenLifetime, maxTokenLifetime, err := parseTokenLifetimes(cfg.TokenLifetime, cfg.MaxTokenLifetime)
	if err != nil {
		return err
	}
	if cfg.AuditRetention == "" {
		cfg.AuditRetention = DefaultAuditRetention
	}
	auditRetention, err := time.ParseDuration(cfg.AuditRetention)
	if err != nil || auditRetention < 0 || (auditRetention != 0 && auditRetention < time.Hour) {
		return fmt.Errorf("--audit-retention: want 0 (keep forever) or a duration of at least 1h (like 8760h), got %q", cfg.AuditRetention)
	}
	if cfg.PrebuildInterval == "" {
		cfg.PrebuildInterval = "1m"
	}
	prebuildInterval, err := time.ParseDuration(cfg.PrebuildInterval)
	if err != nil || (prebuildInterval != 0 && prebuildInterval < time.Second) {
		return fmt.Errorf("--prebuild-interval: want 0 (off) or a duration of at least 1s (like 1m), got %q", cfg.PrebuildInterval)
	}
	if cfg.AccessURL, err = serverURLOption("access-url", cfg.AccessURL); err != nil {
		return err
	}
	if cfg.HelperURL, err = serverURLOption("helper-url", cfg.HelperURL); err != nil {
		return err
	}
	if cfg.RelayURL != "" {
		u, err := neturl.Parse(cfg.RelayURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("--relay-url: want this replica's http:// or https:// URL (no path or query), got %q", cfg.RelayURL)
		}
		cfg.RelayURL = strings.TrimSuffix(cfg.RelayURL, "/")
	}
	pool := postgres.DefaultPool
	if cfg.PostgresMaxConns != "" {
		n, err := strconv.Atoi(cfg.PostgresMaxConns)
		if err != nil || n < 1 || n > 1000 {
			return fmt.Errorf("--postgres-max-conns: want a whole number from 1 to 1000, got %q", cfg.PostgresMaxConns)
		}
		pool.MaxConns = n
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory %s: %w", cfg.DataDir, err)
	}
	warnOpenDataDir(cfg.DataDir, log)
	var st store.Store
	if cfg.PostgresURL != "" {
		st, err = postgres.OpenPool(ctx, cfg.PostgresURL, pool)
	} else {
		st, err = sqlite.Open(ctx, filepath.Join(cfg.DataDir, "hangar.db"))
	}
	if err != nil {
		return err
	}
	defer st.Close()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	defer ln.Close()
	url := hard.scheme() + "://" + displayAddr(ln.Addr().String())
	givenAccessURL := cfg.AccessURL
	if cfg.AccessURL == "" {
		cfg.AccessURL = url // before the provisioners start, below
	}
	if cfg.HelperURL == "" {
		cfg.HelperURL = cfg.AccessURL
	}
	appsOpts, err := AppsOptions(cfg.AppsZone, cfg.AccessURL)
	if err != nil {
		return err
	}
	oidcOpts, err := OIDCOptions(cfg.OIDC, cfg.AccessURL)
	if err != nil {
		return err
	}
	forges, forgeKeys, err := ExternalAuthOptions(cfg.ExternalAuth)
	if err != nil {
		return err
	}
	maxStorage, err := maxStoragePerUser(cfg.MaxStoragePerUser)
	if err != nil {
		return err
	}
	bld := tfbackend.New(tfbackend.Options{Store: st, Clock: clock.Real{}, Logger: log.With("component", "builder"),
		HeartbeatTimeout: hbTimeout, PendingTimeout: pendingTimeout, PollInterval: pollInterval,
		HelperURL: func() string { return cfg.HelperURL }, MaxStoragePerUser: maxStorage})
	var extAuth *externalauth.Service
	var helperTokenKeys [][]byte
	var gitSSH *gitssh.Service
	if forges != nil {
		extAuth = externalauth.New(externalauth.Options{Providers: forges, Keys: forgeKeys, Store: st, Clock: clock.Real{}, Log: log.With("component", "external-auth"),
			CallbackURL: func(id string) string { return server.ExternalAuthCallbackURL(cfg.AccessURL, id) }})
		// Kubernetes workspaces' helpers ask for git credentials with tokens made under a key
		// derived from the same key file (docs/decisions.md, "git credentials in the workspace").
		helperTokenKeys = forgeKeys.DerivedKeys("hangar kubernetes helper tokens v1")
		// Users' git SSH keys are sealed under the same key file (docs/decisions.md, "a git SSH
		// key per user").
		gitSSH = &gitssh.Service{Keys: forgeKeys, Store: st, Clock: clock.Real{}}
	} else {
		// Without forges the helpers still report to the server (their startup steps, dotfiles,
		// metadata): their tokens are made under a key the server keeps in its database, the same
		// for every replica (docs/decisions.md, "Helpers report without forges"). With a key file
		// this key is not used at all: a token made from the database alone must never be worth
		// the owners' git credentials, which the key file keeps from a reader of the database.
		key, err := st.ServerKey(ctx, "kubernetes-helper-tokens", func() []byte {
			k := make([]byte, 32)
			_, _ = rand.Read(k)
			return k
		}, time.Now())
		if err != nil {
			return err
		}
		helperTokenKeys = [][]byte{key}
	}
	srv := server.New(server.Options{Store: st, Clock: clock.Real{}, Logger: log, Builder: bld, Apps: appsOpts, RelayURL: cfg.RelayURL, ExternalAuth: extAuth, GitSSH: gitSSH,
		HelperTokenKeys: helperTokenKeys, HelperURL: func() string { return cfg.HelperURL },
		AuditRetention: auditRetention, TrustedProxies: hard.trusted, StreamLimits: hard.streams, OIDC: oidcOpts,
		TokenLifetime: tokenLifetime, MaxTokenLifetime: maxTokenLifetime})
	tokenFile, created, err := srv.Bootstrap(ctx, cfg.DataDir)
	if err != nil {
		return err
	}
	hs := hard.httpServer(srv.Handler(), log)
	storeName := "SQLite at " + filepath.Join(cfg.DataDir, "hangar.db")
	if cfg.PostgresURL != "" {
		storeName = "Postgres"
	}
	// The in-process provisioners' build users are claimed before the start message, which says
	// which they are (another installation of this host may have the default ones).
	var iso *isolation
	var shim, serverID string
	if nprov > 0 {
		check := &terraform.Runner{TerraformPath: cfg.Terraform}
		if v, err := check.Check(ctx); err != nil {
			// Started anyway they would claim builds and fail them; without them builds wait for a
			// `hangar provisioner` (or fail after --build-pending-timeout, saying why).
			log.Warn("the in-process provisioners cannot run Terraform and are not started: terraform templates build only on `hangar provisioner` daemons until this is fixed", "err", err)
			nprov = 0
		} else {
			log.Info("in-process provisioners ready", "count", nprov, "terraform", v)
		}
	}
	if nprov > 0 {
		shim, err = os.Executable()
		if err != nil {
			return fmt.Errorf("find the hangar executable (the provisioners' terraform shim): %w", err)
		}
		// The worker ids survive restarts, and the host's name (a new container keeps the data
		// directory but not its name): they come from an id kept in the data directory.
		serverID, err = persistentID(filepath.Join(cfg.DataDir, "provisioner", "server-id"))
		if err != nil {
			return err
		}
		iso, err = templateIsolation(ctx, cfg, nprov, shim, log)
		if err != nil {
			return err
		}
		defer iso.release()
	}
	reach := printListening(out, ln.Addr(), url, givenAccessURL, storeName)
	if cfg.HelperURL != cfg.AccessURL {
		fmt.Fprintf(out, "Terraform workspaces' helpers connect to: %s\n", cfg.HelperURL)
	}
	tokenNotice, loginToken := adminTokenNotice(tokenFile, created)
	fmt.Fprintln(out, tokenNotice)
	signIn := "with the admin token"
	if oidcOpts != nil {
		signIn = "with OIDC or a token"
	}
	fmt.Fprintf(out, "Web UI: %s/ui/ (sign in %s)\n", reach, signIn)
	if line := iso.notice(); line != "" {
		fmt.Fprintln(out, line)
	}
	fmt.Fprintf(out, "Next: hangar login --url %s --token %s\n"+
		"      hangar templates init kubernetes && hangar templates push kubernetes --devfile kubernetes/devfile.yaml && hangar agents create my-cluster && hangar create my-workspace --template kubernetes --agent my-cluster    (Kubernetes: the web editor's image on the nodes, an agent running; all of it on this machine, as root: hangar quickstart)\n"+
		"      hangar templates push my-template --directory ./module && hangar create my-workspace --template my-template    (Terraform)\n",
		reach, loginToken)
	if oidcOpts != nil {
		fmt.Fprintf(out, "Sign-in with OIDC: %s (client %s); its redirect URI: %s\n", oidcOpts.IssuerURL, oidcOpts.ClientID, oidcOpts.RedirectURL)
		if !oidcOpts.NoProviderLogout {
			fmt.Fprintf(out, "Sign-out at the provider: its post-logout redirect URI: %s\n", strings.TrimSuffix(oidcOpts.RedirectURL, server.OIDCCallbackPath)+server.OIDCSignedOutPath)
		}
	}
	for _, p := range forges {
		fmt.Fprintf(out, "Forge %s (%s, client %s): its OAuth2 application's redirect URI: %s\n", p.ID, p.Type, p.ClientID, server.ExternalAuthCallbackURL(cfg.AccessURL, p.ID))
	}
	if appsOpts.Zone != "" {
		fmt.Fprintf(out, "Terraform workspaces' apps: %s://<port>-<workspace>--<owner>.%s%s (any port the machine listens on, through its hangar_agent)\n",
			appsOpts.Scheme, appsOpts.Zone, portSuffix(appsOpts.Port))
	}

	bctx, stopBackground := context.WithCancel(ctx)
	var background sync.WaitGroup
	defer func() {
		stopBackground()
		background.Wait()
	}()
	background.Add(1)
	go func() {
		defer background.Done()
		bld.RunReaper(bctx, max(min(hbTimeout, pendingTimeout)/10, time.Second))
	}()
	if lifecycleInterval > 0 {
		background.Add(1)
		go func() {
			defer background.Done()
			srv.Lifecycle().Run(bctx, lifecycleInterval, time.After)
		}()
	}
	if auditRetention > 0 {
		background.Add(1)
		go func() {
			defer background.Done()
			srv.AuditRetention().Run(bctx, auditPruneInterval, time.After)
		}()
	}
	if prebuildInterval > 0 {
		background.Add(1)
		go func() {
			defer background.Done()
			srv.Prebuilds().Run(bctx, prebuildInterval, time.After)
		}()
	}
	if nprov > 0 {
		for i := 0; i < nprov; i++ {
			// Each daemon has its own work root and a worker id that survives restarts, so that a
			// server killed mid-build adopts the terraform runs it left when it starts again.
			root := filepath.Join(cfg.DataDir, "provisioner", strconv.Itoa(i))
			unlock, err := provisioner.LockWorkRoot(root)
			if err != nil {
				return err
			}
			defer unlock()
			mirror, err := tfprovider.Mirror(filepath.Join(root, ".plugins"), shim)
			if err != nil {
				return err
			}
			runner := &terraform.Runner{TerraformPath: cfg.Terraform, WorkRoot: root, KeepWorkDir: true, Shim: shim, PluginMirror: mirror}
			iso.apply(runner, i)
			d := &provisioner.Daemon{Coord: bld, Runner: runner, WorkerID: fmt.Sprintf("%s%s/%d", tfbackend.InProcessWorkerPrefix, serverID, i),
				Logger: log.With("component", "provisioner", "n", i), UnreportedDir: filepath.Join(root, ".unreported")}
			background.Add(1)
			go func() {
				defer background.Done()
				_ = d.Run(bctx)
			}()
		}
	}

	errc := make(chan error, 1)
	go func() { errc <- hard.serve(hs, ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// persistentID reads the id kept in path, making one the first time.
func persistentID(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
		return string(bytes.TrimSpace(b)), nil
	}
	buf := make([]byte, 8)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	id := hex.EncodeToString(buf)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("provisioner id: %w", err)
	}
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("provisioner id: %w", err)
	}
	return id, nil
}

func displayAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if host == "" || host == "::" || host == "0.0.0.0" {
		host = "127.0.0.1"
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + port
}

// AppsOptions reads --apps-zone against the access URL (already checked): the zone, and the
// scheme and port browsers reach the apps by, the access URL's.
func AppsOptions(zone, accessURL string) (server.AppsOptions, error) {
	u, err := neturl.Parse(accessURL)
	if err != nil {
		return server.AppsOptions{}, fmt.Errorf("--access-url: %w", err)
	}
	zone = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(zone), "."))
	switch zone {
	case "none":
		return server.AppsOptions{}, nil
	case "auto", "":
		host := u.Hostname()
		if ip := net.ParseIP(host); !(host == "localhost" || strings.HasSuffix(host, ".localhost") || ip != nil && ip.IsLoopback()) {
			return server.AppsOptions{}, nil
		}
		zone = "apps.localhost"
	default:
		if len(zone) > 200 || !dnsName.MatchString(zone) {
			return server.AppsOptions{}, fmt.Errorf("--apps-zone: want a DNS name such as apps.example.com (or auto, or none), got %q", zone)
		}
		if strings.EqualFold(u.Hostname(), zone) {
			return server.AppsOptions{}, fmt.Errorf("--apps-zone: %q is the access URL's own host; take a zone of its own, such as apps.%s", zone, zone)
		}
	}
	return server.AppsOptions{Zone: zone, Scheme: u.Scheme, Port: u.Port(), ServerURL: accessURL}, nil
}

// dnsName is a DNS name of at least two labels, lower case.
var dnsName = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func portSuffix(port string) string {
	if port == "" {
		return ""
	}
	return ":" + port
}

// parseTokenLifetimes reads --token-lifetime and --max-token-lifetime ("": the defaults): each at
// least a minute, the default no longer than the maximum.
func parseTokenLifetimes(def, maxLife string) (time.Duration, time.Duration, error) {
	d, m := server.DefaultTokenLifetime, server.DefaultMaxTokenLifetime
	var err error
	if def != "" {
		if d, err = time.ParseDuration(def); err != nil || d < time.Minute {
			return 0, 0, fmt.Errorf("--token-lifetime: want a duration of at least 1m (like 720h), got %q", def)
		}
	}
	if maxLife != "" {
		if m, err = time.ParseDuration(maxLife); err != nil || m < time.Minute {
			return 0, 0, fmt.Errorf("--max-token-lifetime: want a duration of at least 1m (like 8760h), got %q", maxLife)
		}
	}
	if d > m {
		return 0, 0, fmt.Errorf("--token-lifetime %s is longer than --max-token-lifetime %s", d, m)
	}
	return d, m, nil
}
