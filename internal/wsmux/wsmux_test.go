package wsmux

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// writes records each Write its connection gets.
type writes struct {
	net.Conn
	mu  sync.Mutex
	got [][]byte
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, append([]byte(nil), p...))
	return len(p), nil
}

func frameHeader(typ byte, length uint32) []byte {
	h := make([]byte, frameHeaderSize)
	h[1] = typ
	binary.BigEndian.PutUint32(h[4:], 7) // stream id
	binary.BigEndian.PutUint32(h[8:], length)
	return h
}

// yamux writes a data frame's header and body in two calls: Conn sends them as one write, and
// every other frame (a window update, a data frame without a body) as it comes.
func TestConnJoinsDataFrames(t *testing.T) {
	for _, corked := range []bool{false, true} {
		name := "joined"
		if corked {
			name = "corked"
		}
		t.Run(name, func(t *testing.T) {
			w := &writes{}
			var cork *CorkConn
			var c net.Conn
			if corked {
				// The cork sits under the message layer; here the message layer is w itself.
				rec := &writes{}
				cork = NewCorkConn(rec)
				c = Conn(cork, cork)
				w = rec
			} else {
				c = Conn(w, nil)
			}
			body := bytes.Repeat([]byte("x"), 1000)
			steps := [][]byte{
				frameHeader(frameTypeData, uint32(len(body))), body,
				frameHeader(1, 4096),          // a window update: no body
				frameHeader(frameTypeData, 0), // a data frame with flags only (SYN, FIN)
				frameHeader(frameTypeData, 3), []byte("abc"),
			}
			for _, p := range steps {
				if n, err := c.Write(p); err != nil || n != len(p) {
					t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
				}
			}
			want := [][]byte{
				append(frameHeader(frameTypeData, uint32(len(body))), body...),
				frameHeader(1, 4096),
				frameHeader(frameTypeData, 0),
				append(frameHeader(frameTypeData, 3), "abc"...),
			}
			if len(w.got) != len(want) {
				t.Fatalf("%d writes reached the connection, want %d", len(w.got), len(want))
			}
			for i := range want {
				if !bytes.Equal(w.got[i], want[i]) {
					t.Errorf("write %d: %d bytes %q..., want %d bytes", i, len(w.got[i]), w.got[i][:min(16, len(w.got[i]))], len(want[i]))
				}
			}
		})
	}
}

// A corked connection holds its writes, a write from elsewhere meanwhile included, and sends them
// in one write, in their order.
func TestCorkConn(t *testing.T) {
	rec := &writes{}
	c := NewCorkConn(rec)
	if _, err := c.Write([]byte("open ")); err != nil {
		t.Fatal(err)
	}
	c.Cork()
	_, _ = c.Write([]byte("a"))
	_, _ = c.Write([]byte("b"))
	done := make(chan struct{})
	go func() { defer close(done); _, _ = c.Write([]byte("c")) }()
	<-done
	if len(rec.got) != 1 {
		t.Fatalf("corked writes went through: %q", rec.got)
	}
	if err := c.Uncork(); err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte(" after"))
	if got := rec.got; len(got) != 3 || string(got[1]) != "abc" || string(got[2]) != " after" {
		t.Fatalf("writes %q, want [open  abc  after]", got)
	}
	// More than maxCork at once goes out without being held.
	c.Cork()
	big := make([]byte, maxCork+1)
	_, _ = c.Write([]byte("x"))
	_, _ = c.Write(big)
	_ = c.Uncork()
	if got := rec.got; len(got) != 5 || string(got[3]) != "x" || len(got[4]) != len(big) {
		t.Fatalf("a large corked write: %d writes", len(got))
	}
}

