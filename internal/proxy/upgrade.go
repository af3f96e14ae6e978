package proxy

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"
)

// Upgraded connections (WebSockets) are relayed here rather than by httputil.ReverseProxy, whose
// two copiers each take a 32 KiB buffer for the connection's whole life (io.Copy between a
// hijacked client and the pod's response body): about 85 KiB per open WebSocket in all
// (docs/benchmarks.md). Here each direction borrows an 8 KiB buffer from a pool.

var relayBuffers = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}

// hopHeaders are removed from a forwarded request (RFC 9110, 7.6.1); Upgrade and Connection are
// set again for the upgrade.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// DefaultUpgradeTimeout bounds an upgrade's handshake with the workspace (Options.UpgradeTimeout).
const DefaultUpgradeTimeout = 30 * time.Second

// upgrade relays an Upgrade request to addr and, on 101 Switching Protocols, the two byte streams.
// It returns whether the connection was switched.
func (h *Handler) upgrade(w http.ResponseWriter, r *http.Request, addr string) (bool, error) {
	protocol := r.Header.Get("Upgrade")
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for _, name := range out.Header.Values("Connection") {
		for _, f := range strings.Split(name, ",") {
			out.Header.Del(strings.TrimSpace(f))
		}
	}
	for _, name := range hopHeaders {
		out.Header.Del(name)
	}
	for _, name := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		out.Header.Del(name)
	}
	h.rewrite(&httputil.ProxyRequest{In: r, Out: out})
	out.Header.Set("Connection", "Upgrade")
	out.Header.Set("Upgrade", protocol)
	out.Body = nil
	out.ContentLength = 0

	dialCtx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	up, err := h.o.Dial(dialCtx, "tcp", addr)
	if err != nil {
		return false, fmt.Errorf("dial %s: %w", addr, err)
	}
	// The handshake has 30 s, and ends with the client's request; the relay has no limit. Closing
	// the connection bounds it even where deadlines are not supported (an SSH channel, for a
	// Terraform workspace's apps).
	timeout := cmp.Or(h.o.UpgradeTimeout, DefaultUpgradeTimeout)
	_ = up.SetDeadline(time.Now().Add(timeout))
	hsCtx, hsCancel := context.WithTimeout(r.Context(), timeout)
	defer hsCancel()
	stopClose := context.AfterFunc(hsCtx, func() { up.Close() })
	if err := out.Write(up); err != nil {
		up.Close()
		return false, fmt.Errorf("send the upgrade to %s: %w", addr, err)
	}
	upr := bufio.NewReaderSize(up, 4<<10)
	resp, err := http.ReadResponse(upr, out)
	if !stopClose() && err == nil {
		resp.Body.Close()
		err = hsCtx.Err() // closed under it at the very end: the handshake took too long
	}
	if err != nil {
		up.Close()
		if hsCtx.Err() != nil && r.Context().Err() == nil {
			err = fmt.Errorf("no answer in %v: %w", timeout, err)
		}
		return false, fmt.Errorf("read the upgrade's answer from %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		// Refused by the workspace: its answer, as is.
		defer up.Close()
		defer resp.Body.Close()
		sanitizeSetCookie(resp.Header)
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		return false, nil
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), protocol) {
		up.Close()
		return false, fmt.Errorf("the workspace switched to %q, not %q", resp.Header.Get("Upgrade"), protocol)
	}
	client, clientBuf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return false, fmt.Errorf("take over the client's connection: %w", err)
	}
	_ = up.SetDeadline(time.Time{})
	_ = client.SetDeadline(time.Time{})
	// The 101 answer, as the workspace gave it (but for cookies it may not set).
	sanitizeSetCookie(resp.Header)
	resp.Body = nil
	if err := resp.Write(clientBuf); err == nil {
		err = clientBuf.Flush()
	}
	if err != nil {
		client.Close()
		up.Close()
		return true, nil
	}
	relay(client, clientBuf.Reader, up, upr)
	return true, nil
}

// relay copies both ways until either side ends, then closes both. The readers hold what the
// handshake had already read past its end.
func relay(client net.Conn, fromClient *bufio.Reader, up net.Conn, fromUp *bufio.Reader) {
	done := make(chan struct{}, 2)
	copyOne := func(dst net.Conn, src io.Reader) {
		bp := relayBuffers.Get().(*[]byte)
		// Plain Reader and Writer: io.CopyBuffer would otherwise use ReadFrom or WriteTo, which
		// take buffers of their own.
		_, _ = io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, *bp)
		relayBuffers.Put(bp)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go copyOne(up, fromClient)
	copyOne(client, fromUp) // in this goroutine: one stack fewer per connection
	<-done
	// One side ended: give the other a moment to finish its half, then end both.
	t := time.NewTimer(5 * time.Second)
	select {
	case <-done:
	case <-t.C:
	}
	t.Stop()
	client.Close()
	up.Close()
}
