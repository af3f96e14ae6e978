// Package wsmux is the multiplexed connection between a Terraform workspace's helper and the
// server (docs/decisions.md, "Terraform workspaces: the helper connects out"): yamux over a
// WebSocket, as both sides configure it, and the header that names what a stream carries on a
// connection of protocol.WorkspaceAgentSubprotocolV2 (docs/decisions.md, "The way in, faster").
package wsmux

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
)

// StreamWindow is the most a stream's receiver lets its peer send ahead (yamux's default is
// 256 KiB). On a connection with a round trip of a millisecond, 256 KiB caps a stream near
// 256 MB/s; the window is only a bound (a stream's buffer grows with what is unread), so an
// idle stream costs nothing more.
const StreamWindow = 4 << 20

// Config is yamux's configuration for either side: keepalives find a dead peer, the log goes
// nowhere (errors come back from the calls), and streams have StreamWindow.
func Config() *yamux.Config {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cfg.KeepAliveInterval = 15 * time.Second
	cfg.StreamOpenTimeout = 15 * time.Second
	cfg.MaxStreamWindowSize = StreamWindow
	return cfg
}

// The yamux frame header (hashicorp/yamux spec.md): version, type, flags, stream id, length.
const (
	frameHeaderSize = 12
	frameTypeData   = 0
)

// Conn adapts a WebSocket's byte stream (websocket.NetConn) for yamux, whose sender writes a
// frame's 12-byte header and its body in two calls: on a WebSocket each call is a message of its
// own, framed, flushed and sent with its own system call. Conn holds a data frame's header and
// sends it with the body, one message per frame. The bytes on the wire are the same stream
// either way (the reader does not see messages), so either side may use Conn or not.
//
// cork, when not nil, is the connection under the WebSocket: it is corked while a message is
// written, so that the message leaves in one write however the WebSocket writes it (a client
// masks its messages through a 4 KiB buffer, one system call each).
//
// Writes must come from one goroutine at a time, as yamux's send loop makes them.
func Conn(nc net.Conn, cork *CorkConn) net.Conn { return &frameConn{Conn: nc, cork: cork} }

type frameConn struct {
	net.Conn
	cork *CorkConn
	held bool
	hdr  [frameHeaderSize]byte
}

// write sends one message.
func (c *frameConn) write(p []byte) (int, error) {
	if c.cork == nil {
		return c.Conn.Write(p)
	}
	c.cork.Cork()
	n, err := c.Conn.Write(p)
	if uerr := c.cork.Uncork(); err == nil {
		err = uerr
	}
	return n, err
}

// joinBuffers keep a frame's header and body together for one Write; pooled, so that an idle
// connection holds none.
var joinBuffers sync.Pool

func (c *frameConn) Write(p []byte) (int, error) {
	if !c.held && len(p) == frameHeaderSize && p[1] == frameTypeData && binary.BigEndian.Uint32(p[8:]) > 0 {
		copy(c.hdr[:], p)
		c.held = true
		return len(p), nil
	}
	if !c.held {
		return c.write(p)
	}
	c.held = false
	if c.cork != nil {
		// Two messages, one write: no copy to join them.
		c.cork.Cork()
		_, err := c.Conn.Write(c.hdr[:])
		n := 0
		if err == nil {
			n, err = c.Conn.Write(p)
		}
		if uerr := c.cork.Uncork(); err == nil {
			err = uerr
		}
		return n, err
	}
	n := frameHeaderSize + len(p)
	var buf []byte
	if b, ok := joinBuffers.Get().(*[]byte); ok && cap(*b) >= n {
		buf = (*b)[:n]
	} else {
		buf = make([]byte, n)
	}
	copy(buf, c.hdr[:])
	copy(buf[frameHeaderSize:], p)
	written, err := c.write(buf)
	joinBuffers.Put(&buf)
	return max(0, written-frameHeaderSize), err
}

// maxCork bounds what a CorkConn holds before it writes.
const maxCork = 512 << 10

// CorkConn is a connection whose writes can be held and sent together (Cork, Uncork), as TCP_CORK
// does but in one system call. Safe for concurrent use.
type CorkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    *[]byte
}

// NewCorkConn wraps nc.
func NewCorkConn(nc net.Conn) *CorkConn { return &CorkConn{Conn: nc} }

var corkBuffers = sync.Pool{New: func() any { b := make([]byte, 0, maxCork); return &b }}

// Cork holds the writes that follow until Uncork.
func (c *CorkConn) Cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// Uncork writes what was held, and lets later writes through.
func (c *CorkConn) Uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.flush()
}

func (c *CorkConn) flush() error {
	if c.buf == nil {
		return nil
	}
	b := c.buf
	c.buf = nil
	_, err := c.Conn.Write(*b)
	*b = (*b)[:0]
	corkBuffers.Put(b)
	return err
}

func (c *CorkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		return c.Conn.Write(p)
	}
	if c.buf != nil && len(*c.buf)+len(p) > maxCork {
		if err := c.flush(); err != nil {
			return 0, err
		}
	}
	if len(p) >= maxCork {
		return c.Conn.Write(p)
	}
	if c.buf == nil {
		c.buf = corkBuffers.Get().(*[]byte)
	}
	*c.buf = append(*c.buf, p...)
	return len(p), nil
}

