package servercmd

import (
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/internal/server"
)

func TestAppsOptions(t *testing.T) {
	for _, c := range []struct {
		zone, access string
		want         server.AppsOptions
		err          string
	}{
		{zone: "auto", access: "http://127.0.0.1:7080", want: server.AppsOptions{Zone: "apps.localhost", Scheme: "http", Port: "7080", ServerURL: "http://127.0.0.1:7080"}},
		{zone: "auto", access: "http://localhost:7080", want: server.AppsOptions{Zone: "apps.localhost", Scheme: "http", Port: "7080", ServerURL: "http://localhost:7080"}},
		{zone: "auto", access: "http://[::1]:7080", want: server.AppsOptions{Zone: "apps.localhost", Scheme: "http", Port: "7080", ServerURL: "http://[::1]:7080"}},
		{zone: "auto", access: "https://hangar.example.com"}, // off: no zone can be guessed
		{zone: "none", access: "http://127.0.0.1:7080"},
		{zone: "Apps.Example.com.", access: "https://hangar.example.com", want: server.AppsOptions{Zone: "apps.example.com", Scheme: "https", ServerURL: "https://hangar.example.com"}},
		{zone: "apps.example.com", access: "https://hangar.example.com:8443", want: server.AppsOptions{Zone: "apps.example.com", Scheme: "https", Port: "8443", ServerURL: "https://hangar.example.com:8443"}},
		{zone: "hangar.example.com", access: "https://hangar.example.com", err: "the access URL's own host"},
		{zone: "localhost", access: "http://127.0.0.1:7080", err: "want a DNS name"},
		{zone: "a_b.example.com", access: "http://127.0.0.1:7080", err: "want a DNS name"},
		{zone: "*.example.com", access: "http://127.0.0.1:7080", err: "want a DNS name"},
	} {
		got, err := AppsOptions(c.zone, c.access)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "--apps-zone") {
				t.Errorf("%s on %s: %v, want an error about %q naming --apps-zone", c.zone, c.access, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s on %s: %+v, %v; want %+v", c.zone, c.access, got, err, c.want)
		}
	}
}
