// Package proxycmd is `hangar proxy`: the access proxy that runs next to an agent, with the agent's
// token. It learns the agent's id and DNS zone from the server, watches the agent's Services and
// EndpointSlices, and serves the workspaces' public endpoints to their owners (internal/proxy).
package proxycmd

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"
	"k8s.io/client-go/kubernetes"

	"github.com/hangar-dev/hangar/internal/agentcmd"
	"github.com/hangar-dev/hangar/internal/apiclient"
	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/cmdopt"
	"github.com/hangar-dev/hangar/internal/logging"
	"github.com/hangar-dev/hangar/internal/netns"
	"github.com/hangar-dev/hangar/internal/opsserver"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/proxy"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Config is the proxy's configuration.
type Config struct {
	Server, ServerPublicURL, TokenFile, Kubeconfig, Context, Listen, TLSCertFile, TLSKeyFile, MetricsListen, DNSZone string
	AuthCacheTTL, MaxBodyBytes, WriteTimeout, LogLevel, LogFormat                                                    string
	SSHListen, SSHHostKeyFile, SSHClientKeyFile, SSHRecheck, ActivityInterval                                        string
	PodNetns                                                                                                         string
}

// Command returns `hangar proxy`.
func Command() *cobra.Command {
	var cfg Config
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Run the access proxy: workspaces' public endpoints, for their owners",
		Long: "Run Hangar's access proxy next to an agent, with the agent's token. It serves\n" +
			"https://<port>-<name>--<owner>.<dns_zone>/ for the agent's workspaces: a browser signs in on the\n" +
			"server and gets a cookie for that one host; API clients send Authorization: Bearer <token>.\n" +
			"Only the workspace's owner and admins get through, and only to public endpoints.\n\n" +
			cmdopt.Precedence,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Run(ctx, cfg)
		},
	}
	cmdopt.RegisterWithFile(cmd, "HANGAR_PROXY_CONFIG", []cmdopt.Option{
		cmdopt.String(&cfg.Server, "server", "HANGAR_SERVER", "http://127.0.0.1:7080", "URL of the Hangar server, as the proxy reaches it"),
		cmdopt.String(&cfg.ServerPublicURL, "server-public-url", "HANGAR_SERVER_PUBLIC_URL", "", "URL of the Hangar server as browsers reach it, for sign-in (default: --server)"),
		cmdopt.String(&cfg.TokenFile, "token-file", "HANGAR_AGENT_TOKEN_FILE", "", "file holding the token of the agent whose workspaces this proxy serves"),
		cmdopt.String(&cfg.Kubeconfig, "kubeconfig", "HANGAR_KUBECONFIG", "", "kubeconfig file of the cluster; empty follows kubectl's rules, then the in-cluster configuration"),
		cmdopt.String(&cfg.Context, "context", "HANGAR_KUBE_CONTEXT", "", "kubeconfig context to use (default: the current context)").Arg("NAME"),
		cmdopt.String(&cfg.Listen, "listen", "HANGAR_PROXY_LISTEN", ":8443", "address the proxy serves workspaces on"),
		cmdopt.String(&cfg.TLSCertFile, "tls-cert-file", "HANGAR_PROXY_TLS_CERT_FILE", "", "certificate (PEM, a wildcard *.<dns_zone>) to serve https and HTTP/2 with; reread when the file changes. Without it the proxy serves plain http (the agent's proxy_url_scheme must then be http)"),
		cmdopt.String(&cfg.TLSKeyFile, "tls-key-file", "HANGAR_PROXY_TLS_KEY_FILE", "", "private key (PEM) of --tls-cert-file"),
		cmdopt.String(&cfg.PodNetns, "pod-netns", "HANGAR_PROXY_POD_NETNS", "", "network namespace to dial workspaces from (a path such as /run/netns/NAME; needs root); only those connections are made there, everything else stays in the proxy's own namespace. For the local test cluster: /run/netns/$(cat DIR/netns)").Arg("PATH"),
		cmdopt.String(&cfg.MetricsListen, "metrics-listen", "HANGAR_PROXY_METRICS_LISTEN", "127.0.0.1:9443", "address of /metrics, /healthz and /readyz (empty: none)"),
		cmdopt.String(&cfg.DNSZone, "dns-zone", "HANGAR_PROXY_DNS_ZONE", "", "the agent's DNS zone (default: the agent config's, from the server; if given, it must match)").Arg("ZONE"),
		cmdopt.Duration(&cfg.AuthCacheTTL, "auth-cache-ttl", "HANGAR_PROXY_AUTH_CACHE_TTL", "0s", "how long an allowed access decision is reused (0: never, every request is checked, so a revocation is refused from the next request on; above 0 the cache is emptied when the server announces a revocation); refusals are reused for 1 s"),
		cmdopt.Int(&cfg.MaxBodyBytes, "max-body-bytes", "HANGAR_PROXY_MAX_BODY_BYTES", strconv.Itoa(proxy.DefaultMaxBodyBytes), "largest request body forwarded (413 above; WebSockets are not limited)"),
		cmdopt.Duration(&cfg.WriteTimeout, "write-timeout", "HANGAR_PROXY_WRITE_TIMEOUT", "10m", "longest time to write one response (WebSockets have none)"),
		cmdopt.String(&cfg.SSHListen, "ssh-listen", "HANGAR_PROXY_SSH_LISTEN", "", "address the proxy serves SSH on (empty: no SSH). The SSH user name is the workspace: ssh -p PORT dev@HOST, or owner/dev"),
		cmdopt.String(&cfg.SSHHostKeyFile, "ssh-host-key-file", "HANGAR_PROXY_SSH_HOST_KEY_FILE", "", "the proxy's SSH host key (a private key file, as ssh-keygen writes); every replica should have the same one. Required with --ssh-listen"),
		cmdopt.String(&cfg.SSHClientKeyFile, "ssh-client-key-file", "HANGAR_PROXY_SSH_CLIENT_KEY_FILE", "", "the private key the proxy logs in to workspaces with; its public half goes in the agent config's proxy_ssh_public_keys. Required with --ssh-listen"),
		cmdopt.Duration(&cfg.SSHRecheck, "ssh-recheck-interval", "HANGAR_PROXY_SSH_RECHECK_INTERVAL", "10s", "how often an open SSH connection's access is asked again (a revoked token or removed key ends it within this)"),
		cmdopt.Duration(&cfg.ActivityInterval, "activity-interval", "HANGAR_PROXY_ACTIVITY_INTERVAL", "30s", "how often the workspaces' use (requests, SSH) is reported to the server"),
		cmdopt.String(&cfg.LogLevel, "log-level", "HANGAR_LOG_LEVEL", "info", "debug, info, warn or error").Arg("LEVEL"),
		cmdopt.String(&cfg.LogFormat, "log-format", "HANGAR_LOG_FORMAT", "text", "text or json").Arg("FORMAT"),
	})
	return cmd
}

