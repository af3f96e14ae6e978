package loadcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/internal/cmdopt"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// `hangar load sim-agent` (hidden) is the fault harness's agent: one simulated agent in a process
// of its own, so that the harness can kill -9 it. Its "cluster" is a JSON file (ClusterFile)
// written, atomically, before the server is told what was applied: what survives a kill -9 of the
// agent, as a real cluster's Deployments do. A started sim-agent sends a full reconcile of its
// cluster first, as `hangar agent` does, then partial ones every interval, reporting the
// Deployments whose resourceVersion the server has not echoed. It talks to the first server
// replica that answers, as an agent behind a load balancer would.

// simCluster is what the simulated cluster holds: a Deployment per workspace cluster name.
type simCluster map[string]*simDeployment

type simDeployment struct {
	Namespace string `json:"namespace"`
	Running   bool   `json:"running"`
	RV        int    `json:"rv"`
}

func simAgentCommand() *cobra.Command {
	var servers, tokenFile, clusterFile, interval string
	cmd := &cobra.Command{
		Use:    "sim-agent",
		Short:  "Run one simulated agent whose cluster is a file (the fault harness's agent)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			d, err := time.ParseDuration(interval)
			if err != nil || d <= 0 {
				return fmt.Errorf("--interval: want a duration such as 500ms, got %q", interval)
			}
			token, err := cmdopt.ReadToken(tokenFile, "hangar agents create")
			if err != nil {
				return err
			}
			return runSimAgent(ctx, strings.Split(servers, ","), token, clusterFile, d)
		},
	}
	cmdopt.Register(cmd, []cmdopt.Option{
		cmdopt.String(&servers, "servers", "HANGAR_SIM_SERVERS", "", "comma-separated server URLs (on loopback)"),
		cmdopt.String(&tokenFile, "token-file", "HANGAR_SIM_TOKEN_FILE", "", "file holding the agent's token"),
		cmdopt.String(&clusterFile, "cluster-file", "HANGAR_SIM_CLUSTER_FILE", "", "the simulated cluster's file (created if missing)"),
		cmdopt.String(&interval, "interval", "HANGAR_SIM_INTERVAL", "500ms", "period between partial reconciles"),
	})
	return cmd
}

func runSimAgent(ctx context.Context, servers []string, token, clusterFile string, interval time.Duration) error {
	for _, s := range servers {
		if err := loopbackURL(s); err != nil {
			return err
		}
	}
	cluster := simCluster{}
	if b, err := os.ReadFile(clusterFile); err == nil {
		if err := json.Unmarshal(b, &cluster); err != nil {
			return fmt.Errorf("read the cluster file: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	client := &http.Client{Timeout: 30 * time.Second}
	echoed := map[string]bool{} // by cluster name: the server echoed the current rv
	full := true
	next := 0 // the server to try first
	for {
		req := protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}}
		if full {
			req.UpdateType = protocol.UpdateFull
		}
		for name, d := range cluster {
			if full || !echoed[name] {
				req.WorkspaceAgentInfos = append(req.WorkspaceAgentInfos, protocol.WorkspaceAgentInfo{Name: name, Namespace: d.Namespace, LatestK8sDeploymentInfo: simDeploymentInfo(d)})
			}
		}
		var resp protocol.ReconcileResponse
		var err error
		for try := 0; try < len(servers); try++ {
			s := servers[(next+try)%len(servers)]
			if err = simPost(ctx, client, s+protocol.ReconcilePath, token, req, &resp); err == nil {
				next = (next + try) % len(servers)
				break
			}
		}
		if err == nil {
			changed := false
			for _, w := range resp.WorkspaceRailsInfos {
				d := cluster[w.Name]
				switch {
				case w.DesiredState == string(workspace.Terminated):
					if d != nil {
						delete(cluster, w.Name)
						changed = true
					}
				case w.ConfigToApply != "":
					if d == nil {
						d = &simDeployment{Namespace: w.Namespace}
						cluster[w.Name] = d
					}
					d.Running = w.DesiredState == string(workspace.Running)
					d.RV++
					echoed[w.Name] = false
					changed = true
				case d != nil && w.DeploymentResourceVersion == strconv.Itoa(d.RV):
					echoed[w.Name] = true
				}
			}
			if changed {
				if err := writeFileAtomic(clusterFile, cluster); err != nil {
					return err
				}
			}
			full = false
		} else if ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "sim-agent: reconcile: %v\n", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// simDeploymentInfo is a Deployment settled in the state last applied.
func simDeploymentInfo(d *simDeployment) *protocol.DeploymentInfo {
	cond := func(typ, reason string) protocol.DeploymentCondition {
		return protocol.DeploymentCondition{Type: typ, Status: "True", Reason: reason}
	}
	replicas := int32(0)
	status := &protocol.DeploymentStatus{}
	if d.Running {
		replicas = 1
		status = &protocol.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}
	}
	status.Conditions = []protocol.DeploymentCondition{cond("Available", "MinimumReplicasAvailable"), cond("Progressing", "NewReplicaSetAvailable")}
	return &protocol.DeploymentInfo{Metadata: protocol.DeploymentMetadata{ResourceVersion: strconv.Itoa(d.RV)},
		Spec: &protocol.DeploymentSpec{Replicas: &replicas}, Status: status}
}

func simPost(ctx context.Context, client *http.Client, target, token string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, out)
}

// writeFileAtomic writes v as JSON to path through a temporary file and a rename: a kill -9 leaves
// the old file or the new one, never half of one.
func writeFileAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cluster-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
