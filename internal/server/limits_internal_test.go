package server

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
)

func TestClientAddr(t *testing.T) {
	proxies, err := ParseTrustedProxies("10.0.0.0/8, 192.0.2.1 ,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, peer string
		xff        []string
		proxies    []netip.Prefix
		want       string
	}{
		{"no trusted proxies: the header is ignored", "203.0.113.5:1234", []string{"198.51.100.1"}, nil, "203.0.113.5"},
		{"an untrusted peer: the header is ignored", "203.0.113.5:1234", []string{"198.51.100.1"}, proxies, "203.0.113.5"},
		{"a trusted peer: the client it names", "10.1.2.3:1234", []string{"198.51.100.1"}, proxies, "198.51.100.1"},
		{"the nearest untrusted hop, not a forged leftmost one", "10.1.2.3:1234", []string{"1.1.1.1, 198.51.100.1, 192.0.2.1"}, proxies, "198.51.100.1"},
		{"several headers are one list", "10.1.2.3:1234", []string{"1.1.1.1", "198.51.100.1", "10.9.9.9"}, proxies, "198.51.100.1"},
		{"a hop with a port", "10.1.2.3:1234", []string{"198.51.100.1:5555"}, proxies, "198.51.100.1"},
		{"IPv6 in brackets", "[fd00::1]:1234", []string{"[2001:db8::7]"}, proxies, "2001:db8::7"},
		{"garbage stops at the last trusted hop", "10.1.2.3:1234", []string{"198.51.100.1, bogus, 10.4.4.4"}, proxies, "10.4.4.4"},
		{"no header: the proxy itself", "10.1.2.3:1234", nil, proxies, "10.1.2.3"},
		{"all trusted: the leftmost", "10.1.2.3:1234", []string{"10.7.7.7, 192.0.2.1"}, proxies, "10.7.7.7"},
		{"an IPv4-mapped peer", "[::ffff:10.1.2.3]:1234", []string{"198.51.100.1"}, proxies, "198.51.100.1"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := clientAddrOf(r, c.proxies); got.String() != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.1-10.0.0.9"} {
		if _, err := ParseTrustedProxies(bad); err == nil || !strings.Contains(err.Error(), "CIDR") {
			t.Errorf("%q: %v, want an error", bad, err)
		}
	}
}

// FuzzClientAddr: any X-Forwarded-For gives the peer or one of the header's addresses, never a
// panic.
func FuzzClientAddr(f *testing.F) {
	f.Add("198.51.100.1, 10.0.0.1")
	f.Add("[2001:db8::1]:80,,bogus")
	f.Add("")
	proxies, _ := ParseTrustedProxies("10.0.0.0/8")
	f.Fuzz(func(t *testing.T, xff string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.9:1"
		r.Header.Set("X-Forwarded-For", xff)
		got := clientAddrOf(r, proxies)
		if got.String() == "10.0.0.9" {
			return
		}
		if !got.IsValid() {
			t.Fatalf("%q: no address", xff)
		}
		found := false
		for _, h := range strings.Split(xff, ",") {
			if a, err := parseHop(h); err == nil && a == got {
				found = true
			}
		}
		if !found {
			t.Fatalf("%q: %s is in the header nowhere", xff, got)
		}
	})
}

// The limiter's memory is bounded: past its size, full buckets and then the longest quiet ones go;
// IPv6 addresses of one /64 share a bucket.
func TestAuthLimiterMemory(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := newAuthLimiter(AuthLimit{Burst: 2, Every: time.Minute}, clk.Now, slog.New(slog.NewTextHandler(io.Discard, nil)))
	l.max = 100
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}) }
	for i := range 1000 {
		clk.Advance(time.Second)
		l.failed(addr(i))
		l.failed(addr(i))
		if n := len(l.buckets); n > l.max {
			t.Fatalf("%d buckets, the most is %d", n, l.max)
		}
	}
	// The latest address is still limited; the first was forgotten.
	if _, blocked := l.blocked(addr(999)); !blocked {
		t.Error("the latest address is not limited")
	}
	if _, blocked := l.blocked(addr(0)); blocked {
		t.Error("the first address is remembered past the bound")
	}
	v6 := netip.MustParseAddr("2001:db8:1:2::1")
	l.failed(v6)
	l.failed(netip.MustParseAddr("2001:db8:1:2:ffff::9"))
	if _, blocked := l.blocked(netip.MustParseAddr("2001:db8:1:2::77")); !blocked {
		t.Error("addresses of one /64 are not counted together")
	}
	if _, blocked := l.blocked(netip.MustParseAddr("2001:db8:1:3::1")); blocked {
		t.Error("another /64 is limited")
	}
}
