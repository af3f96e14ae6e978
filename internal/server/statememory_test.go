package server_test

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// statePushChildEnv, when set (to a store engine), makes TestStatePushMemory the child that runs
// the pushes; the parent reads the child's peak resident memory from the operating system.
const statePushChildEnv = "HANGAR_SERVER_STATE_PUSH_ENGINE"

// maxStatePushRSS is the most the whole test process (server, store and client) may hold while
// pushes of bigState run, by store: what the server's bound on bodies in flight buys (measured
// after: about 480 and 730 MiB; before the bound: 1,065 and 1,812 MiB). Postgres's driver holds
// more copies of a state than SQLite's.
var maxStatePushRSS = map[string]int64{"sqlite": 700 << 20, "postgres": 1100 << 20}

// TestStatePushMemory: concurrent state pushes of bigState (each onto a saved state as large) by
// one user and by several users keep the server's memory bounded: one user gets one large push in
// flight (the others are answered 429 with Retry-After, before their bodies are read), the server
// holds two of them at once (a third, by another user, is answered 503 with Retry-After); a
// refused push writes nothing and the admitted ones are saved whole. On both stores.
func TestStatePushMemory(t *testing.T) {
	if engine := os.Getenv(statePushChildEnv); engine != "" {
		statePushScenario(t, engine)
		return
	}
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestStatePushMemory$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), statePushChildEnv+"="+engine)
			out, err := cmd.CombinedOutput()
			peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // kilobytes on Linux
			t.Logf("peak resident memory of the server and its clients: %.0f MiB", float64(peak)/(1<<20))
			if err != nil {
				t.Fatalf("the pushes: %v\n%s", err, out)
			}
			if raceDetector {
				t.Log("built with the race detector, which multiplies memory: the pushes' answers and states are checked, the bound is not")
				return
			}
			if peak > maxStatePushRSS[engine] {
				t.Errorf("peak resident memory %.0f MiB, want at most %d MiB", float64(peak)/(1<<20), maxStatePushRSS[engine]>>20)
			}
		})
	}
}

// stateBody generates a Terraform state of exactly bigState bytes with the serial given, without
// holding it: a reader that, when hold is not nil, stops before its last byte, says so on held and
// waits for hold to close.
type stateBody struct {
	head, tail string
	pad        int64 // bytes of padding between head and tail
	off        int64
	hold       chan struct{}
	held       chan struct{}
	heldOnce   sync.Once
}

func newStateBody(serial int) *stateBody {
	head := fmt.Sprintf(`{"version":4,"terraform_version":"1.9.8","serial":%d,"lineage":"hangar-test","resources":[{"padding":"`, serial)
	tail := `"}]}`
	return &stateBody{head: head, tail: tail, pad: bigState - int64(len(head)+len(tail))}
}

var padding = strings.Repeat("a", 32<<10)

func (b *stateBody) size() int64 { return int64(len(b.head)) + b.pad + int64(len(b.tail)) }

func (b *stateBody) Read(p []byte) (int, error) {
	size := b.size()
	if b.off >= size {
		return 0, io.EOF
	}
	if b.hold != nil && b.off == size-1 {
		b.heldOnce.Do(func() { close(b.held) })
		<-b.hold
	}
	end := min(size, b.off+int64(len(p)))
	if b.hold != nil && b.off < size-1 {
		end = min(end, size-1)
	}
	n := 0
	for i := b.off; i < end; {
		var chunk string
		switch head, pad := int64(len(b.head)), int64(len(b.head))+b.pad; {
		case i < head:
			chunk = b.head[i:]
		case i < pad:
			chunk = padding[:min(int64(len(padding)), pad-i)]
		default:
			chunk = b.tail[i-pad:]
		}
		k := copy(p[n:end-b.off], chunk)
		n += k
		i += int64(k)
	}
	b.off = end
	return n, nil
}

