package workspace

import (
	"encoding/json"
	"strings"
	"testing"
)

// The proxy's settings in the agent config: defaults, and what Validate refuses.
func TestProxyConfig(t *testing.T) {
	c := AgentConfig{}.WithDefaults()
	if c.ProxyURLScheme != "https" || len(c.ProxyPodSelector) != 1 || c.ProxyPodSelector[DefaultProxyPodLabel] != DefaultProxyPodLabelValue {
		t.Fatalf("defaults: scheme %q, selector %v", c.ProxyURLScheme, c.ProxyPodSelector)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for in, field := range map[string]string{
		`{"proxy_pod_selector":{}}`:                   "config.proxy_pod_selector",
		`{"proxy_pod_selector":{"bad key!":"x"}}`:     `config.proxy_pod_selector["bad key!"]`,
		`{"proxy_pod_selector":{"app":"not valid!"}}`: `config.proxy_pod_selector["app"]`,
		`{"proxy_url_scheme":"ftp"}`:                  "config.proxy_url_scheme",
		`{"proxy_url_port":-1}`:                       "config.proxy_url_port",
		`{"proxy_url_port":65536}`:                    "config.proxy_url_port",
	} {
		var c AgentConfig
		if err := json.Unmarshal([]byte(in), &c); err != nil {
			t.Fatal(err)
		}
		err := c.WithDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), field+":") {
			t.Errorf("%s: %v, want a problem naming %s", in, err, field)
		}
	}
	var http AgentConfig
	_ = json.Unmarshal([]byte(`{"proxy_url_scheme":"http","proxy_pod_selector":{"team":"proxy"}}`), &http)
	if err := http.WithDefaults().Validate(); err != nil {
		t.Errorf("http and a custom selector: %v", err)
	}
}

// A workspace's URL carries the proxy's port when it is not the scheme's own.
func TestEndpointURL(t *testing.T) {
	for _, tc := range []struct {
		scheme string
		port   int
		path   string
		want   string
	}{
		{"https", 0, "", "https://3000-dev--alice.ws.example.com/"},
		{"https", 8443, "/ui", "https://3000-dev--alice.ws.example.com:8443/ui"},
		{"https", 443, "/", "https://3000-dev--alice.ws.example.com/"},
		{"http", 80, "", "http://3000-dev--alice.ws.example.com/"},
		{"http", 8080, "x", "http://3000-dev--alice.ws.example.com:8080/x"},
		{"http", 443, "", "http://3000-dev--alice.ws.example.com:443/"},
	} {
		c := AgentConfig{DNSZone: "ws.example.com", ProxyURLScheme: tc.scheme, ProxyURLPort: tc.port}
		if got := c.EndpointURL(3000, "dev", "alice", tc.path); got != tc.want {
			t.Errorf("%s port %d path %q: %s, want %s", tc.scheme, tc.port, tc.path, got, tc.want)
		}
	}
}
