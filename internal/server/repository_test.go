package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/externalauth"
	"github.com/hangar-dev/hangar/internal/protocol"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/server"
	"github.com/hangar-dev/hangar/internal/servertest"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
)

// repoEnv is a Kubernetes server with the test forge configured as a Gitea, and user dev linked
// there as alice.
type repoEnv struct {
	*servertest.Env
	forge      *forgetest.Forge
	dev, agent string
}

func newRepoEnv(t *testing.T, engine string) *repoEnv {
	t.Helper()
	re := &repoEnv{forge: forgetest.New(t, forgetest.Options{})}
	re.forge.AddUser(forgetest.User{Login: "alice", FullName: "Alice", Email: "alice@example.com"})
	cfg := fmt.Sprintf("providers:\n  - {id: forge, name: Forge, type: gitea, client_id: hangar, client_secret_env: FORGE_SECRET, base_url: %q, hosts: [%q, %q], ssh_known_hosts: %q}\n",
		re.forge.HTTPURL(), re.forge.HTTPURL(), "ssh://"+re.forge.SSHAddr(), re.forge.KnownHosts())
	providers, err := externalauth.Decode([]byte(cfg), func(k string) (string, bool) { return "forge-secret", k == "FORGE_SECRET" }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := externalauth.ParseKeys([]byte(testKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	var base string
	re.Env = servertest.NewWith(t, engine, func(o *server.Options) {
		o.ExternalAuth = externalauth.New(externalauth.Options{Providers: providers, Keys: keys, Store: o.Store, Clock: o.Clock, Log: o.Logger,
			CallbackURL: func(id string) string { return server.ExternalAuthCallbackURL(base, id) }})
	})
	base = re.URL
	re.forge.AddClient("hangar", "forge-secret", []string{server.ExternalAuthCallbackURL(base, "forge")})
	// An agent that builds images, for definitions that need one.
	re.agent = createAgent(t, re.Env, "k1", map[string]any{"image_build": map[string]any{"registry": "registry.test:5000/hangar/builds"}})
	re.dev = createUser(t, re.Env, "dev")
	return re
}

// link links dev's account at the forge as alice, as a browser signed in to Hangar would.
func (re *repoEnv) link(t *testing.T) { t.Helper(); re.linkAs(t, re.dev) }

// linkAs links the account of the Hangar user whose token is token at the forge as alice.
func (re *repoEnv) linkAs(t *testing.T, token string) {
	t.Helper()
	var start sdk.ExternalAuthLinkStart
	mustCall(t, re.Env, token, "POST", "/api/v1/external-auth/forge/link", map[string]any{}, http.StatusOK, &start)
	b := newOIDCBrowser(t)
	if resp, body := b.postForm(re.URL+"/signin", url.Values{"token": {token}, "return_to": {"/ui/"}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in: %s %s", resp.Status, body)
	}
	back, err := re.forge.Approve(b.c, start.AuthorizeURL, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if resp, body := b.get(back.String()); resp.StatusCode != http.StatusOK || !strings.Contains(body, "alice") {
		t.Fatalf("callback: %s %s", resp.Status, body)
	}
}

// configOf is the config the agent gets for the workspace.
func (re *repoEnv) configOf(t *testing.T, name string) string {
	t.Helper()
	resp := reconcileCall(t, re.Env, re.agent, protocol.ReconcileRequest{UpdateType: protocol.UpdateFull, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
	for _, w := range resp.WorkspaceRailsInfos {
		if strings.HasPrefix(w.Name, name+"-") {
			return w.ConfigToApply
		}
	}
	t.Fatalf("no config for %s", name)
	return ""
}

// partialConfig is the config a partial reconcile sends for the workspace ("" when none: nothing
// changed for it since the agent's last answer).
func (re *repoEnv) partialConfig(t *testing.T, name string) string {
	t.Helper()
	resp := reconcileCall(t, re.Env, re.agent, protocol.ReconcileRequest{UpdateType: protocol.UpdatePartial, WorkspaceAgentInfos: []protocol.WorkspaceAgentInfo{}})
	for _, w := range resp.WorkspaceRailsInfos {
		if strings.HasPrefix(w.Name, name+"-") {
			return w.ConfigToApply
		}
	}
	return ""
}

func TestCreateWorkspaceFromRepository(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			re := newRepoEnv(t, engine)
			f := re.forge
			f.CreateRepo("alice", "app", true, map[string]string{
				".devcontainer/devcontainer.json": `{
  // comments, as real files have them
  "image": "hangar.local/workspace:dev",
  "forwardPorts": [8000],
  "containerEnv": {"APP_MODE": "dev"},
  "postCreateCommand": "echo created > created.txt",
}`,
			})
			f.CreateRepo("alice", "pub", false, map[string]string{"devfile.yaml": "schemaVersion: 2.2.0\nmetadata: {name: pub}\ncomponents:\n- name: tools\n  container: {image: 'hangar.local/workspace:dev', mountSources: true}\n"})
			f.CreateRepo("alice", "two", true, map[string]string{".devcontainer/go/devcontainer.json": `{"image": "a"}`, ".devcontainer/py/devcontainer.json": `{"image": "b"}`})
			f.CreateRepo("alice", "plain", true, map[string]string{"README.md": "nothing to see\n"})
			create := func(name string, repo map[string]any) (int, []byte) {
				return call(t, re.Env, re.dev, "POST", "/api/v1/workspaces", map[string]any{"name": name, "agent": "k1", "repository": repo})
			}

			// Not linked: the public repository's devfile is read anonymously; the private one is
			// refused, saying to link.
			var pub sdk.Workspace
			if status, body := create("pub", map[string]any{"url": f.CloneURL("alice", "pub")}); status != http.StatusCreated || json.Unmarshal(body, &pub) != nil {
				t.Fatalf("public, not linked: %d %s", status, body)
			}
			if cfg := re.configOf(t, "pub"); !strings.Contains(cfg, "image: hangar.local/workspace:dev") || !strings.Contains(cfg, `\"name\":\"pub\"`) {
				t.Fatalf("the public repository's devfile and project are not in its config:\n%s", cfg)
			}
			status, body := create("app", map[string]any{"url": f.CloneURL("alice", "app")})
			if e := apiError(t, body); status != http.StatusConflict || !strings.Contains(e.Message, "hangar external-auth link forge") {
				t.Fatalf("private, not linked: %d %s", status, body)
			}

			re.link(t)
			// Another user's private repository, with the linked account: refused naming the
			// forge, the reason said once.
			f.AddUser(forgetest.User{Login: "carol", Email: "carol@example.com"})
			f.CreateRepo("carol", "secret", true, map[string]string{"devfile.yaml": "schemaVersion: 2.2.0\n"})
			status, body = create("secret", map[string]any{"url": f.CloneURL("carol", "secret")})
			if e := apiError(t, body); status != http.StatusConflict ||
				e.Message != "Forge refused to read carol/secret with your linked account (HTTP 404): it is private and your account may not read it, or it does not exist" {
				t.Fatalf("another user's private repository: %d %s", status, body)
			}
			var ws sdk.Workspace
			mustCall(t, re.Env, re.dev, "POST", "/api/v1/workspaces", map[string]any{"name": "app", "agent": "k1", "repository": map[string]any{"url": f.CloneURL("alice", "app"), "ref": "main"}}, http.StatusCreated, &ws)
			if ws.Definition == "" || !strings.Contains(ws.Definition, "devcontainer") {
				t.Errorf("definition %q, want the devcontainer.json's", ws.Definition)
			}
			cfg := re.configOf(t, "app")
			for _, want := range []string{
				"image: hangar.local/workspace:dev", // the devcontainer's image
				"name: APP_MODE",                    // its containerEnv
				"containerPort: 8000",               // its forwardPorts
				`\"revision\":\"main\"`,             // the repository, cloned at the ref
				f.CloneURL("alice", "app"),
				"value: /workspaces/app",                  // PROJECT_SOURCE: the repository is the workspace folder
				`created.txt\",\"oncePerWorkspace\":true`, // its postCreateCommand, once per workspace
			} {
				if !strings.Contains(cfg, want) {
					t.Errorf("the config lacks %q", want)
				}
			}
			if t.Failed() {
				t.Logf("config:\n%s", cfg)
			}

			// Several devcontainer definitions: the user names one.
			status, body = create("two", map[string]any{"url": f.CloneURL("alice", "two")})
			if e := apiError(t, body); status != http.StatusBadRequest || len(e.Validations) != 1 || e.Validations[0].Field != "repository.devcontainer_path" ||
				!strings.Contains(e.Validations[0].Detail, ".devcontainer/go/devcontainer.json, .devcontainer/py/devcontainer.json") ||
				strings.Join(e.Validations[0].Choices, " ") != ".devcontainer/go/devcontainer.json .devcontainer/py/devcontainer.json" {
				t.Fatalf("two definitions: %d %s", status, body)
			}
			mustCall(t, re.Env, re.dev, "POST", "/api/v1/workspaces", map[string]any{"name": "two", "agent": "k1",
				"repository": map[string]any{"url": f.CloneURL("alice", "two"), "devcontainer_path": ".devcontainer/py/devcontainer.json"}}, http.StatusCreated, nil)
			if cfg := re.configOf(t, "two"); !strings.Contains(cfg, "image: b") {
				t.Fatalf("the named definition is not used:\n%s", cfg)
			}
			// No definition: the default, with a warning; and the repository cloned.
			var plain sdk.Workspace
			mustCall(t, re.Env, re.dev, "POST", "/api/v1/workspaces", map[string]any{"name": "plain", "agent": "k1", "repository": map[string]any{"url": f.CloneURL("alice", "plain")}}, http.StatusCreated, &plain)
			if len(plain.Warnings) == 0 || !strings.Contains(plain.Warnings[0], "alice/plain has no devfile or devcontainer.json") {
				t.Fatalf("warnings %q", plain.Warnings)
			}
			// A host no forge serves: the default and a warning; bad input names the field.
			var other sdk.Workspace
			mustCall(t, re.Env, re.dev, "POST", "/api/v1/workspaces", map[string]any{"name": "other", "agent": "k1", "repository": map[string]any{"url": "https://git.elsewhere.test/x/y.git"}}, http.StatusCreated, &other)
			if len(other.Warnings) == 0 || !strings.Contains(other.Warnings[0], "no forge configured in Hangar serves git.elsewhere.test") {
				t.Fatalf("warnings %q", other.Warnings)
			}
			for _, tc := range []struct {
				repo  map[string]any
				field string
			}{
				{map[string]any{"url": "git@" + strings.TrimPrefix(f.HTTPURL(), "http://") + ":alice/app.git"}, "repository.url"},
				{map[string]any{"url": "https://u:p@h/x/y"}, "repository"},
				{map[string]any{"url": f.CloneURL("alice", "app"), "ref": "-x"}, "repository"},
				{map[string]any{"url": f.CloneURL("alice", "app"), "devcontainer_path": "../x"}, "repository.devcontainer_path"},
				{map[string]any{"url": f.CloneURL("alice", "app"), "ref": "no-such-branch"}, "repository.ref"},
			} {
				status, body := create("bad", tc.repo)
				if e := apiError(t, body); status != http.StatusBadRequest || len(e.Validations) == 0 || e.Validations[0].Field != tc.field {
					t.Errorf("%v: %d %s, want a 400 naming %s", tc.repo, status, body, tc.field)
				}
			}
			status, body = call(t, re.Env, re.dev, "POST", "/api/v1/workspaces", map[string]any{"name": "both", "agent": "k1", "devfile": "x", "repository": map[string]any{"url": f.CloneURL("alice", "pub")}})
			if e := apiError(t, body); status != http.StatusBadRequest || !strings.Contains(string(body), "repository") {
				t.Fatalf("repository with a devfile: %d %s %+v", status, body, e)
			}
		})
	}
}

// A devcontainer.json that builds its image from a Dockerfile: the server reads the Dockerfile
// and its build context through the forge with the user's token; the workspace's pod builds the
// image from the build's base and runs the result. A Dockerfile that cannot be built is refused
// naming the field, the file and the line; given directly, without its repository, the build is
// refused saying to create from the repository.
func TestCreateWorkspaceFromRepositoryDockerfile(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			re := newRepoEnv(t, engine)
			f := re.forge
			files := map[string]string{
				".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "args": {"TAG": "dev"}}}`,
				".devcontainer/Dockerfile":        "ARG TAG=latest\nFROM hangar.local/workspace:${TAG}\nCOPY setup.sh /usr/local/bin/\nRUN setup.sh\n",
				".devcontainer/setup.sh":          "echo set up\n",
			}
			f.CreateRepo("alice", "built", true, files)
			files[".devcontainer/Dockerfile"] = "FROM hangar.local/workspace:dev\nRUN true\nCOPY missing.sh /x\n"
			f.CreateRepo("alice", "broken", true, files)
			re.link(t)
			mustCall(t, re.Env, re.dev, "POST", "/api/v1/workspaces", map[string]any{"name": "built", "agent": "k1", "repository": map[string]any{"url": f.CloneURL("alice", "built")}}, http.StatusCreated, nil)
			if cfg := re.configOf(t, "built"); !strings.Contains(cfg, "name: hangar-image-build\n        image: hangar.local/workspace:dev\n") ||
				!strings.Contains(cfg, "image: registry.test:5000/hangar/builds:") {
				t.Fatalf("the pod does not build from the Dockerfile's base and run the result:\n%s", cfg)
			}
			status, body := call(t, re.Env, re.dev, "POST", "/api/v1/workspaces", map[string]any{"name": "broken", "agent": "k1", "repository": map[string]any{"url": f.CloneURL("alice", "broken")}})
			if e := apiError(t, body); status != http.StatusBadRequest || len(e.Validations) != 1 || e.Validations[0].Field != "devcontainer.build.dockerfile" ||
				e.Validations[0].Detail != ".devcontainer/Dockerfile:3: COPY missing.sh: not found in the build context" {
				t.Fatalf("a COPY of a missing file: %d %s", status, body)
			}
			status, body = call(t, re.Env, re.dev, "POST", "/api/v1/workspaces", map[string]any{"name": "direct", "agent": "k1", "devcontainer": files[".devcontainer/devcontainer.json"]})
			if e := apiError(t, body); status != http.StatusBadRequest || len(e.Validations) != 1 || e.Validations[0].Field != "devcontainer.build" ||
				!strings.Contains(e.Validations[0].Detail, "Hangar reads them only when the workspace is created from its repository (hangar create --repo URL)") {
				t.Fatalf("a build given directly: %d %s", status, body)
			}
		})
	}
}

// TestCreateWorkspaceFromSSHRepository: an SSH URL (ssh:// or scp-like) of a host a forge serves
// is accepted; its definition is read through the forge's API as for https (anonymously refused
// when private, with the linked account read), and the repository is the first project with
// that SSH URL, which the clone at the start signs for. An SSH host no forge serves is refused
// naming the field: the clone could check neither the key nor the host.
func TestCreateWorkspaceFromSSHRepository(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			re := newRepoEnv(t, engine)
			f := re.forge
			f.CreateRepo("alice", "app", true, map[string]string{".devcontainer.json": `{"image": "hangar.local/workspace:ssh"}`})
			sshURL := f.SSHCloneURL("alice", "app")
			create := func(name string, repo map[string]any) (int, []byte) {
				return call(t, re.Env, re.dev, "POST", "/api/v1/workspaces", map[string]any{"name": name, "agent": "k1", "repository": repo})
			}
			status, body := create("app", map[string]any{"url": sshURL})
			if e := apiError(t, body); status != http.StatusConflict || !strings.Contains(e.Message, "hangar external-auth link forge") {
				t.Fatalf("private over SSH, not linked: %d %s", status, body)
			}
			re.link(t)
			var ws sdk.Workspace
			mustCall(t, re.Env, re.dev, "POST", "/api/v1/workspaces", map[string]any{"name": "app", "agent": "k1", "repository": map[string]any{"url": sshURL, "ref": "main"}}, http.StatusCreated, &ws)
			cfg := re.configOf(t, "app")
			if !strings.Contains(cfg, "image: hangar.local/workspace:ssh") || !strings.Contains(cfg, strings.ReplaceAll(sshURL, "/", `\\/`)) && !strings.Contains(cfg, sshURL) {
				t.Fatalf("the SSH repository's definition and project are not in its config:\n%s", cfg)
			}
			status, body = create("elsewhere", map[string]any{"url": "git@git.elsewhere.test:x/y.git"})
			if e := apiError(t, body); status != http.StatusBadRequest || len(e.Validations) == 0 || e.Validations[0].Field != "repository.url" ||
				!strings.Contains(e.Validations[0].Detail, "no forge configured in Hangar serves the SSH host git.elsewhere.test") {
				t.Fatalf("an SSH host no forge serves: %d %s, want a 400 naming repository.url", status, body)
			}
		})
	}
}

