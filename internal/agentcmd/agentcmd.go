// Package agentcmd is `hangar agent`: it reads options (flags, each also an environment variable),
// connects to the cluster (a kubeconfig, or the in-cluster config) and to the server, and runs the
// agent until interrupted.
package agentcmd

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hangar-dev/hangar/internal/agent"
	"github.com/hangar-dev/hangar/internal/cmdopt"
	"github.com/hangar-dev/hangar/internal/logging"
	"github.com/hangar-dev/hangar/internal/opsserver"
)

// Config is the agent's configuration.
type Config struct {
	Server, TokenFile, Kubeconfig, Context, LeaseNamespace, Identity, LogLevel, LogFormat string
	ApplyConcurrency, KubeQPS, KubeBurst                                                  string
	MetricsListen                                                                         string
}

// Command returns `hangar agent`.
func Command() *cobra.Command {
	var cfg Config
	host, _ := os.Hostname()
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a Hangar agent next to a Kubernetes cluster",
		Long: "Run a Hangar agent. It watches the Deployments of its workspaces, reports their state to the server\n" +
			"(full and partial reconciles) and applies the configuration the server sends back.\n\n" +
			"Every flag can also be set with the environment variable shown.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Run(ctx, cfg)
		},
	}
	cmdopt.Register(cmd, []cmdopt.Option{
		cmdopt.String(&cfg.Server, "server", "HANGAR_SERVER", "http://127.0.0.1:7080", "URL of the Hangar server"),
		cmdopt.String(&cfg.TokenFile, "token-file", "HANGAR_AGENT_TOKEN_FILE", "", "file holding the agent's token (from `hangar agents create`)"),
		cmdopt.String(&cfg.Kubeconfig, "kubeconfig", "HANGAR_KUBECONFIG", "", "kubeconfig file of the cluster; empty follows the usual rules: $KUBECONFIG (several files, merged), ~/.kube/config, then the in-cluster configuration"),
		cmdopt.String(&cfg.Context, "context", "HANGAR_KUBE_CONTEXT", "", "kubeconfig context to use (default: the kubeconfig's current context)"),
		cmdopt.String(&cfg.LeaseNamespace, "lease-namespace", "HANGAR_LEASE_NAMESPACE", "hangar-agent", "namespace of the leader-election Lease; empty disables leader election (run one replica only)"),
		cmdopt.String(&cfg.Identity, "identity", "HANGAR_AGENT_IDENTITY", fmt.Sprintf("%s-%d", host, os.Getpid()), "this replica's name in leader election"),
		cmdopt.String(&cfg.ApplyConcurrency, "apply-concurrency", "HANGAR_APPLY_CONCURRENCY", strconv.Itoa(agent.DefaultApplyConcurrency), "how many workspaces the agent applies at once (they share --kube-qps)"),
		cmdopt.String(&cfg.KubeQPS, "kube-qps", "HANGAR_KUBE_QPS", strconv.Itoa(DefaultKubeQPS), "requests per second the agent may send to the Kubernetes API (leader election has its own 5/s)"),
		cmdopt.String(&cfg.KubeBurst, "kube-burst", "HANGAR_KUBE_BURST", strconv.Itoa(DefaultKubeBurst), "requests the agent may send at once above --kube-qps"),
		cmdopt.String(&cfg.MetricsListen, "metrics-listen", "HANGAR_AGENT_METRICS_LISTEN", DefaultMetricsListen, "address of /metrics, /healthz and /readyz (empty: none); in a pod, :9090 so that the kubelet's probes reach it"),
		cmdopt.String(&cfg.LogLevel, "log-level", "HANGAR_LOG_LEVEL", "info", "debug, info, warn or error"),
		cmdopt.String(&cfg.LogFormat, "log-format", "HANGAR_LOG_FORMAT", "text", "text or json"),
	})
	return cmd
}

// Default rate limits of the agent's Kubernetes client (--kube-qps, --kube-burst).
// 1,000 new workspaces are 8,000 applies: 160 s at the former fixed 50/s, 40 s at 200/s. The API
// server's priority and fairness still protects it (docs/decisions.md, "Apply only what changed").
const DefaultKubeQPS, DefaultKubeBurst = 200, 400

// DefaultMetricsListen is where the agent serves /metrics, /healthz and /readyz unless told
// otherwise: loopback, as the proxy's, so that nothing is exposed on a shared host by default.
const DefaultMetricsListen = "127.0.0.1:9090"

// Run runs the agent until ctx ends.
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
	applyConcurrency, err := wholeNumber("--apply-concurrency", cfg.ApplyConcurrency, 1, 1000)
	if err != nil {
		return err
	}
	qps, err := wholeNumber("--kube-qps", cfg.KubeQPS, 1, 100000)
	if err != nil {
		return err
	}
	burst, err := wholeNumber("--kube-burst", cfg.KubeBurst, 1, 100000)
	if err != nil {
		return err
	}
	rc, source, err := RESTConfig(cfg.Kubeconfig, cfg.Context)
	if err != nil {
		return err
	}
	log.Info("kubernetes configuration", "from", source, "host", rc.Host)
	rc.QPS, rc.Burst = float32(qps), burst
	kube, err := agent.NewKube(rc)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	recorder, stopEvents := agent.NewEventRecorder(kube)
	defer stopEvents()
	a := agent.New(agent.Options{
		Server: &agent.ServerClient{URL: cfg.Server, Token: token, HTTP: &http.Client{Timeout: 2 * time.Minute}},
		Kube:   kube, Logger: log, Identity: cfg.Identity, LeaseNamespace: cfg.LeaseNamespace,
		ApplyConcurrency: applyConcurrency, Metrics: agent.NewMetrics(reg), Events: recorder,
	})
	ops, err := opsserver.Listen("--metrics-listen", cfg.MetricsListen, reg, a.Ready, log)
	if err != nil {
		return err
	}
	defer ops.Close()
	err = a.Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func wholeNumber(flag, v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s: want a whole number from %d to %d, got %q", flag, lo, hi, v)
	}
	return n, nil
}

// RESTConfig finds the cluster as kubectl does: the kubeconfig file given (--kubeconfig), else the
// files of $KUBECONFIG (a list, merged: the first file to set a value wins), else ~/.kube/config;
// kubeContext ("" for the current context) picks the context. With none of these, it is the
// in-cluster configuration (the pod's service account). source says which it was.
func RESTConfig(kubeconfig, kubeContext string) (cfg *rest.Config, source string, err error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: kubeContext}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err = cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, "", fmt.Errorf("no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, write ~/.kube/config, or run the agent in a cluster")
		}
		return nil, "", fmt.Errorf("kubernetes configuration: %w", err)
	}
	raw, rawErr := cc.RawConfig()
	switch {
	case rawErr == nil && len(raw.Contexts) == 0 && len(raw.Clusters) == 0:
		return cfg, "in-cluster", nil
	case kubeconfig != "":
		source = kubeconfig
	default:
		source = strings.Join(rules.GetLoadingPrecedence(), string(os.PathListSeparator))
	}
	ctxName := kubeContext
	if ctxName == "" && rawErr == nil {
		ctxName = raw.CurrentContext
	}
	return cfg, source + " (context " + ctxName + ")", nil
}
