package forgetest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// sshServer serves git over SSH: user "git", a public key that names the forge's user, and one exec
// of git-upload-pack or git-receive-pack per session.
type sshServer struct {
	f   *Forge
	ctx context.Context
	wg  *sync.WaitGroup
	cfg *ssh.ServerConfig

	mu    sync.Mutex
	conns map[net.Conn]bool
}

const loginExt = "forgetest-login"

func (f *Forge) newSSHServer(ctx context.Context, wg *sync.WaitGroup) *sshServer {
	s := &sshServer{f: f, ctx: ctx, wg: wg, conns: map[net.Conn]bool{}}
	s.cfg = &ssh.ServerConfig{
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if meta.User() != "git" {
				return nil, fmt.Errorf("user %q: only git", meta.User())
			}
			k := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
			f.mu.Lock()
			defer f.mu.Unlock()
			login, ok := f.sshKeys[k]
			if !ok {
				return nil, errors.New("unknown key")
			}
			if u := f.users[login]; u == nil || u.suspended {
				return nil, errors.New("user suspended")
			}
			return &ssh.Permissions{Extensions: map[string]string{loginExt: login}}, nil
		},
		MaxAuthTries: 6,
	}
	s.cfg.AddHostKey(f.hostKey)
	return s
}

func (s *sshServer) serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.handleConn(c)
		}()
	}
}

func (s *sshServer) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.Close()
	}
}

func (s *sshServer) handleConn(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // the handshake
	conn, chans, reqs, err := ssh.NewServerConn(c, s.cfg)
	if err != nil {
		return
	}
	defer conn.Close()
	_ = c.SetDeadline(time.Time{})
	go ssh.DiscardRequests(reqs)
	login := conn.Permissions.Extensions[loginExt]
	var wg sync.WaitGroup
	defer wg.Wait()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ch.Close()
			s.session(login, ch, creqs)
		}()
	}
}

// session runs one exec request of git; env requests set GIT_PROTOCOL only (protocol v2).
func (s *sshServer) session(login string, ch ssh.Channel, reqs <-chan *ssh.Request) {
	var gitProtocol string
	for req := range reqs {
		switch req.Type {
		case "env":
			var kv struct{ Name, Value string }
			if ssh.Unmarshal(req.Payload, &kv) == nil && kv.Name == "GIT_PROTOCOL" && len(kv.Value) < 256 {
				gitProtocol = kv.Value
				_ = req.Reply(true, nil)
				continue
			}
			_ = req.Reply(false, nil)
		case "exec":
			var cmd struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &cmd); err != nil {
				_ = req.Reply(false, nil)
				return
			}
			_ = req.Reply(true, nil)
			go ssh.DiscardRequests(reqs)
			code := s.exec(login, gitProtocol, cmd.Command, ch)
			_, _ = ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, uint32(code)))
			return
		default: // shell, pty-req, subsystem: Gitea answers with a greeting and no shell
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
		}
	}
}

// parseGitCommand reads "git-upload-pack 'owner/repo.git'" (also "git upload-pack", a leading
// slash, no .git, double quotes or none).
func parseGitCommand(command string) (service, owner, name string, err error) {
	verb, arg, ok := strings.Cut(strings.TrimSpace(command), " ")
	if verb == "git" {
		var sub string
		sub, arg, ok = strings.Cut(strings.TrimSpace(arg), " ")
		verb = "git-" + sub
	}
	if !ok || (verb != "git-upload-pack" && verb != "git-receive-pack") {
		return "", "", "", fmt.Errorf("only git-upload-pack and git-receive-pack are allowed, not %q", command)
	}
	arg = strings.TrimSpace(arg)
	if len(arg) >= 2 && (arg[0] == '\'' || arg[0] == '"') && arg[len(arg)-1] == arg[0] {
		arg = arg[1 : len(arg)-1]
	}
	o, n, found := strings.Cut(strings.TrimPrefix(arg, "/"), "/")
	n = strings.TrimSuffix(n, ".git")
	if !found || !validName(o) || !validName(n) {
		return "", "", "", fmt.Errorf("invalid repository path %q", arg)
	}
	return verb, o, n, nil
}

func (s *sshServer) exec(login, gitProtocol, command string, ch ssh.Channel) int {
	service, owner, name, err := parseGitCommand(command)
	if err != nil {
		fmt.Fprintf(ch.Stderr(), "forgetest: %v\n", err)
		return 1
	}
	write := service == "git-receive-pack"
	switch s.f.access("ssh", login, owner, name, write) {
	case http.StatusOK:
	case http.StatusForbidden:
		fmt.Fprintf(ch.Stderr(), "Gitea: User permission denied for writing.\n")
		return 1
	default:
		fmt.Fprintf(ch.Stderr(), "Gitea: Repository does not exist or you do not have access\n")
		return 1
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.f.opts.GitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, service, s.f.repoDir(owner, name))
	cmd.Env = s.f.gitEnvBase()
	if gitProtocol != "" {
		cmd.Env = append(cmd.Env, "GIT_PROTOCOL="+gitProtocol)
	}
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
	// The client's input is copied by hand: exec's own copier would hold Wait until the client
	// closes its side, which it does only after the exit status.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 1
	}
	go func() {
		_, _ = io.Copy(stdin, ch)
		_ = stdin.Close()
	}()
	err = cmd.Run()
	_ = ch.CloseWrite()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return ee.ExitCode()
		}
		fmt.Fprintf(ch.Stderr(), "forgetest: %v\n", err)
		return 1
	}
	return 0
}
