package servercmd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
)

// TLS (docs/decisions.md, "Server hardening"): with --tls-cert-file and --tls-key-file the server
// serves HTTPS only, TLS 1.2 at least. The files are read again when they change (a renewal by
// certbot or cert-manager), looked at on a handshake at most every certCheckInterval, with no signal
// to send; a pair that does not load (a half-written renewal) keeps the one in use, and says so in
// the log.

// certCheckInterval is how often, at most, a handshake looks whether the files changed.
const certCheckInterval = 10 * time.Second

// certReloader serves the certificate of a cert and key file pair, loaded again when they change.
type certReloader struct {
	certFile, keyFile string
	clock             clock.Clock
	log               *slog.Logger

	mu        sync.Mutex
	cert      *tls.Certificate
	stamp     string // the files' sizes and modification times when cert was loaded
	checkedAt time.Time
}

// tlsFlags checks --tls-cert-file and --tls-key-file (both or neither) and loads the pair: nil when
// neither is set.
func tlsFlags(certFile, keyFile string, clk clock.Clock, log *slog.Logger) (*certReloader, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case certFile == "":
		return nil, errors.New("--tls-cert-file: required with --tls-key-file (give both, or neither to serve plain http)")
	case keyFile == "":
		return nil, errors.New("--tls-key-file: required with --tls-cert-file (give both, or neither to serve plain http)")
	}
	cr := &certReloader{certFile: certFile, keyFile: keyFile, clock: clk, log: log}
	stamp, err := cr.fileStamp()
	if err != nil {
		return nil, err
	}
	cert, err := cr.load()
	if err != nil {
		return nil, err
	}
	cr.cert, cr.stamp, cr.checkedAt = cert, stamp, clk.Now()
	return cr, nil
}

func (cr *certReloader) fileStamp() (string, error) {
	var stamp string
	for _, f := range []struct{ flag, path string }{{"--tls-cert-file", cr.certFile}, {"--tls-key-file", cr.keyFile}} {
		fi, err := os.Stat(f.path)
		if err != nil {
			return "", fmt.Errorf("%s: %w", f.flag, err)
		}
		stamp += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return stamp, nil
}

func (cr *certReloader) load() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(cr.certFile, cr.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file %s and --tls-key-file %s: %w", cr.certFile, cr.keyFile, err)
	}
	return &cert, nil
}

// certificate is tls.Config.GetCertificate.
func (cr *certReloader) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	now := cr.clock.Now()
	if now.Sub(cr.checkedAt) < certCheckInterval {
		return cr.cert, nil
	}
	cr.checkedAt = now
	stamp, err := cr.fileStamp()
	if err != nil || stamp == cr.stamp {
		if err != nil {
			cr.log.Warn("cannot look at the TLS certificate files; serving the certificate loaded before", "err", err)
		}
		return cr.cert, nil
	}
	cert, err := cr.load()
	if err != nil {
		cr.log.Warn("the TLS certificate files changed but do not load; serving the certificate loaded before", "err", err)
		return cr.cert, nil
	}
	cr.cert, cr.stamp = cert, stamp
	cr.log.Info("TLS certificate loaded again: its files changed", "cert_file", cr.certFile)
	return cr.cert, nil
}

// config is the server's TLS configuration: TLS 1.2 at least (net/http offers HTTP/2 and HTTP/1.1).
func (cr *certReloader) config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cr.certificate}
}
