package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// The client's address, as the limits (limits.go) and the log see it: the TCP peer, unless the peer
// is a proxy the operator trusts (--trusted-proxies), in which case X-Forwarded-For says who the
// client is. Without trusted proxies the header is ignored: anyone can send it.

// ParseTrustedProxies reads a comma-separated list of addresses and CIDR prefixes (10.0.0.0/8,
// 192.0.2.7, fd00::/8). Empty: none.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP address nor a CIDR prefix (such as 10.0.0.0/8)", f)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

func trusted(proxies []netip.Prefix, a netip.Addr) bool {
	for _, p := range proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerAddr is the TCP peer of r (the zero Addr when RemoteAddr is not an address, as in tests that
// call a handler directly).
func peerAddr(r *http.Request) netip.Addr {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return ap.Addr().Unmap()
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, _ := netip.ParseAddr(strings.Trim(host, "[]"))
	return a.Unmap()
}

// clientAddrOf is the client's address: the TCP peer, or when the peer is a trusted proxy, the
// nearest address in X-Forwarded-For (read from the right, the hops the trusted proxies appended)
// that is not itself a trusted proxy. An entry that is not an address ends the walk at the hop
// after it, the last one a trusted proxy vouched for.
func clientAddrOf(r *http.Request, proxies []netip.Prefix) netip.Addr {
	addr := peerAddr(r)
	if len(proxies) == 0 || !trusted(proxies, addr) {
		return addr
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		h, err := parseHop(hops[i])
		if err != nil {
			return addr
		}
		addr = h
		if !trusted(proxies, h) {
			return h
		}
	}
	return addr
}

// parseHop reads one X-Forwarded-For entry: an address, possibly with a port or in brackets.
func parseHop(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), nil
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	return a.Unmap(), err
}

// clientAddr is r's client address under the server's --trusted-proxies.
func (s *Server) clientAddr(r *http.Request) netip.Addr { return clientAddrOf(r, s.trustedProxies) }

// addrKey is what limits count an address under: an IPv4 address, or an IPv6 address's /64 (the
// smallest block a host is given; one host can take any address in it).
func addrKey(a netip.Addr) netip.Addr {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}
