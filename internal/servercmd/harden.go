package servercmd

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
	"github.com/hangar-dev/hangar/internal/cmdopt"
	"github.com/hangar-dev/hangar/internal/server"
)

// HardeningConfig is the part of the server's configuration that bounds what clients may hold
// (docs/decisions.md, "Server hardening").
type HardeningConfig struct {
	TLSCertFile, TLSKeyFile string
	// TrustedProxies are the proxies whose X-Forwarded-For names the client (addresses and CIDR
	// prefixes, comma-separated).
	TrustedProxies string
	// MaxConnsPerAddress, MaxStreamsPerClient and MaxStreamsPerAddress are whole numbers.
	MaxConnsPerAddress, MaxStreamsPerClient, MaxStreamsPerAddress string
}

func hardeningOptions(cfg *HardeningConfig) []cmdopt.Option {
	return []cmdopt.Option{
		cmdopt.String(&cfg.TLSCertFile, "tls-cert-file", "HANGAR_TLS_CERT_FILE", "", "serve HTTPS (TLS 1.2 or later) with this PEM certificate (chain); needs --tls-key-file. Read again when the file changes"),
		cmdopt.String(&cfg.TLSKeyFile, "tls-key-file", "HANGAR_TLS_KEY_FILE", "", "the PEM private key of --tls-cert-file"),
		cmdopt.String(&cfg.TrustedProxies, "trusted-proxies", "HANGAR_TRUSTED_PROXIES", "", "addresses and CIDR prefixes (comma-separated) of reverse proxies in front of the server: from them, X-Forwarded-For names the client, for the limits and the log (default: none; the TCP peer is the client)"),
		cmdopt.String(&cfg.MaxConnsPerAddress, "max-conns-per-address", "HANGAR_MAX_CONNS_PER_ADDRESS", strconv.Itoa(DefaultMaxConnsPerAddress), "connections one client address may hold open (trusted proxies excepted); past it the address's oldest idle connection is closed, or the new one refused when none is idle"),
		cmdopt.String(&cfg.MaxStreamsPerClient, "max-streams-per-client", "HANGAR_MAX_STREAMS_PER_CLIENT", strconv.Itoa(server.DefaultStreamsPerClient), "long-polls and streams (agent waits, provisioner polls, build logs followed, SSH and helper connections) one token may hold open at once; past it: 429"),
		cmdopt.String(&cfg.MaxStreamsPerAddress, "max-streams-per-address", "HANGAR_MAX_STREAMS_PER_ADDRESS", strconv.Itoa(server.DefaultStreamsPerAddress), "long-polls and streams, workspace apps' requests included, one client address may hold open at once; past it: 429"),
	}
}

// hardening is what HardeningConfig configures.
type hardening struct {
	tls     *certReloader // nil: plain http
	conns   *connLimiter
	trusted []netip.Prefix
	streams server.StreamLimits
	// The http.Server's timeouts (conns.go's constants; tests shorten them).
	readHeaderTimeout, readTimeout, writeTimeout, idleTimeout time.Duration
}

func readHardening(cfg HardeningConfig, clk clock.Clock, log *slog.Logger) (hardening, error) {
	h := hardening{readHeaderTimeout: ReadHeaderTimeout, readTimeout: ReadTimeout, writeTimeout: WriteTimeout, idleTimeout: IdleTimeout}
	var err error
	if h.trusted, err = server.ParseTrustedProxies(cfg.TrustedProxies); err != nil {
		return h, fmt.Errorf("--trusted-proxies: %w", err)
	}
	count := func(flag, v string, def int) (int, error) {
		if v == "" {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1_000_000 {
			return 0, fmt.Errorf("%s: want a whole number from 1 to 1000000, got %q", flag, v)
		}
		return n, nil
	}
	maxConns, err := count("--max-conns-per-address", cfg.MaxConnsPerAddress, DefaultMaxConnsPerAddress)
	if err != nil {
		return h, err
	}
	if h.streams.PerClient, err = count("--max-streams-per-client", cfg.MaxStreamsPerClient, server.DefaultStreamsPerClient); err != nil {
		return h, err
	}
	if h.streams.PerAddress, err = count("--max-streams-per-address", cfg.MaxStreamsPerAddress, server.DefaultStreamsPerAddress); err != nil {
		return h, err
	}
	if h.tls, err = tlsFlags(cfg.TLSCertFile, cfg.TLSKeyFile, clk, log.With("component", "tls")); err != nil {
		return h, err
	}
	h.conns = newConnLimiter(maxConns, h.trusted, log.With("component", "conns"))
	return h, nil
}

// scheme is the server's URL scheme.
func (h hardening) scheme() string {
	if h.tls != nil {
		return "https"
	}
	return "http"
}

// httpServer is the server's http.Server: with its timeouts, the connection cap's hook, and TLS.
func (h hardening) httpServer(handler http.Handler, log *slog.Logger) *http.Server {
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: h.readHeaderTimeout, ReadTimeout: h.readTimeout, WriteTimeout: h.writeTimeout,
		IdleTimeout: h.idleTimeout, MaxHeaderBytes: 64 << 10, ConnState: h.conns.connState,
		ErrorLog: slog.NewLogLogger(log.With("component", "http").Handler(), slog.LevelDebug)}
	if h.tls != nil {
		hs.TLSConfig = h.tls.config()
	}
	return hs
}

// serve serves hs on ln until it is shut down.
func (h hardening) serve(hs *http.Server, ln net.Listener) error {
	ln = h.conns.listener(ln)
	if h.tls != nil {
		return hs.ServeTLS(ln, "", "")
	}
	return hs.Serve(ln)
}

// warnOpenDataDir logs a warning when the data directory is open to others than its owner: it
// holds the SQLite database and the admin token.
func warnOpenDataDir(dir string, log *slog.Logger) {
	fi, err := os.Stat(dir)
	if err != nil {
		return
	}
	if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		log.Warn("the data directory is open to other users than its owner: it holds the database and the admin token; chmod 700 it",
			"dir", dir, "mode", fi.Mode().String())
	}
}