// The definition follows the repository: hangar update reads it again at the ref's newest commit
// and makes it the workspace's (the agent gets the new config); until then the workspace keeps the
// definition it was read with, whatever the repository's branch does. The same definition changes
// nothing but the commit shown; a definition the rules refuse is refused as at create, naming the
// field, and nothing changes; a repository without a definition falls back to the agent's default
// as create does; an unlinked account is create's 409; a workspace not made from a repository has
// nothing to read again.
func TestUpdateWorkspaceFromRepository(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			re := newRepoEnv(t, engine)
			f := re.forge
			first := f.CreateRepo("alice", "app", true, map[string]string{".devcontainer.json": `{"image": "hangar.local/app:v1"}`})
			re.link(t)
			var ws sdk.Workspace
			mustCall(t, re.Env, re.dev, "POST", "/api/v1/workspaces", map[string]any{"name": "app", "agent": "k1",
				"repository": map[string]any{"url": f.CloneURL("alice", "app"), "ref": "main"}}, http.StatusCreated, &ws)
			wantRepo := func(ws sdk.Workspace, commit, path string) {
				t.Helper()
				r := ws.Repository
				if r == nil || r.URL != f.CloneURL("alice", "app") || r.Ref != "main" || r.Commit != commit || r.DefinitionPath != path || r.ReadAt.IsZero() {
					t.Fatalf("repository %+v, want commit %s and path %s", r, commit, path)
				}
			}
			show := func() sdk.Workspace {
				t.Helper()
				var got sdk.Workspace
				mustCall(t, re.Env, re.dev, "GET", "/api/v1/workspaces/app", nil, http.StatusOK, &got)
				return got
			}
			update := func() (int, []byte) {
				return call(t, re.Env, re.dev, "POST", "/api/v1/workspaces/app/update", map[string]any{})
			}
			wantRepo(ws, first, ".devcontainer.json")
			wantRepo(show(), first, ".devcontainer.json")
			if cfg := re.configOf(t, "app"); !strings.Contains(cfg, "image: hangar.local/app:v1") {
				t.Fatalf("config at create:\n%s", cfg)
			}

			// The branch moves on: the workspace is pinned (a stop and a start do not read it).
			second := f.Commit("alice", "app", "v2", map[string]string{".devcontainer.json": `{"image": "hangar.local/app:v2", "forwardPorts": [8080]}`})
			mustCall(t, re.Env, re.dev, "PATCH", "/api/v1/workspaces/app", map[string]any{"desired_state": "Stopped"}, http.StatusOK, nil)
			mustCall(t, re.Env, re.dev, "PATCH", "/api/v1/workspaces/app", map[string]any{"desired_state": "Running"}, http.StatusOK, nil)
			if cfg := re.configOf(t, "app"); !strings.Contains(cfg, "image: hangar.local/app:v1") {
				t.Fatalf("a start read the repository again:\n%s", cfg)
			}
			wantRepo(show(), first, ".devcontainer.json")

			// hangar update: the new definition, at the branch's newest commit, sent to the agent at
			// its next partial reconcile (the update is a change of the desired state's time).
			re.Clock.Advance(time.Second) // the agent's answer after the start's change
			re.configOf(t, "app")
			if cfg := re.partialConfig(t, "app"); cfg != "" {
				t.Fatalf("a partial reconcile before the update sent a config")
			}
			var up sdk.UpdateWorkspaceVersionResponse
			status, body := update()
			if status != http.StatusOK || json.Unmarshal(body, &up) != nil || up.Result != "definition" {
				t.Fatalf("update: %d %s", status, body)
			}
			wantRepo(up.Workspace, second, ".devcontainer.json")
			wantRepo(show(), second, ".devcontainer.json")
			if cfg := re.partialConfig(t, "app"); !strings.Contains(cfg, "image: hangar.local/app:v2") {
				t.Fatalf("the next partial reconcile did not send the new definition:\n%s", cfg)
			}
			if cfg := re.configOf(t, "app"); !strings.Contains(cfg, "image: hangar.local/app:v2") || !strings.Contains(cfg, "containerPort: 8080") {
				t.Fatalf("the agent did not get the new definition:\n%s", cfg)
			}
			e := oneEntry(t, re.Env, "action=workspace.update&target=dev/app")
			wantEntry(t, e, "dev", "workspace.update", "workspace", "dev/app", "success")
			if e.Details["commit"] != second || e.Details["result"] != "definition" {
				t.Fatalf("audit details %+v", e.Details)
			}

			// Again, and after a commit that leaves the definition: nothing changes but the commit.
			if status, body := update(); status != http.StatusOK || json.Unmarshal(body, &up) != nil || up.Result != "up-to-date" {
				t.Fatalf("update again: %d %s", status, body)
			}
			third := f.Commit("alice", "app", "docs", map[string]string{"README.md": "hello\n"})
			if status, body := update(); status != http.StatusOK || json.Unmarshal(body, &up) != nil || up.Result != "up-to-date" {
				t.Fatalf("update after a commit without definition change: %d %s", status, body)
			}
			wantRepo(show(), third, ".devcontainer.json")

			// A definition the rules refuse: create's 400, naming the field; nothing changes.
			f.Commit("alice", "app", "privileged", map[string]string{".devcontainer.json": `{"image": "hangar.local/app:v3", "privileged": true}`})
			status, body = update()
			if e := apiError(t, body); status != http.StatusBadRequest || !strings.Contains(string(body), "privileged") || len(e.Validations) == 0 {
				t.Fatalf("a refused definition: %d %s", status, body)
			}
			wantRepo(show(), third, ".devcontainer.json")
			if cfg := re.configOf(t, "app"); !strings.Contains(cfg, "image: hangar.local/app:v2") {
				t.Fatalf("a refused definition changed the config:\n%s", cfg)
			}

			// No definition any more: the agent's default, with create's warning.
			gone := f.Remove("alice", "app", "no definition", ".devcontainer.json")
			up = sdk.UpdateWorkspaceVersionResponse{}
			status, body = update()
			if status != http.StatusOK || json.Unmarshal(body, &up) != nil || up.Result != "definition" ||
				len(up.Workspace.Warnings) == 0 || !strings.Contains(up.Workspace.Warnings[0], "alice/app has no devfile or devcontainer.json at main") {
				t.Fatalf("update without a definition: %d %s", status, body)
			}
			wantRepo(up.Workspace, gone, "")

			// The forge link gone: create's 409, saying to link.
			mustCall(t, re.Env, re.dev, "DELETE", "/api/v1/external-auth/forge", nil, http.StatusNoContent, nil)
			status, body = update()
			if e := apiError(t, body); status != http.StatusConflict || !strings.Contains(e.Message, "hangar external-auth link forge") {
				t.Fatalf("update after unlinking: %d %s", status, body)
			}

			// A workspace not made from a repository.
			mustCall(t, re.Env, re.dev, "POST", "/api/v1/workspaces", map[string]any{"name": "plain", "agent": "k1"}, http.StatusCreated, nil)
			status, body = call(t, re.Env, re.dev, "POST", "/api/v1/workspaces/plain/update", map[string]any{})
			if e := apiError(t, body); status != http.StatusConflict || !strings.Contains(e.Detail, "created from a repository (hangar create --repo)") {
				t.Fatalf("update of a workspace without a repository: %d %s", status, body)
			}
		})
	}
}