// Run runs the proxy until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	log, err := logging.New(cfg.LogLevel, cfg.LogFormat, os.Stderr)
	if err != nil {
		return err
	}
	logging.RouteKlog(log)
	token, err := cmdopt.ReadToken(cfg.TokenFile, "hangar agents create")
	if err != nil {
		return err
	}
	ttl, err := time.ParseDuration(cfg.AuthCacheTTL)
	if err != nil || ttl < 0 || ttl > time.Minute {
		return fmt.Errorf("--auth-cache-ttl: want a duration from 0 to 1m, got %q", cfg.AuthCacheTTL)
	}
	maxBody, err := strconv.ParseInt(cfg.MaxBodyBytes, 10, 64)
	if err != nil || maxBody < 0 {
		return fmt.Errorf("--max-body-bytes: want a number of bytes (0: no limit), got %q", cfg.MaxBodyBytes)
	}
	writeTimeout, err := time.ParseDuration(cfg.WriteTimeout)
	if err != nil || writeTimeout < 0 {
		return fmt.Errorf("--write-timeout: want a duration (0: none), got %q", cfg.WriteTimeout)
	}
	if (cfg.TLSCertFile == "") != (cfg.TLSKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-key-file go together")
	}
	var certs *proxy.CertFiles
	if cfg.TLSCertFile != "" {
		if certs, err = proxy.LoadCertFiles(cfg.TLSCertFile, cfg.TLSKeyFile, clock.Real{}, log); err != nil {
			return err
		}
	}
	recheck, err := time.ParseDuration(cfg.SSHRecheck)
	if err != nil || recheck < time.Second {
		return fmt.Errorf("--ssh-recheck-interval: want a duration of 1s or more, got %q", cfg.SSHRecheck)
	}
	activityEvery, err := time.ParseDuration(cfg.ActivityInterval)
	if err != nil || activityEvery < 100*time.Millisecond {
		return fmt.Errorf("--activity-interval: want a duration of 100ms or more, got %q", cfg.ActivityInterval)
	}
	var sshKeys *sshKeyPair
	if cfg.SSHListen != "" {
		if sshKeys, err = loadSSHKeys(cfg.SSHHostKeyFile, cfg.SSHClientKeyFile); err != nil {
			return err
		}
	}
	dial := (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	dialsFrom := "the proxy's own network namespace"
	if cfg.PodNetns != "" {
		if err := netns.Check(cfg.PodNetns); err != nil {
			return fmt.Errorf("--pod-netns: %w (for the local test cluster: /run/netns/$(cat DIR/netns), as root)", err)
		}
		dial = (&netns.Dialer{Path: cfg.PodNetns, Dialer: net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}}).DialContext
		dialsFrom = cfg.PodNetns
	}
	publicURL := cfg.ServerPublicURL
	if publicURL == "" {
		publicURL = cfg.Server
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := proxy.NewMetrics(reg)
	var ready atomic.Bool
	ops, err := opsserver.Listen("--metrics-listen", cfg.MetricsListen, reg, func() error {
		if !ready.Load() {
			return errors.New("waiting for the server or the cluster")
		}
		return nil
	}, log)
	if err != nil {
		return err
	}
	defer ops.Close()

	server := &proxy.ServerClient{URL: cfg.Server, Token: token, HTTP: &http.Client{Timeout: 10 * time.Second}}
	info, err := agentInfo(ctx, server, log)
	if err != nil {
		return err
	}
	zone := strings.ToLower(strings.TrimSuffix(cfg.DNSZone, "."))
	switch {
	case zone == "":
		zone = info.DNSZone
	case info.DNSZone != "" && zone != info.DNSZone:
		return fmt.Errorf("--dns-zone %s: the agent %s serves %s (its config's dns_zone)", zone, info.Name, info.DNSZone)
	}
	if zone == "" {
		return errors.New("--dns-zone is required with a server that does not say the agent's zone")
	}
	if scheme := info.ProxyURLScheme; scheme != "" && (scheme == "https") != (certs != nil) {
		log.Warn("the agent's proxy_url_scheme does not match how this proxy serves; sign-in redirects will fail", "proxy_url_scheme", scheme, "tls", certs != nil)
	}

	rc, source, err := agentcmd.RESTConfig(cfg.Kubeconfig, cfg.Context)
	if err != nil {
		return err
	}
	log.Info("kubernetes configuration", "from", source, "host", rc.Host)
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	routes, err := proxy.NewRoutes(client, info.ID)
	if err != nil {
		return err
	}
	if !routes.Start(ctx) {
		return nil // interrupted before the first list
	}
	svcs, slices := routes.Count()
	log.Info("routes synced", "agent", info.Name, "agent_id", info.ID, "dns_zone", zone, "services", svcs, "endpoint_slices", slices)
	checkPodNetwork(ctx, routes, dial, dialsFrom, log)

	activity := &proxy.Activity{Sender: server, Clock: clock.Real{}, Logger: log}
	activityCtx, stopActivity := context.WithCancel(context.Background())
	activityTicker := time.NewTicker(activityEvery)
	activityDone := make(chan struct{})
	go func() { defer close(activityDone); activity.Run(activityCtx, activityTicker.C) }()
	defer func() { stopActivity(); activityTicker.Stop(); <-activityDone }()

	var sshSrv *proxy.SSHServer
	var sshLn net.Listener
	if sshKeys != nil {
		sshSrv, err = proxy.NewSSHServer(proxy.SSHOptions{
			HostKeys: []ssh.Signer{sshKeys.host}, UpstreamKey: sshKeys.client, Checker: server, Routes: routes,
			HelperHostKey: helperHostKeys(token), Dial: dial,
			Activity: activity.Record, RecheckInterval: recheck, Logger: log, Metrics: proxy.NewSSHMetrics(reg),
		})
		if err != nil {
			return err
		}
		if sshLn, err = net.Listen("tcp", cfg.SSHListen); err != nil {
			return fmt.Errorf("--ssh-listen: %w", err)
		}
		log.Info("ssh listening", "addr", sshLn.Addr().String(), "host_key", ssh.FingerprintSHA256(sshKeys.host.PublicKey()),
			"client_key", strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshKeys.client.PublicKey()))))
	}

	auth := &proxy.Auth{Checker: server, Clock: clock.Real{}, AllowTTL: ttl, DenyTTL: time.Second, MaxEntries: 100000}
	// Revocations on the server end open SSH connections, and cached decisions, at once.
	watcher := &proxy.RevocationWatcher{
		Client: &proxy.ServerClient{URL: cfg.Server, Token: token, HTTP: &http.Client{Timeout: 45 * time.Second}}, Logger: log,
		OnRevoke: func() {
			auth.Flush()
			if sshSrv != nil {
				sshSrv.RecheckNow()
			}
		},
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); watcher.Run(watchCtx) }()
	defer func() { stopWatch(); <-watchDone }()

	handler := proxy.NewHandler(proxy.Options{
		Routes: routes, Exchanger: server, ServerURL: publicURL, Zone: zone, TLS: certs != nil,
		Auth: auth, Dial: dial,
		MaxBodyBytes: maxBody, WriteTimeout: writeTimeout, Logger: log, Metrics: metrics, Activity: activity.Record,
	})
	srv := proxy.NewServer(handler, log)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	if certs != nil {
		srv.TLSConfig = &tls.Config{GetCertificate: certs.GetCertificate, MinVersion: tls.VersionTLS12}
	}
	ready.Store(true)
	log.Info("proxy listening", "addr", ln.Addr().String(), "tls", certs != nil, "dns_zone", zone, "server", cfg.Server)

	var wg sync.WaitGroup
	errc := make(chan error, 2)
	if sshSrv != nil {
		wg.Go(func() {
			if err := sshSrv.Serve(sshLn); !errors.Is(err, proxy.ErrSSHServerClosed) {
				errc <- err
			}
		})
	}
	wg.Go(func() {
		if certs != nil {
			errc <- srv.ServeTLS(ln, "", "") // HTTP/2 through ALPN
		} else {
			errc <- srv.Serve(ln)
		}
	})
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			if sshSrv != nil {
				sshSrv.Close()
			}
			return fmt.Errorf("serve: %w", err)
		}
	}
	ready.Store(false)
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	if sshSrv != nil {
		sshSrv.Close()
	}
	wg.Wait()
	return nil
}

