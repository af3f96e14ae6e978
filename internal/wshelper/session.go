//go:build unix

package wshelper

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// session is one "session" channel: environment and pty requests, then one shell, exec or
// subsystem.
type session struct {
	c    *conn
	ch   ssh.Channel
	env  []string // the client's env requests, as NAME=value
	term string

	ptmx, tty *os.File // after pty-req

	mu      sync.Mutex
	started bool
	proc    *os.Process // the command, while it runs
	wg      sync.WaitGroup
	// replied is closed once the request that started the command has been answered: its end
	// (exit-status, close) must not overtake the reply, or the client sees the request fail (a
	// quick `true` did, through the proxy).
	replied     chan struct{}
	repliedOnce sync.Once
}

func (c *conn) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	s := &session{c: c, ch: ch, replied: make(chan struct{})}
	defer s.wg.Wait()
	defer s.repliedOnce.Do(func() { close(s.replied) })
	for req := range reqs {
		ok := s.request(req)
		if req.WantReply {
			_ = req.Reply(ok, nil)
		}
		s.mu.Lock()
		started := s.started
		s.mu.Unlock()
		if started {
			s.repliedOnce.Do(func() { close(s.replied) })
		}
	}
	// The client closed the channel, or the connection is gone. A command still running is hung
	// up on, as a terminal's would be.
	s.mu.Lock()
	started, proc := s.started, s.proc
	s.mu.Unlock()
	if proc != nil {
		_ = syscall.Kill(-proc.Pid, syscall.SIGHUP)
	}
	ch.Close()
	if !started && s.ptmx != nil {
		s.ptmx.Close()
		s.tty.Close()
	}
}

// request handles one channel request and says whether it succeeded.
func (s *session) request(req *ssh.Request) bool {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	switch req.Type {
	case "env":
		e, err := parseEnv(req.Payload)
		if err != nil || started {
			return false
		}
		s.env = append(s.env, e.Name+"="+e.Value)
		return true
	case "pty-req":
		r, err := parsePtyRequest(req.Payload)
		if err != nil || started || s.ptmx != nil {
			return false
		}
		ptmx, tty, err := pty.Open()
		if err != nil {
			s.c.log.Warn("ssh: cannot open a pty", "err", err)
			return false
		}
		s.ptmx, s.tty, s.term = ptmx, tty, r.Term
		setSize(ptmx, r.Columns, r.Rows, r.WidthPx, r.HeightPx)
		return true
	case "window-change":
		w, err := parseWindowChange(req.Payload)
		if err != nil || s.ptmx == nil {
			return false
		}
		setSize(s.ptmx, w.Columns, w.Rows, w.WidthPx, w.HeightPx)
		return true
	case "signal":
		sig, err := parseSignal(req.Payload)
		s.mu.Lock()
		proc := s.proc
		s.mu.Unlock()
		if err != nil || proc == nil {
			return false
		}
		return syscall.Kill(-proc.Pid, sig) == nil
	case "shell", "exec":
		if started {
			return false
		}
		var argv []string
		if req.Type == "shell" {
			argv = []string{"-" + filepath.Base(s.c.s.opts.Shell)} // a login shell, as sshd starts it
			if notice := s.c.s.Notice(); notice != "" {
				if s.ptmx != nil {
					notice = strings.ReplaceAll(notice, "\n", "\r\n")
				}
				_, _ = io.WriteString(s.ch.Stderr(), notice)
			}
		} else {
			cmd, err := parseCommand(req.Payload)
			if err != nil {
				return false
			}
			argv = []string{filepath.Base(s.c.s.opts.Shell), "-c", cmd}
		}
		return s.start(argv)
	case "subsystem":
		name, err := parseCommand(req.Payload)
		if err != nil || started || name != "sftp" {
			return false
		}
		return s.startSFTP()
	}
	return false
}

func setSize(ptmx *os.File, cols, rows, x, y uint32) {
	_ = pty.Setsize(ptmx, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows), X: uint16(x), Y: uint16(y)})
}

// environ is the command's environment: the container's, TERM when there is a pty, then the client's.
func (s *session) environ() []string {
	env := append([]string(nil), s.c.s.opts.Env...)
	if s.ptmx != nil && s.term != "" {
		env = setEnv(env, "TERM", s.term)
	}
	for _, kv := range s.env {
		name, value, _ := cutEnv(kv)
		env = setEnv(env, name, value)
	}
	return env
}