// An admin's hangar update of another user's workspace reads the repository with the owner's
// forge account, never the admin's: what the admin's account may read (a private definition and
// its build context) must not reach a workspace whose owner may not read it. The owner without a
// linked account gets create's 409 saying to link, though the admin has one.
func TestAdminUpdateReadsWithTheOwnersAccount(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			re := newRepoEnv(t, engine)
			f := re.forge
			f.CreateRepo("alice", "app", true, map[string]string{".devcontainer.json": `{"image": "hangar.local/app:v1"}`})
			re.link(t)
			mustCall(t, re.Env, re.dev, "POST", "/api/v1/workspaces", map[string]any{"name": "app", "agent": "k1",
				"repository": map[string]any{"url": f.CloneURL("alice", "app"), "ref": "main"}}, http.StatusCreated, nil)
			f.Commit("alice", "app", "v2", map[string]string{".devcontainer.json": `{"image": "hangar.local/secret:v2"}`})
			// dev no longer has the account; the admin has one that reads the private repository.
			mustCall(t, re.Env, re.dev, "DELETE", "/api/v1/external-auth/forge", nil, http.StatusNoContent, nil)
			re.linkAs(t, re.AdminToken)

			status, body := call(t, re.Env, re.AdminToken, "POST", "/api/v1/workspaces/dev%2Fapp/update", map[string]any{})
			if e := apiError(t, body); status != http.StatusConflict || !strings.Contains(e.Message, "hangar external-auth link forge") {
				t.Fatalf("an admin's update read with the admin's account: %d %s", status, body)
			}
			if cfg := re.configOf(t, "app"); strings.Contains(cfg, "hangar.local/secret:v2") {
				t.Fatalf("the owner's workspace got what only the admin may read:\n%s", cfg)
			}

			// With the owner's account linked again, the admin's update reads with it.
			re.link(t)
			var up sdk.UpdateWorkspaceVersionResponse
			mustCall(t, re.Env, re.AdminToken, "POST", "/api/v1/workspaces/dev%2Fapp/update", map[string]any{}, http.StatusOK, &up)
			if up.Result != "definition" {
				t.Fatalf("admin's update with the owner's account: %+v", up)
			}
		})
	}
}

