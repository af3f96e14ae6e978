package proxy

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
)

// sshPair is an SSH client and the server side's new channels over a loopback TCP connection.
func sshPair(t *testing.T) (*ssh.Client, <-chan ssh.NewChannel) {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conf := &ssh.ServerConfig{NoClientAuth: true}
	conf.AddHostKey(signer)
	type srv struct {
		conn  *ssh.ServerConn
		chans <-chan ssh.NewChannel
		err   error
	}
	done := make(chan srv, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- srv{err: err}
			return
		}
		conn, chans, reqs, err := ssh.NewServerConn(c, conf)
		if err == nil {
			go ssh.DiscardRequests(reqs)
		}
		done <- srv{conn, chans, err}
	}()
	client, err := ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{User: "u", HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	s := <-done
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(func() { _ = client.Close(); _ = s.conn.Close() })
	return client, s.chans
}

// A command that ends at once — its output, exit-status and close sent right after the answer to
// its exec — reaches the client through relayChannel whole: the exit status and the output, never
// a channel closed before the exec was answered (the client's Run then fails with no exit status
// and no output, as TestSSH once saw). Sessions run many at a time so that the relay's goroutines
// are scheduled every which way.
func TestRelayQuickCommandKeepsItsExitStatus(t *testing.T) {
	// The workspace: answers exec, writes to stderr, exits 7 and closes, as fast as it can.
	ws, wsChans := sshPair(t)
	go func() {
		for nc := range wsChans {
			ch, reqs, err := nc.Accept()
			if err != nil {
				continue
			}
			go func() {
				for req := range reqs {
					if req.Type != "exec" {
						_ = req.Reply(false, nil)
						continue
					}
					_ = req.Reply(true, nil)
					_, _ = ch.Stderr().Write([]byte("to-stderr\n"))
					_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{7}))
					_ = ch.Close()
				}
			}()
		}
	}()
	// The proxy: each session of the user's connection relayed to a session of the workspace's.
	user, userChans := sshPair(t)
	go func() {
		for nc := range userChans {
			a, aReqs, err := nc.Accept()
			if err != nil {
				continue
			}
			b, bReqs, err := ws.OpenChannel("session", nil)
			if err != nil {
				_ = a.Close()
				continue
			}
			go relayChannel(a, aReqs, b, bReqs, true)
		}
	}()

	const sessions, atOnce = 400, 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	sem := make(chan struct{}, atOnce)
	for range sessions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fail := func(s string) {
				mu.Lock()
				failures = append(failures, s)
				mu.Unlock()
			}
			sess, err := user.NewSession()
			if err != nil {
				fail("new session: " + err.Error())
				return
			}
			var stderr bytes.Buffer
			sess.Stderr = &stderr
			err = sess.Run("exit 7")
			var ee *ssh.ExitError
			if !errors.As(err, &ee) || ee.ExitStatus() != 7 || stderr.String() != "to-stderr\n" {
				msg := "<nil>"
				if err != nil {
					msg = err.Error()
				}
				fail("run: " + msg + ", stderr " + stderr.String())
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d quick commands lost their end through the relay; first: %s", len(failures), sessions, failures[0])
	}
}
