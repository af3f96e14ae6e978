package server_test

import (
	"io"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/server"
)

// BenchmarkTerraformApps (docs/benchmarks.md, "Terraform workspaces' apps through the server"): a
// port of a Terraform workspace's machine reached through the server (the proxy's handler, the
// helper's yamux session over a WebSocket, the server's SSH connection and a direct-tcpip
// channel), against the same app reached directly; all on loopback, SQLite, the access decision
// from the cache as for a user's successive requests.
func BenchmarkTerraformApps(b *testing.B) {
	ae := newAgentEnv(b, "sqlite", func(o *server.Options) {
		o.Apps = server.AppsOptions{Zone: "apps.test", Scheme: "http", ServerURL: "http://hangar.test"}
	})
	env := ae.Env
	port := machineApp(b)
	h := startHelper(b, env.URL, ae.job.AgentToken)
	within(b, h.connected, "the helper's connection")
	waitRegistered(b, env, ae.dev, "tfw")
	host := strconv.Itoa(port) + "-tfw--dev.apps.test"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	get := func(b *testing.B, via, path string) int64 {
		url := "http://127.0.0.1:" + strconv.Itoa(port) + path
		if via == "server" {
			url = env.URL + path
		}
		req, _ := http.NewRequest("GET", url, nil)
		if via == "server" {
			req.Host = host
			req.Header.Set("Authorization", "Bearer "+ae.dev)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s via %s: %d, %v", path, via, resp.StatusCode, err)
		}
		return n
	}
	b.Run("latency", func(b *testing.B) {
		for _, via := range []string{"direct", "server"} {
			b.Run(via, func(b *testing.B) {
				get(b, via, "/") // the connections, and the access decision, before timing
				durations := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					start := time.Now()
					get(b, via, "/")
					durations = append(durations, time.Since(start))
				}
				b.StopTimer()
				slices.Sort(durations)
				b.ReportMetric(float64(durations[len(durations)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds()), "p99-µs")
			})
		}
	})
	b.Run("download", func(b *testing.B) {
		const size = 64 << 20
		for _, via := range []string{"direct", "server"} {
			b.Run(via, func(b *testing.B) {
				get(b, via, "/")
				b.SetBytes(size)
				b.ResetTimer()
				for range b.N {
					if n := get(b, via, "/big?bytes="+strconv.Itoa(size)); n != size {
						b.Fatalf("downloaded %d bytes", n)
					}
				}
			})
		}
	})
}
