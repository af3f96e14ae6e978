package proxy

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/internal/clock"
)

// DefaultMaxBodyBytes caps request bodies unless --max-body-bytes says otherwise: uploads of a few
// hundred megabytes go through, an endless body does not.
const DefaultMaxBodyBytes = 512 << 20

// NewServer returns the http.Server of the proxy: headers must arrive within 10 s, an idle
// keep-alive connection closes after 2 min, headers are at most 64 KiB. There is no server-wide
// read or write timeout, which would cut WebSockets and long downloads; the handler sets a write
// deadline per response instead (Options.WriteTimeout) and none on upgraded connections.
func NewServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}

// CertFiles serves a certificate from files, reading them again when they change (checked at most
// every 10 s, at a handshake), so that a renewed wildcard certificate needs no restart.
type CertFiles struct {
	certFile, keyFile string
	clock             clock.Clock
	log               *slog.Logger

	mu       sync.Mutex
	cert     *tls.Certificate
	modTimes [2]time.Time
	checked  time.Time
}

// LoadCertFiles reads the certificate and key once, failing if they are not a pair.
func LoadCertFiles(certFile, keyFile string, clk clock.Clock, log *slog.Logger) (*CertFiles, error) {
	c := &CertFiles{certFile: certFile, keyFile: keyFile, clock: clk, log: log}
	if err := c.load(); err != nil {
		return nil, err
	}
	c.checked = clk.Now()
	return c, nil
}

func (c *CertFiles) modTimesNow() ([2]time.Time, error) {
	var out [2]time.Time
	for i, f := range []string{c.certFile, c.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			return out, err
		}
		out[i] = st.ModTime()
	}
	return out, nil
}

func (c *CertFiles) load() error {
	mt, err := c.modTimesNow()
	if err != nil {
		return fmt.Errorf("tls certificate: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("tls certificate %s and key %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert, c.modTimes = &cert, mt
	return nil
}

// GetCertificate is tls.Config's GetCertificate.
func (c *CertFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.clock.Now(); now.Sub(c.checked) >= 10*time.Second {
		c.checked = now
		if mt, err := c.modTimesNow(); err == nil && mt != c.modTimes {
			if err := c.load(); err != nil {
				c.log.Warn("cannot reload the tls certificate; keeping the previous one", "err", err)
			} else {
				c.log.Info("tls certificate reloaded", "cert_file", c.certFile)
			}
		}
	}
	return c.cert, nil
}