func cutEnv(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// start runs the shell with argv (argv[0] as the process sees it) and reports its end on the channel.
func (s *session) start(argv []string) bool {
	o := &s.c.s.opts
	cmd := &exec.Cmd{Path: o.Shell, Args: argv, Env: s.environ(), Dir: o.Dir, WaitDelay: waitDelay}
	var stdin io.WriteCloser
	if s.ptmx != nil {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = s.tty, s.tty, s.tty
		// A session of its own with the pty as controlling terminal, so that job control, ^C and
		// the hangup on close work.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	} else {
		var err error
		if stdin, err = cmd.StdinPipe(); err != nil {
			return false
		}
		cmd.Stdout, cmd.Stderr = counted{s.ch, &s.c.s.output}, counted{s.ch.Stderr(), &s.c.s.output}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // signals go to the whole group
	}
	if err := cmd.Start(); err != nil {
		s.c.log.Warn("ssh: cannot start the session's command", "shell", o.Shell, "err", err)
		return false
	}
	if s.tty != nil {
		s.tty.Close() // the command holds it now
	}
	s.c.s.track(cmd.Process)
	s.mu.Lock()
	s.started, s.proc = true, cmd.Process
	s.mu.Unlock()
	s.c.log.Debug("ssh session command started", "argv", argv, "pid", cmd.Process.Pid, "pty", s.ptmx != nil)

	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var copies sync.WaitGroup
		var outDone chan struct{}
		if s.ptmx != nil {
			outDone = make(chan struct{})
			copies.Add(2)
			go func() { defer copies.Done(); _, _ = io.Copy(s.ptmx, s.ch) }()
			go func() {
				defer copies.Done()
				defer close(outDone)
				_, _ = io.Copy(counted{s.ch, &s.c.s.output}, s.ptmx)
			}()
		} else {
			copies.Add(1)
			go func() {
				defer copies.Done()
				_, _ = io.Copy(stdin, s.ch)
				stdin.Close() // the client's EOF is the command's
			}()
		}
		err := cmd.Wait()
		s.c.s.untrack(cmd.Process)
		s.mu.Lock()
		s.proc = nil
		s.mu.Unlock()
		if outDone != nil {
			// The pty's output ends when the last process holding it closes it.
			t := time.NewTimer(waitDelay)
			select {
			case <-outDone:
			case <-t.C:
			}
			t.Stop()
			s.ptmx.Close()
			<-outDone
		}
		if cmd.ProcessState == nil {
			s.c.log.Warn("ssh session command", "err", err)
		}
		<-s.replied
		_ = s.ch.CloseWrite()
		if cmd.ProcessState != nil {
			name, payload := exitRequest(cmd.ProcessState)
			_, _ = s.ch.SendRequest(name, false, payload)
		}
		s.ch.Close() // ends the stdin copy
		copies.Wait()
	}()
	return true
}

// exitRequest is the "exit-status" or "exit-signal" request that reports how a command ended.
func exitRequest(ps *os.ProcessState) (string, []byte) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		if name, ok := signalNames[ws.Signal()]; ok {
			return "exit-signal", ssh.Marshal(struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}{name, ws.CoreDump(), "", ""})
		}
		return "exit-status", ssh.Marshal(struct{ Status uint32 }{128 + uint32(ws.Signal())})
	}
	return "exit-status", ssh.Marshal(struct{ Status uint32 }{uint32(ps.ExitCode())})
}

// startSFTP serves the sftp subsystem in process, as the helper's user, starting in Dir.
func (s *session) startSFTP() bool {
	srv, err := sftp.NewServer(s.ch, sftp.WithServerWorkingDirectory(s.c.s.opts.Dir))
	if err != nil {
		s.c.log.Warn("ssh: cannot start sftp", "err", err)
		return false
	}
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := srv.Serve()
		status := uint32(0)
		if err != nil && !errors.Is(err, io.EOF) {
			s.c.log.Info("sftp ended", "err", err)
			status = 1
		}
		<-s.replied
		_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
		srv.Close() // closes the channel
	}()
	return true
}
