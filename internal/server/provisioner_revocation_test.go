package server_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/backend/tfbackend"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
)

// TestProvisionerAcquireEndsWhenItsTokenIsRevoked: an acquire already blocked (waiting up to 60 s
// for a build) ends at once with the 401 a new request would get when an admin revokes the
// provisioner's token, so that the build queued next is not handed to the holder of the old token;
// the provisioner's new token gets it.
func TestProvisionerAcquireEndsWhenItsTokenIsRevoked(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			blocked := make(chan struct{}, 1)
			hook := func(o *server.Options) {
				o.Builder = tfbackend.New(tfbackend.Options{Store: o.Store, Clock: o.Clock, Logger: o.Logger,
					HeartbeatTimeout: 5 * time.Minute, PendingTimeout: 30 * time.Minute,
					After: func(d time.Duration) <-chan time.Time {
						if d == time.Minute { // the acquire's wait: it is blocked from here
							select {
							case blocked <- struct{}{}:
							default:
							}
						}
						return time.After(d)
					}})
			}
			te := newTFEnv(t, engine, hook)
			env := te.Env
			alice := createUser(t, env, "alice")
			old := worker{t, env, te.Prov, "host-1"}
			type answer struct {
				status int
				body   []byte
			}
			got := make(chan answer, 1)
			go func() {
				status, body := old.post(protocol.ProvisionerAcquirePath, "", protocol.AcquireRequest{WorkerID: old.id, WaitSeconds: 60})
				got <- answer{status, body}
			}()
			select {
			case <-blocked:
			case <-time.After(deadline):
				t.Fatal("the acquire did not block")
			}

			mustCall(t, env, env.AdminToken, "DELETE", "/api/v1/provisioners/p1/token", nil, http.StatusOK, nil)
			select {
			case a := <-got:
				if a.status != http.StatusUnauthorized {
					t.Fatalf("the blocked acquire after its token's revocation: %d %s, want 401", a.status, a.body)
				}
			case <-time.After(deadline):
				t.Fatal("the blocked acquire went on after its token's revocation")
			}

			// The build queued next goes to the provisioner's new token, not to the old one.
			mustCall(t, env, alice, "POST", "/api/v1/workspaces", map[string]any{"name": "w", "template": "tf"}, http.StatusCreated, nil)
			if status, body := old.post(protocol.ProvisionerAcquirePath, "", protocol.AcquireRequest{WorkerID: old.id}); status != http.StatusUnauthorized {
				t.Fatalf("an acquire with the revoked token: %d %s", status, body)
			}
			var p sdk.Provisioner
			mustCall(t, env, env.AdminToken, "POST", "/api/v1/provisioners/p1/token", nil, http.StatusOK, &p)
			var r protocol.AcquireResponse
			status, body := call(t, env, p.Token, "POST", protocol.ProvisionerAcquirePath, protocol.AcquireRequest{WorkerID: "host-1"})
			if status != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Job == nil || r.Job.WorkspaceName != "w" || r.Job.BuildNumber != 1 {
				t.Fatalf("the new token's acquire: %d %s", status, body)
			}
		})
	}
}