func TestStreamHeader(t *testing.T) {
	for _, h := range []StreamHeader{{Kind: KindSSH}, {Kind: KindTCP, Port: 1}, {Kind: KindTCP, Port: 8080}, {Kind: KindTCP, Port: 65535}} {
		got, err := ReadStreamHeader(bytes.NewReader(h.Marshal()))
		if err != nil || got != h {
			t.Errorf("%+v: read back %+v, %v", h, got, err)
		}
	}
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"tcp port 0":      {[]byte{KindTCP, 0, 0}, "port must be 1-65535"},
		"ssh with a port": {[]byte{KindSSH, 0, 22}, "an SSH stream has port 0"},
		"unknown kind":    {[]byte{'X', 0, 80}, "unknown kind"},
		"short":           {[]byte{KindTCP, 0}, "read the stream header"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ReadStreamHeader(bytes.NewReader(tc.b)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestReply(t *testing.T) {
	var b bytes.Buffer
	if err := WriteReply(&b, nil); err != nil {
		t.Fatal(err)
	}
	if err := ReadReply(&b); err != nil {
		t.Fatalf("success read back as %v", err)
	}
	b.Reset()
	_ = WriteReply(&b, errors.New("connect to localhost:1: connection refused"))
	if err := ReadReply(&b); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("a refusal read back as %v", err)
	}
	b.Reset()
	_ = WriteReply(&b, errors.New(strings.Repeat("e", 3*MaxReplyMessage)))
	if err := ReadReply(&b); !errors.Is(err, ErrRefused) || len(err.Error()) > MaxReplyMessage+100 {
		t.Fatalf("a long refusal: %d bytes", len(err.Error()))
	}
	// A length past the bound is refused, not read.
	if err := ReadReply(bytes.NewReader([]byte{0xff, 0xff})); err == nil || errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("an oversized reply: %v", err)
	}
	if err := ReadReply(bytes.NewReader([]byte{0, 5, 'a'})); err == nil || errors.Is(err, ErrRefused) {
		t.Fatalf("a truncated reply: %v", err)
	}
}

func FuzzParseStreamHeader(f *testing.F) {
	f.Add([]byte{KindSSH, 0, 0})
	f.Add([]byte{KindTCP, 0x1f, 0x90})
	f.Add([]byte{KindTCP, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseStreamHeader(b)
		if err != nil {
			return
		}
		if !bytes.Equal(h.Marshal(), b) {
			t.Fatalf("%x parsed as %+v, which marshals as %x", b, h, h.Marshal())
		}
		if (h.Kind == KindSSH) != (h.Port == 0) || (h.Kind != KindSSH && h.Kind != KindTCP) {
			t.Fatalf("%x accepted as %+v", b, h)
		}
	})
}

func FuzzReadReply(f *testing.F) {
	f.Add([]byte{0, 0})
	f.Add([]byte{0, 3, 'a', 'b', 'c'})
	f.Add([]byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		err := ReadReply(bytes.NewReader(b))
		if err == nil && (len(b) < 2 || b[0] != 0 || b[1] != 0) {
			t.Fatalf("%x read as success", b)
		}
		if err != nil && len(err.Error()) > MaxReplyMessage+200 {
			t.Fatalf("an error of %d bytes", len(err.Error()))
		}
	})
}

var _ io.Writer = (*CorkConn)(nil)

// The server's side: the connection a WebSocket takes over is a CorkConn, and messages go through
// it both ways; a ResponseWriter that cannot be taken over is left as it is.
func TestCorkingResponseWriter(t *testing.T) {
	if w := httptest.NewRecorder(); CorkingResponseWriter(w, new(*CorkConn)) != http.ResponseWriter(w) {
		t.Fatal("a ResponseWriter without Hijack was wrapped")
	}
	corks := make(chan *CorkConn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var cork *CorkConn
		c, err := websocket.Accept(CorkingResponseWriter(w, &cork), r, nil)
		if err != nil {
			return
		}
		corks <- cork
		nc := websocket.NetConn(r.Context(), c, websocket.MessageBinary)
		defer nc.Close()
		_, _ = io.Copy(Conn(nc, cork), nc) // echo, each write a corked message
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if cork := <-corks; cork == nil {
		t.Fatal("the hijacked connection is no CorkConn")
	}
	msg := bytes.Repeat([]byte("m"), 100000)
	if err := c.Write(ctx, websocket.MessageBinary, msg); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for len(got) < len(msg) {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b...)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("echoed %d bytes, want %d", len(got), len(msg))
	}
}
