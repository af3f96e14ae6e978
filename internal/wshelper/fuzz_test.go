package wshelper

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// FuzzPayloads feeds every parser of raw SSH payloads (the requests and channel opens x/crypto/ssh
// leaves to the server) arbitrary bytes: none may panic, and what one accepts must encode back to
// a payload it accepts again, unchanged.
func FuzzPayloads(f *testing.F) {
	f.Add(uint8(0), ssh.Marshal(ptyRequest{"xterm-256color", 80, 24, 0, 0, "\x00"}))
	f.Add(uint8(1), ssh.Marshal(windowChange{120, 40, 0, 0}))
	f.Add(uint8(2), ssh.Marshal(envRequest{"LANG", "C.UTF-8"}))
	f.Add(uint8(3), ssh.Marshal(commandRequest{"echo hi"}))
	f.Add(uint8(4), ssh.Marshal(signalRequest{"TERM"}))
	f.Add(uint8(5), ssh.Marshal(forwardTarget{"127.0.0.1", 8080, "10.0.0.1", 51000}))
	f.Add(uint8(6), ssh.Marshal(forwardRequest{"", 0}))
	f.Add(uint8(5), []byte{0, 0, 0, 9})
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		roundTrip := func(v any, parse func([]byte) (any, error)) {
			again, err := parse(ssh.Marshal(v))
			if err != nil {
				t.Fatalf("%T %+v encodes to a payload refused: %v", v, v, err)
			}
			if !reflect.DeepEqual(again, v) {
				t.Fatalf("round trip: %+v became %+v", v, again)
			}
		}
		switch which % 7 {
		case 0:
			p := func(b []byte) (any, error) { return parsePtyRequest(b) }
			if v, err := p(b); err == nil {
				roundTrip(v, p)
			}
		case 1:
			p := func(b []byte) (any, error) { return parseWindowChange(b) }
			if v, err := p(b); err == nil {
				roundTrip(v, p)
			}
		case 2:
			p := func(b []byte) (any, error) { return parseEnv(b) }
			if v, err := p(b); err == nil {
				roundTrip(v, p)
			}
		case 3:
			if c, err := parseCommand(b); err == nil {
				if again, err := parseCommand(ssh.Marshal(commandRequest{c})); err != nil || again != c {
					t.Fatalf("command %q: %q %v", c, again, err)
				}
			}
		case 4:
			if sig, err := parseSignal(b); err == nil {
				if signalNames[sig] == "" {
					t.Fatalf("signal %v accepted without a name", sig)
				}
			}
		case 5:
			p := func(b []byte) (any, error) { return parseForwardTarget(b) }
			if v, err := p(b); err == nil {
				roundTrip(v, p)
			}
		case 6:
			p := func(b []byte) (any, error) { return parseForwardRequest(b) }
			if v, err := p(b); err == nil {
				roundTrip(v, p)
			}
		}
	})
}

// FuzzParsePostStart: the postStart JSON never panics the helper, and what it accepts survives
// being encoded and decoded again.
func FuzzParsePostStart(f *testing.F) {
	f.Add(`[{"id":"a","commandLine":"make","workingDir":"/p","env":[{"name":"X","value":"1"}]}]`)
	f.Add(`[]`)
	f.Add(`null`)
	f.Add(`[{"commandLine":"x","env":[{"name":"A=B"}]}]`)
	f.Fuzz(func(t *testing.T, s string) {
		cmds, err := ParsePostStart(s)
		if err != nil {
			return
		}
		for _, c := range cmds {
			if c.CommandLine == "" {
				t.Fatalf("empty command accepted: %q", s)
			}
		}
		b, err := json.Marshal(cmds)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParsePostStart(string(b))
		if err != nil || len(again) != len(cmds) {
			t.Fatalf("%s: encoded again as %s: %v", s, b, err)
		}
	})
}

// FuzzParseEditor: the editor's JSON never panics the helper; what it accepts has an absolute
// program, a TCP port and no NUL, and survives being encoded and decoded again.
func FuzzParseEditor(f *testing.F) {
	f.Add(`{"argv":["/hangar/editor/bin/node","/hangar/editor/node_modules/code-server/out/node/entry.js","--bind-addr","0.0.0.0:60001"],"port":60001}`)
	f.Add(`{"argv":[],"port":1}`)
	f.Add(`null`)
	f.Add(`{"argv":["/a"],"port":65536}`)
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEditor(s)
		if err != nil || e == nil {
			return
		}
		if !strings.HasPrefix(e.Argv[0], "/") || e.Port < 1 || e.Port > 65535 {
			t.Fatalf("%q accepted as %+v", s, e)
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseEditor(string(b))
		if err != nil || again == nil || again.Port != e.Port || len(again.Argv) != len(e.Argv) {
			t.Fatalf("%s: encoded again as %s: %+v %v", s, b, again, err)
		}
	})
}

// FuzzParseRemoteEnv: what is accepted has names the environment can hold, and WithRemoteEnv sets
// every one of them.
func FuzzParseRemoteEnv(f *testing.F) {
	f.Add(`[{"name":"PATH","value":"${PATH}:/x"},{"name":"A","value":"${A}${B}"}]`)
	f.Add(`[{"name":"A=B","value":"x"}]`)
	f.Add(`null`)
	f.Add(`[{"name":"","value":""}]`)
	f.Fuzz(func(t *testing.T, s string) {
		env, err := ParseRemoteEnv(s)
		if err != nil {
			return
		}
		out := WithRemoteEnv([]string{"PATH=/bin"}, env)
		for _, e := range env {
			if e.Name == "" || strings.ContainsAny(e.Name, "=\x00") {
				t.Fatalf("name %q accepted: %q", e.Name, s)
			}
			if !slices.ContainsFunc(out, func(kv string) bool { return strings.HasPrefix(kv, e.Name+"=") }) {
				t.Fatalf("%s is not set in %q", e.Name, out)
			}
		}
	})
}