// sum is the SHA-256 of the whole body.
func (b *stateBody) sum() [32]byte {
	h := sha256.New()
	if _, err := io.Copy(h, newStateBody(b.serial())); err != nil {
		panic(err)
	}
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

func (b *stateBody) serial() int {
	var n int
	fmt.Sscanf(b.head[strings.Index(b.head, `"serial":`)+len(`"serial":`):], "%d", &n)
	return n
}

type pushResult struct {
	status     int
	retryAfter string
	body       string
}

// pushState sends body as alice's (token's) state of workspace ws.
func pushState(t *testing.T, env *servertest.Env, token, ws string, body *stateBody) pushResult {
	req, err := http.NewRequestWithContext(t.Context(), "PUT", env.URL+"/api/v1/workspaces/"+ws+"/state", body)
	if err != nil {
		t.Error(err)
		return pushResult{}
	}
	req.ContentLength = body.size()
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("push to %s: %v", ws, err)
		return pushResult{}
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return pushResult{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(out)}
}

// savedSum is the SHA-256 of the workspace's saved state, read as a stream.
func savedSum(t *testing.T, env *servertest.Env, token, ws string) [32]byte {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", env.URL+"/api/v1/workspaces/"+ws+"/state", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("state pull of %s: %d", ws, resp.StatusCode)
	}
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil {
		t.Fatal(err)
	}
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

// concurrently calls fn for each of args at once and waits for them all.
func concurrently(t *testing.T, args []string, fn func(string)) {
	var wg sync.WaitGroup
	for _, a := range args {
		wg.Go(func() { fn(a) })
	}
	wg.Wait()
}

func statePushScenario(t *testing.T, engine string) {
	te := newTFEnv(t, engine)
	env := te.Env
	p := worker{t, env, te.Prov, "host-1"}
	users := map[string]string{}
	for _, name := range []string{"alice", "bob", "carol"} {
		users[name] = createUser(t, env, name)
		mustCall(t, env, users[name], "POST", "/api/v1/workspaces", map[string]any{"name": name + "-ws", "template": "tf"}, http.StatusCreated, nil)
		p.run(name+"-ws", 1, protocol.FinishRequest{State: tfState(1)})
		// The worst case: each push replaces a saved state as large as itself.
		if r := pushState(t, env, users[name], name+"-ws", newStateBody(2)); r.status != http.StatusNoContent {
			t.Fatalf("%s's first push: %d %s", name, r.status, r.body)
		}
	}

	// One user, four concurrent pushes: the first is admitted and held before its last byte (its
	// body is then mostly read by the server: more than any socket buffers); the three others are
	// refused, each at once.
	first := newStateBody(3)
	first.hold, first.held = make(chan struct{}), make(chan struct{})
	done := make(chan pushResult)
	go func() { done <- pushState(t, env, users["alice"], "alice-ws", first) }()
	<-first.held
	concurrently(t, []string{"4", "5", "6"}, func(serial string) {
		n, _ := strconv.Atoi(serial)
		r := pushState(t, env, users["alice"], "alice-ws", newStateBody(n))
		if r.status != http.StatusTooManyRequests || r.retryAfter == "" || !strings.Contains(r.body, "another large state push of yours is in progress") {
			t.Errorf("alice's concurrent push (serial %d): %d, Retry-After %q, %s; want 429 with Retry-After", n, r.status, r.retryAfter, r.body)
		}
	})
	close(first.hold)
	if r := <-done; r.status != http.StatusNoContent {
		t.Errorf("alice's admitted push: %d %s", r.status, r.body)
	}
	if savedSum(t, env, users["alice"], "alice-ws") != first.sum() {
		t.Error("alice's saved state is not her admitted push")
	}

	// Several users: bob's push fills the server's budget; carol's and alice's, meanwhile, are
	// refused with 503 (each at once) and write nothing.
	if server.BodyBudgetBytes >= 2*bigState {
		t.Fatalf("the budget (%d) holds two pushes of %d", server.BodyBudgetBytes, bigState)
	}
	before := map[string][32]byte{}
	for _, name := range []string{"alice", "carol"} {
		before[name] = savedSum(t, env, users[name], name+"-ws")
	}
	held := map[string]*stateBody{}
	results := make(chan pushResult, 1)
	for _, name := range []string{"bob"} {
		b := newStateBody(3)
		b.hold, b.held = make(chan struct{}), make(chan struct{})
		held[name] = b
		go func() { results <- pushState(t, env, users[name], name+"-ws", b) }()
		<-b.held
	}
	concurrently(t, []string{"carol", "alice"}, func(name string) {
		r := pushState(t, env, users[name], name+"-ws", newStateBody(7))
		if r.status != http.StatusServiceUnavailable || r.retryAfter == "" || !strings.Contains(r.body, "the server is busy with other state pushes") {
			t.Errorf("%s's push while the budget is spent: %d, Retry-After %q, %s; want 503 with Retry-After", name, r.status, r.retryAfter, r.body)
		}
	})
	for _, b := range held {
		close(b.hold)
	}
	for range held {
		if r := <-results; r.status != http.StatusNoContent {
			t.Errorf("an admitted push: %d %s", r.status, r.body)
		}
	}
	for name, sum := range before {
		if savedSum(t, env, users[name], name+"-ws") != sum {
			t.Errorf("%s's refused push changed her state", name)
		}
	}
	for name, b := range held {
		if savedSum(t, env, users[name], name+"-ws") != b.sum() {
			t.Errorf("%s's saved state is not the admitted push", name)
		}
	}
	// Once they end, the budget is whole again.
	if r := pushState(t, env, users["alice"], "alice-ws", newStateBody(8)); r.status != http.StatusNoContent {
		t.Errorf("alice's push after the others: %d %s", r.status, r.body)
	}
}