// A Kubernetes template whose devfile says `hangar.dev/definition-from: repository`: a workspace
// created with it and a repository is defined by the repository's own definition when it has one,
// by the template's devfile (the fallback) otherwise, and is the template's workspace either way
// (its policies apply); the answer says which definition was used. Without a repository the
// template's devfile is used; a template without the attribute refuses a repository, naming the
// field. An update of such a workspace falls back to the template's devfile too.
func TestTemplateDefinitionFromRepository(t *testing.T) {
	for _, engine := range servertest.Engines {
		t.Run(engine, func(t *testing.T) {
			re := newRepoEnv(t, engine)
			f := re.forge
			fallback := "schemaVersion: 2.2.0\nmetadata: {name: team}\nattributes: {hangar.dev/definition-from: repository}\ncomponents:\n- name: main\n  container: {image: 'hangar.local/fallback:1'}\n"
			mustCall(t, re.Env, re.AdminToken, "POST", "/api/v1/templates/team/versions", map[string]any{"kind": "kubernetes", "devfile": fallback}, http.StatusCreated, nil)
			mustCall(t, re.Env, re.AdminToken, "POST", "/api/v1/templates/fixed/versions", map[string]any{"kind": "kubernetes",
				"devfile": "schemaVersion: 2.2.0\ncomponents:\n- name: main\n  container: {image: 'hangar.local/fixed:1'}\n"}, http.StatusCreated, nil)
			f.CreateRepo("alice", "app", false, map[string]string{".devcontainer.json": `{"image": "hangar.local/app:v1"}`})
			f.CreateRepo("alice", "bare", false, map[string]string{"README.md": "no definition\n"})
			create := func(name, template string, repo map[string]any) (int, []byte) {
				body := map[string]any{"name": name, "agent": "k1", "template": template}
				if repo != nil {
					body["repository"] = repo
				}
				return call(t, re.Env, re.dev, "POST", "/api/v1/workspaces", body)
			}

			// The repository has a definition: it is used, the workspace is the template's.
			var ws sdk.Workspace
			status, body := create("app", "team", map[string]any{"url": f.CloneURL("alice", "app")})
			if status != http.StatusCreated || json.Unmarshal(body, &ws) != nil || ws.Template != "team" || ws.Definition != "devcontainer.json" ||
				ws.Repository == nil || ws.Repository.DefinitionPath != ".devcontainer.json" || len(ws.Warnings) != 0 {
				t.Fatalf("template and a repository with a definition: %d %s", status, body)
			}
			if cfg := re.configOf(t, "app"); !strings.Contains(cfg, "image: hangar.local/app:v1") || strings.Contains(cfg, "fallback") {
				t.Fatalf("the repository's definition is not the config:\n%s", cfg)
			}

			// None: the template's devfile, with the repository as its first project, said so.
			ws = sdk.Workspace{}
			status, body = create("bare", "team", map[string]any{"url": f.CloneURL("alice", "bare")})
			if status != http.StatusCreated || json.Unmarshal(body, &ws) != nil || ws.Template != "team" || ws.Definition != "devfile" ||
				ws.Repository == nil || ws.Repository.DefinitionPath != "" || len(ws.Warnings) == 0 ||
				ws.Warnings[0] != "alice/bare has no devfile or devcontainer.json at its default branch: the template team's devfile is used" {
				t.Fatalf("template and a repository without a definition: %d %s", status, body)
			}
			if cfg := re.configOf(t, "bare"); !strings.Contains(cfg, "image: hangar.local/fallback:1") || !strings.Contains(cfg, f.CloneURL("alice", "bare")) {
				t.Fatalf("the fallback with the repository as its project is not the config:\n%s", cfg)
			}
			// The repository gains a definition: update takes it; it loses it: back to the fallback.
			f.Commit("alice", "bare", "a devfile", map[string]string{"devfile.yaml": "schemaVersion: 2.2.0\ncomponents:\n- name: tools\n  container: {image: 'hangar.local/own:1'}\n"})
			var up sdk.UpdateWorkspaceVersionResponse
			mustCall(t, re.Env, re.dev, "POST", "/api/v1/workspaces/bare/update", map[string]any{}, http.StatusOK, &up)
			if up.Result != "definition" || up.Workspace.Repository == nil || up.Workspace.Repository.DefinitionPath != "devfile.yaml" {
				t.Fatalf("update to the repository's devfile: %+v", up)
			}
			f.Remove("alice", "bare", "no devfile", "devfile.yaml")
			up = sdk.UpdateWorkspaceVersionResponse{}
			mustCall(t, re.Env, re.dev, "POST", "/api/v1/workspaces/bare/update", map[string]any{}, http.StatusOK, &up)
			if up.Result != "definition" || len(up.Workspace.Warnings) == 0 || !strings.Contains(up.Workspace.Warnings[0], "the template team's devfile is used") {
				t.Fatalf("update back to the fallback: %+v", up)
			}
			if cfg := re.configOf(t, "bare"); !strings.Contains(cfg, "image: hangar.local/fallback:1") {
				t.Fatalf("the fallback is not the config after the update:\n%s", cfg)
			}

			// Without a repository: the template's devfile.
			mustCall(t, re.Env, re.dev, "POST", "/api/v1/workspaces", map[string]any{"name": "plain", "agent": "k1", "template": "team"}, http.StatusCreated, nil)
			if cfg := re.configOf(t, "plain"); !strings.Contains(cfg, "image: hangar.local/fallback:1") {
				t.Fatalf("the template without a repository:\n%s", cfg)
			}
			// A template that defines the workspace itself refuses a repository, naming the field.
			status, body = create("fixed", "fixed", map[string]any{"url": f.CloneURL("alice", "app")})
			if e := apiError(t, body); status != http.StatusBadRequest || len(e.Validations) != 1 || e.Validations[0].Field != "repository" ||
				!strings.Contains(e.Validations[0].Detail, `the template "fixed" defines the workspace`) {
				t.Fatalf("a template without definition-from and a repository: %d %s", status, body)
			}
			// A wrong value of the attribute is refused at push.
			status, body = call(t, re.Env, re.AdminToken, "POST", "/api/v1/templates/bad/versions", map[string]any{"kind": "kubernetes",
				"devfile": "schemaVersion: 2.2.0\nattributes: {hangar.dev/definition-from: git}\ncomponents:\n- name: main\n  container: {image: x}\n"})
			if status != http.StatusBadRequest || !strings.Contains(string(body), `hangar.dev/definition-from`) {
				t.Fatalf("a bad definition-from at push: %d %s", status, body)
			}
		})
	}
}