// CorkingResponseWriter wraps the ResponseWriter of a WebSocket's upgrade so that the connection
// the WebSocket takes over (Hijack) is a CorkConn, put in *cork. A ResponseWriter that cannot be
// taken over (HTTP/2) is returned as it is, for the upgrade to fail as it would.
func CorkingResponseWriter(w http.ResponseWriter, cork **CorkConn) http.ResponseWriter {
	for u := w; ; {
		if _, ok := u.(http.Hijacker); ok {
			return &corkingWriter{ResponseWriter: w, cork: cork}
		}
		uw, ok := u.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		u = uw.Unwrap()
	}
}

type corkingWriter struct {
	http.ResponseWriter
	cork **CorkConn
}

func (w *corkingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		nc.Close()
		return nil, nil, err
	}
	cc := NewCorkConn(nc)
	brw.Writer.Reset(cc)
	*w.cork = cc
	return cc, brw, nil
}

// What a stream of a protocol.WorkspaceAgentSubprotocolV2 connection carries: the server, which
// opens every stream, writes a StreamHeader first, and for a TCP stream the helper answers with a
// reply before any byte of the connection.
const (
	// KindSSH: the stream is an SSH connection the helper serves as trusted (as every stream of a
	// version-1 connection).
	KindSSH byte = 'S'
	// KindTCP: the stream is a TCP connection to a port of the workspace's machine on its loopback
	// address (a Terraform workspace's app); the helper dials it and relays.
	KindTCP byte = 'T'
)

// StreamHeaderSize is the length of a StreamHeader on the wire: its kind and a port (big endian).
const StreamHeaderSize = 3

// StreamHeader is what a stream carries.
type StreamHeader struct {
	Kind byte
	// Port is the TCP stream's port on the machine (1-65535); 0 for SSH.
	Port uint16
}

// Marshal returns the header's bytes.
func (h StreamHeader) Marshal() []byte {
	return []byte{h.Kind, byte(h.Port >> 8), byte(h.Port)}
}

// ParseStreamHeader decodes and checks a header.
func ParseStreamHeader(b []byte) (StreamHeader, error) {
	if len(b) != StreamHeaderSize {
		return StreamHeader{}, fmt.Errorf("stream header: want %d bytes, got %d", StreamHeaderSize, len(b))
	}
	h := StreamHeader{Kind: b[0], Port: binary.BigEndian.Uint16(b[1:])}
	switch {
	case h.Kind == KindSSH && h.Port == 0:
	case h.Kind == KindSSH:
		return StreamHeader{}, fmt.Errorf("stream header: an SSH stream has port 0, got %d", h.Port)
	case h.Kind == KindTCP && h.Port == 0:
		return StreamHeader{}, errors.New("stream header: a TCP stream's port must be 1-65535, got 0")
	case h.Kind != KindTCP:
		return StreamHeader{}, fmt.Errorf("stream header: unknown kind %q", h.Kind)
	}
	return h, nil
}

// ReadStreamHeader reads a header from r.
func ReadStreamHeader(r io.Reader) (StreamHeader, error) {
	var b [StreamHeaderSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return StreamHeader{}, fmt.Errorf("read the stream header: %w", err)
	}
	return ParseStreamHeader(b[:])
}

// MaxReplyMessage bounds the error message of a TCP stream's reply.
const MaxReplyMessage = 1 << 10

// WriteReply answers a TCP stream's header: nil when the helper is connected to the port (the
// stream then carries the connection's bytes), else why not (and the helper closes the stream).
// On the wire: a length (2 bytes, big endian; 0 for success) and that many bytes of message.
func WriteReply(w io.Writer, dialErr error) error {
	var msg []byte
	if dialErr != nil {
		msg = []byte(dialErr.Error())
		if len(msg) == 0 {
			msg = []byte("failed")
		}
		if len(msg) > MaxReplyMessage {
			msg = msg[:MaxReplyMessage]
		}
	}
	b := make([]byte, 2+len(msg))
	binary.BigEndian.PutUint16(b, uint16(len(msg)))
	copy(b[2:], msg)
	_, err := w.Write(b)
	return err
}

// ErrRefused wraps the helper's reason when it could not connect to the port.
var ErrRefused = errors.New("the workspace's helper could not connect")

// ReadReply reads a TCP stream's reply: nil when the stream is connected, an error wrapping
// ErrRefused with the helper's reason when it is not, or the failure to read it.
func ReadReply(r io.Reader) error {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return fmt.Errorf("read the helper's reply: %w", err)
	}
	n := binary.BigEndian.Uint16(l[:])
	if n == 0 {
		return nil
	}
	if n > MaxReplyMessage {
		return fmt.Errorf("read the helper's reply: a message of %d bytes, more than %d", n, MaxReplyMessage)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return fmt.Errorf("read the helper's reply: %w", err)
	}
	return fmt.Errorf("%w: %s", ErrRefused, msg)
}
