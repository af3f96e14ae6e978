package protocol

import "time"

// The access proxy's endpoints on the server (`hangar proxy` calls them with its agent's token;
// docs/decisions.md, "The access proxy").
const (
	// ProxyExchangePath turns a one-time code from the browser's redirect into a workspace session.
	ProxyExchangePath = "/api/v1/proxy/exchange"
	// ProxyCheckPath says whether a workspace session or a user's token may enter a host.
	ProxyCheckPath = "/api/v1/proxy/check"
	// ProxyAuthorizePath is the server's browser endpoint a proxy redirects a browser without a
	// session to: ?host=H&path=P&nonce=N, N the SHA-256 (hex) of the nonce cookie the proxy set in
	// that browser. The server answers with a redirect to ProxyCallbackPath on H.
	ProxyAuthorizePath = "/proxy/authorize"
	// ProxyCallbackPath is the proxy's path, on every workspace host, that receives the code:
	// ?code=C&path=P.
	ProxyCallbackPath = "/.hangar/callback"
	// MaxProxyBodyBytes caps the bodies of the proxy endpoints.
	MaxProxyBodyBytes = 16 << 10
)

// ProxyExchangeRequest is the body of ProxyExchangePath: the code and the host it came to.
type ProxyExchangeRequest struct {
	Code string `json:"code"`
	Host string `json:"host"`
	// Nonce is the SHA-256 (lower-case hex) of the nonce cookie of the browser that brought the
	// code: the server finds a code only with the nonce it was issued for (the one in the
	// /proxy/authorize link), so a code carried to another browser is refused.
	Nonce string `json:"nonce"`
}

// ProxyExchangeResponse holds the workspace session for the proxy's cookie.
type ProxyExchangeResponse struct {
	Session   string    `json:"session"`
	ExpiresAt time.Time `json:"expires_at"`
	User      string    `json:"user"`
	Workspace string    `json:"workspace"` // owner/name
}

// ProxyCheckRequest asks whether a workspace session (the proxy's cookie) or a user's bearer token
// may enter host. Exactly one of Session and Token is set.
type ProxyCheckRequest struct {
	Host    string `json:"host"`
	Session string `json:"session,omitempty"`
	Token   string `json:"token,omitempty"`
	// ClientAddress is the IP address of the client that sent the credential (the proxy's TCP
	// peer), for the server's rate limit of failed authentications (docs/decisions.md, "Server
	// hardening"): a token refused as unauthenticated counts against this address, and a token
	// from an address over the limit is answered ProxyRateLimited. Empty (a proxy older than
	// protocol version 6, or a recheck of a connection already open): nothing is counted.
	ClientAddress string `json:"client_address,omitempty"`
}

// Reasons a ProxyCheckResponse refuses.
const (
	// ProxyUnauthenticated: the session or token is unknown, expired, of a removed user, or of a
	// token that changed. The proxy asks the browser to sign in again.
	ProxyUnauthenticated = "unauthenticated"
	// ProxyForbidden: the user is neither the workspace's owner nor an admin.
	ProxyForbidden = "forbidden"
	// ProxyNotFound: no live Kubernetes workspace of this agent has this host as a public endpoint.
	ProxyNotFound = "not_found"
	// ProxyRateLimited: too many tokens from the request's ClientAddress were refused lately;
	// every token from it, good or bad, is refused until RetryAfter seconds have passed. The
	// proxy answers 429 with Retry-After (HTTP), or refuses the password (SSH). Only a request
	// with a ClientAddress is answered so.
	ProxyRateLimited = "rate_limited"
)

// ProxyCheckResponse is the server's decision.
type ProxyCheckResponse struct {
	Allowed bool `json:"allowed"`
	// Reason is empty when allowed, else one of the Proxy* reasons.
	Reason    string `json:"reason,omitempty"`
	User      string `json:"user,omitempty"`
	Workspace string `json:"workspace,omitempty"` // owner/name
	// Status is the workspace's actual state (when the workspace was found).
	Status string `json:"status,omitempty"`
	// RetryAfter is, with ProxyRateLimited, how many seconds until the client's address may try
	// again (at least 1).
	RetryAfter int `json:"retry_after,omitempty"`
}
