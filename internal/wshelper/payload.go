//go:build unix

package wshelper

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"golang.org/x/crypto/ssh"
)

// The SSH requests and channel opens whose payloads x/crypto/ssh hands over raw (RFC 4254). Each
// parse function is the only place that reads one of them; FuzzPayloads feeds them arbitrary bytes.

// ptyRequest is a "pty-req" (RFC 4254 6.2). Modes (encoded terminal modes) are not applied: the
// pty keeps the kernel's defaults, which is what the clients Hangar serves expect.
type ptyRequest struct {
	Term              string
	Columns, Rows     uint32
	WidthPx, HeightPx uint32
	Modes             string
}

// windowChange is a "window-change" (RFC 4254 6.7).
type windowChange struct {
	Columns, Rows     uint32
	WidthPx, HeightPx uint32
}

// envRequest is an "env" (RFC 4254 6.4).
type envRequest struct {
	Name, Value string
}

// commandRequest is the payload of "exec" (a command) and "subsystem" (a name).
type commandRequest struct {
	Command string
}

// signalRequest is a "signal" (RFC 4254 6.9): a signal name without "SIG".
type signalRequest struct {
	Name string
}

// forwardTarget is the payload of a "direct-tcpip" channel open (RFC 4254 7.2): where to connect,
// and who asked (informational).
type forwardTarget struct {
	Host       string
	Port       uint32
	OriginHost string
	OriginPort uint32
}

// forwardRequest is the payload of "tcpip-forward" and "cancel-tcpip-forward" (RFC 4254 7.1).
type forwardRequest struct {
	BindAddr string
	BindPort uint32
}

// maxTermSize bounds a pty's columns and rows: the kernel's winsize fields are 16 bits.
const maxTermSize = 1<<16 - 1

func parsePtyRequest(b []byte) (ptyRequest, error) {
	var r ptyRequest
	if err := ssh.Unmarshal(b, &r); err != nil {
		return ptyRequest{}, fmt.Errorf("pty-req: %w", err)
	}
	if r.Columns > maxTermSize || r.Rows > maxTermSize || r.WidthPx > maxTermSize || r.HeightPx > maxTermSize {
		return ptyRequest{}, errors.New("pty-req: size out of range")
	}
	if strings.ContainsAny(r.Term, "\x00=") || len(r.Term) > 256 {
		return ptyRequest{}, errors.New("pty-req: bad TERM")
	}
	return r, nil
}

func parseWindowChange(b []byte) (windowChange, error) {
	var w windowChange
	if err := ssh.Unmarshal(b, &w); err != nil {
		return windowChange{}, fmt.Errorf("window-change: %w", err)
	}
	if w.Columns > maxTermSize || w.Rows > maxTermSize || w.WidthPx > maxTermSize || w.HeightPx > maxTermSize {
		return windowChange{}, errors.New("window-change: size out of range")
	}
	return w, nil
}

// parseEnv refuses names a process environment cannot hold (empty, "=" or NUL in them) and values
// with NUL.
func parseEnv(b []byte) (envRequest, error) {
	var e envRequest
	if err := ssh.Unmarshal(b, &e); err != nil {
		return envRequest{}, fmt.Errorf("env: %w", err)
	}
	if e.Name == "" || strings.ContainsAny(e.Name, "=\x00") || strings.ContainsRune(e.Value, 0) {
		return envRequest{}, fmt.Errorf("env: bad variable %q", e.Name)
	}
	return e, nil
}

func parseCommand(b []byte) (string, error) {
	var c commandRequest
	if err := ssh.Unmarshal(b, &c); err != nil {
		return "", fmt.Errorf("command: %w", err)
	}
	if strings.ContainsRune(c.Command, 0) {
		return "", errors.New("command: NUL in command")
	}
	return c.Command, nil
}

// signals maps RFC 4254's signal names to signals.
var signals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE, "HUP": syscall.SIGHUP,
	"ILL": syscall.SIGILL, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE,
	"QUIT": syscall.SIGQUIT, "SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
}

// signalNames is the reverse of signals, for exit-signal.
var signalNames = func() map[syscall.Signal]string {
	m := make(map[syscall.Signal]string, len(signals))
	for n, s := range signals {
		m[s] = n
	}
	return m
}()

func parseSignal(b []byte) (syscall.Signal, error) {
	var s signalRequest
	if err := ssh.Unmarshal(b, &s); err != nil {
		return 0, fmt.Errorf("signal: %w", err)
	}
	sig, ok := signals[strings.TrimPrefix(s.Name, "SIG")]
	if !ok {
		return 0, fmt.Errorf("signal: unknown signal %q", s.Name)
	}
	return sig, nil
}

func parseForwardTarget(b []byte) (forwardTarget, error) {
	var f forwardTarget
	if err := ssh.Unmarshal(b, &f); err != nil {
		return forwardTarget{}, fmt.Errorf("direct-tcpip: %w", err)
	}
	if f.Port == 0 || f.Port > 65535 {
		return forwardTarget{}, fmt.Errorf("direct-tcpip: port %d out of range", f.Port)
	}
	if f.Host == "" || len(f.Host) > 255 || strings.ContainsAny(f.Host, "\x00/ ") {
		return forwardTarget{}, fmt.Errorf("direct-tcpip: bad host %q", f.Host)
	}
	return f, nil
}

func parseForwardRequest(b []byte) (forwardRequest, error) {
	var f forwardRequest
	if err := ssh.Unmarshal(b, &f); err != nil {
		return forwardRequest{}, fmt.Errorf("tcpip-forward: %w", err)
	}
	if f.BindPort > 65535 {
		return forwardRequest{}, fmt.Errorf("tcpip-forward: port %d out of range", f.BindPort)
	}
	if len(f.BindAddr) > 255 || strings.ContainsAny(f.BindAddr, "\x00/ ") {
		return forwardRequest{}, fmt.Errorf("tcpip-forward: bad address %q", f.BindAddr)
	}
	return f, nil
}