// checkPodNetwork says at start whether the workspaces can be reached from where the proxy dials
// them: it dials one ready workspace endpoint, if there is one, once. No route to it (what the host
// of the local test cluster answers for pod addresses) is a Warn naming the cause and --pod-netns;
// with no workspace running it says only where it will dial from, as nothing else is known yet.
func checkPodNetwork(ctx context.Context, routes *proxy.Routes, dial func(context.Context, string, string) (net.Conn, error), from string, log *slog.Logger) {
	addr := routes.AnyAddr()
	if addr == "" {
		log.Info("no workspace runs yet: the first request to one shows whether the pod network is reachable", "dials_from", from)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := dial(ctx, "tcp", addr)
	if err == nil {
		_ = conn.Close()
		log.Info("the pod network is reachable", "dials_from", from, "checked", addr)
		return
	}
	if msg, ok := proxy.PodNetworkUnreachable(addr, err); ok {
		log.Warn(msg, "dials_from", from, "err", err)
		return
	}
	log.Warn("cannot reach a running workspace's endpoint; its pod may not be listening yet", "dials_from", from, "addr", addr, "err", err)
}

// agentInfo asks the server who the agent is, retrying while the server is unreachable.
func agentInfo(ctx context.Context, server *proxy.ServerClient, log *slog.Logger) (info protocol.AgentInfo, err error) {
	delay := 500 * time.Millisecond
	for {
		info, err = server.Info(ctx)
		if err == nil || apiclient.HasCode(err, sdk.CodeUnauthorized) {
			if err != nil {
				return info, fmt.Errorf("the server refused the agent token: %w", err)
			}
			return info, nil
		}
		log.Warn("cannot reach the server; retrying", "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return info, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 10*time.Second)
	}
}

type sshKeyPair struct{ host, client ssh.Signer }

// loadSSHKeys reads the proxy's host key and its key for the workspaces' helpers.
func loadSSHKeys(hostFile, clientFile string) (*sshKeyPair, error) {
	if hostFile == "" || clientFile == "" {
		return nil, errors.New("--ssh-listen needs --ssh-host-key-file and --ssh-client-key-file (make them with: ssh-keygen -t ed25519 -N '' -f FILE)")
	}
	var keys [2]ssh.Signer
	for i, f := range []string{hostFile, clientFile} {
		flag := []string{"--ssh-host-key-file", "--ssh-client-key-file"}[i]
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		if keys[i], err = ssh.ParsePrivateKey(b); err != nil {
			return nil, fmt.Errorf("%s %s: %w (want an unencrypted private key, as ssh-keygen -N '' writes)", flag, f, err)
		}
	}
	return &sshKeyPair{host: keys[0], client: keys[1]}, nil
}

// helperHostKeys derives each workspace's helper host key from the agent's token, as the server does
// from its hash (workspace.HelperHostKey).
func helperHostKeys(agentToken string) func(string) ssh.PublicKey {
	hash := sha256.Sum256([]byte(agentToken))
	return func(workspaceID string) ssh.PublicKey {
		pub, err := ssh.NewPublicKey(workspace.HelperHostKey(hash[:], workspaceID).Public())
		if err != nil {
			return nil // refuses: cannot happen for an ed25519 key
		}
		return pub
	}
}
