package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
	"github.com/hangar-dev/hangar/internal/workspace"
)

// TestDotfilesOnRealNode: a user's profile reaches their workspace on the real node. The owner
// sets a name, an email and a dotfiles repository (on the test forge, inside the cluster's network
// namespace); in the workspace, a shell has GIT_AUTHOR_NAME and GIT_AUTHOR_EMAIL of the profile,
// and the helper cloned the repository into ~/.dotfiles and ran its install.sh, whose record and
// log are in the state directory.
func TestDotfilesOnRealNode(t *testing.T) {
	parallel(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	proxyKey, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"proxy_ssh_public_keys": []string{strings.TrimSpace(string(ssh.MarshalAuthorizedKey(proxyKey.PublicKey()))) + " proxy"}})

	cluster := kubetest.Start(t)
	forge := forgetest.New(t, forgetest.Options{ListenInside: cluster.ListenInside, InsideHost: kubetest.NodeIP})
	forge.AddUser(forgetest.User{Login: "ada", Email: "ada@example.com"})
	forge.CreateRepo("ada", "dotfiles", false, map[string]string{
		"install.sh":     "#!/bin/sh\necho \"installed from $PWD\" > \"$HOME/installed\"\nln -s \"$PWD/.profile-extra\" \"$HOME/.profile-extra\"\n",
		".profile-extra": "export FROM_DOTFILES=yes\n",
	})

	r := &realNode{cluster: cluster, srv: startServer(t), agent: "dots", realTime: 90 * time.Second}
	token := r.srv.registerRealAgent(t, r.agent, string(cfg))
	startAgent(t, r.srv, r.cluster, r.agent, token, "hangar-agent-dots")
	r.c = r.srv.client(t, r.srv.AdminToken)
	repo := forge.InsideHTTPURL() + "/ada/dotfiles.git#main"
	name, email := "Ada Lovelace", "ada@example.com"
	if _, err := r.c.UpdateProfile(context.Background(), sdk.UpdateProfileRequest{FullName: &name, Email: &email, DotfilesRepo: &repo}); err != nil {
		t.Fatal(err)
	}

	// HOME on the data volume, so that the install is once per volume.
	w := r.create(t, "dots", "schemaVersion: 2.2.0\ncomponents:\n  - name: dev\n    container:\n      image: "+kubetest.WorkspaceImage+
		"\n      env:\n        - name: HOME\n          value: /projects/home\n      command: [\"sh\", \"-c\", \"mkdir -p /projects/home && exec sleep 1000000\"]\n")
	waitFor(t, r.c, "dots", r.realTime, "Running", state("Running", "Running"))
	p := r.pod(t, w.Namespace, "the pod to be ready", ready)
	agentToken, err := os.ReadFile(token)
	if err != nil {
		t.Fatal(err)
	}
	hash := sha256.Sum256(bytes.TrimSpace(agentToken))
	hostKey, err := ssh.NewPublicKey(workspace.HelperHostKey(hash[:], w.ID).Public())
	if err != nil {
		t.Fatal(err)
	}
	client := r.sshClient(t, net.JoinHostPort(p.Status.PodIP, "60022"), proxyKey, hostKey)
	if got := sshRun(t, client, `printf '%s|%s|%s|%s' "$GIT_AUTHOR_NAME" "$GIT_AUTHOR_EMAIL" "$GIT_COMMITTER_NAME" "$GIT_COMMITTER_EMAIL"`); got != "Ada Lovelace|ada@example.com|Ada Lovelace|ada@example.com" {
		t.Errorf("the git identity in the workspace: %q", got)
	}
	kubetest.Eventually(t, 2*time.Minute, "the dotfiles to be installed", func(context.Context) error {
		if got := sshRun(t, client, "cat /projects/.hangar/dotfiles-done.json 2>/dev/null; true"); !strings.Contains(got, `"repo":"`+repo+`"`) {
			log := sshRun(t, client, "cat /projects/.hangar/dotfiles.log 2>/dev/null; true")
			return fmt.Errorf("no record yet; log %q", log)
		}
		return nil
	})
	if got := sshRun(t, client, "cat ~/installed; . ~/.profile-extra; echo $FROM_DOTFILES; test -d ~/.dotfiles/.git && echo cloned"); got != "installed from /projects/home/.dotfiles\nyes\ncloned\n" {
		t.Errorf("in the workspace after the install: %q", got)
	}
	if log := sshRun(t, client, "cat /projects/.hangar/dotfiles.log"); !strings.Contains(log, "running install.sh") || !strings.Contains(log, "dotfiles: installed") {
		t.Errorf("the dotfiles log: %q", log)
	}
	var accesses []string
	for _, a := range forge.GitAccesses() {
		accesses = append(accesses, fmt.Sprintf("%s %s %d", a.Transport, a.Repo, a.Status))
	}
	if !strings.Contains(strings.Join(accesses, "\n"), "http ada/dotfiles 200") {
		t.Errorf("the forge saw %q, want the clone", accesses)
	}
	client.Close()
	r.terminate(t, w, false)
}
