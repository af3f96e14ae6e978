package server

import (
	"net/netip"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// Failed authentications through a proxy (docs/decisions.md, "Server hardening"): a proxy (an
// agent's `hangar proxy`, or the server's own apps handler in process) checks a user's token on
// the user's behalf, and the server answers a refusal as a decision (200), never a 401: the limit
// of failed authentications (limits.go) would never see a guesser behind a proxy, only the proxy's
// successful calls. So the proxy says who its client is (client_address), and the check counts a
// refused token against that address in the same limiter, and refuses every token from an address
// over the limit before looking it up, as harden does for the server's own requests.

// maxClientAddressLen bounds a check's client_address: the longest IPv6 address with a zone is
// well under it.
const maxClientAddressLen = 64

// parseClientAddress reads a check's client_address: the zero Addr when it is empty (a proxy older
// than protocol version 6, or a recheck of an open connection), else an IP address (unmapped, its
// zone dropped), or a validation error naming the field.
func parseClientAddress(v *workspace.ValidationError, s string) netip.Addr {
	if s == "" {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(s)
	if len(s) > maxClientAddressLen || err != nil {
		v.Add("client_address", "must be the client's IP address (such as 203.0.113.7 or 2001:db8::7)")
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}

// proxiedLimited reports whether a token sent through a proxy from addr is refused before it is
// looked up, and in how many seconds addr may try again. A zero addr (none said) is never limited.
func (s *Server) proxiedLimited(addr netip.Addr) (retryAfter int, limited bool) {
	if !addr.IsValid() {
		return 0, false
	}
	wait, blocked := s.authFailures.blocked(addr)
	if !blocked {
		return 0, false
	}
	return retrySeconds(wait), true
}

// proxiedFailed counts a token sent through a proxy from addr that was refused as unauthenticated;
// the limiter logs, once per window, the address it runs dry for.
func (s *Server) proxiedFailed(addr netip.Addr) {
	if addr.IsValid() {
		s.authFailures.failed(addr)
	}
}

// rateLimitedCheck is the decision for a token from an address over the limit.
func rateLimitedCheck(retryAfter int) protocol.ProxyCheckResponse {
	return protocol.ProxyCheckResponse{Reason: protocol.ProxyRateLimited, RetryAfter: retryAfter}
}
