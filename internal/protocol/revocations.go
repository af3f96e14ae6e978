package protocol

// ProxyRevocationsPath is the long-poll a proxy makes, with its agent's token, to learn at once that
// access was taken away somewhere (a token revoked, a user suspended or deleted, a key removed, a
// sign-out): ?after=N&timeout_seconds=T answers as soon as the server's revocation counter is past
// N, or after T seconds (1 to 60, default 30) with the counter as it is. A proxy starts with
// after=-1 (answered at once, with the current counter) and then passes the last answer's seq; on
// an answer whose seq moved, it rechecks every open SSH connection (docs/decisions.md,
// "Revocation takes effect at once").
const ProxyRevocationsPath = "/api/v1/proxy/revocations"

// ProxyRevocationsResponse is the answer of ProxyRevocationsPath.
type ProxyRevocationsResponse struct {
	Seq int64 `json:"seq"`
}
