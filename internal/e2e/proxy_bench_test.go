package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkProxyRealNode: a webecho workspace on the real node, reached from inside the cluster's
// network namespace directly at its pod IP (plain HTTP/1.1) and through `hangar proxy` (TLS,
// HTTP/1.1 and HTTP/2), each on a kept-alive connection: latency of a small page (p50, p99 over
// 2,000 requests per iteration) and the throughput of a 256 MiB download.
func BenchmarkProxyRealNode(b *testing.B) {
	e := setUpProxy(b)
	ctx := context.Background()
	token, alice := e.user(b, "alice")
	w := e.webWorkspace(b, alice, "web")
	pods, err := e.cluster.Client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		b.Fatalf("the workspace's pod: %v", err)
	}
	podAddr := net.JoinHostPort(pods.Items[0].Status.PodIP, "8080")
	direct := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return e.cluster.DialInside(ctx, podAddr)
	}}}
	clients := []struct {
		name   string
		c      *http.Client
		base   string
		bearer string
	}{
		{"direct", direct, "http://" + podAddr + "/", ""},
		{"proxy-h1", &http.Client{Transport: e.transport(false)}, w.URL, token},
		{"proxy-h2", &http.Client{Transport: e.transport(true)}, w.URL, token},
	}
	fetch := func(c *http.Client, url, bearer string) int64 {
		req, _ := http.NewRequest("GET", url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
		}
		return n
	}
	// The route and the endpoint: Running may come a moment before the proxy sees the pod ready.
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest("GET", w.URL, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := clients[2].c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("the page through the proxy: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	const size = 256 << 20
	for _, cl := range clients {
		b.Run("latency/"+cl.name, func(b *testing.B) {
			fetch(cl.c, cl.base, cl.bearer)
			var d []time.Duration
			for range b.N {
				for range 2000 {
					start := time.Now()
					fetch(cl.c, cl.base, cl.bearer)
					d = append(d, time.Since(start))
				}
			}
			slices.Sort(d)
			b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
		})
		b.Run("download/"+cl.name, func(b *testing.B) {
			b.SetBytes(size)
			for range b.N {
				if n := fetch(cl.c, cl.base+"big?bytes="+strconv.Itoa(size), cl.bearer); n != size {
					b.Fatalf("%d bytes", n)
				}
			}
		})
	}
}
