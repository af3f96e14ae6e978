package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/devfile"
	"github.com/hangar-dev/hangar/internal/sdk"
	"github.com/hangar-dev/hangar/internal/testutil/forgetest"
	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

// TestTeamRepositoryWorkspace: issue 22 end to end, through the CLI, on the real node, against the
// test forge (a Gitea to Hangar: its OAuth2 and API on loopback for the server, its git inside the
// cluster's namespace for the pods). alice links her account with `hangar external-auth link`
// (the test does the browser's part), sets her profile (name, email, a private dotfiles
// repository), creates a workspace from her private repository described by a devcontainer.json
// (postCreateCommand ran, containerEnv set, her dotfiles installed), pulls and pushes there as
// herself (authenticated as alice at the forge; the commit's author her profile's); the forge's access tokens live 3 s, so the server refreshes them while git works. bob
// links his own account and can neither create a workspace from alice's repository nor read it
// from his own workspace, and the forge never sees alice's token used by him. alice's repository
// is also cloned at a workspace's start over SSH with her git SSH key, and pulled there over SSH.
// Once alice unlinks,
// git in her running workspace is refused within seconds with the server's words.
func TestTeamRepositoryWorkspace(t *testing.T) {
	parallel(t)
	e, forge := setUpWithForge(t, 3*time.Second)
	e.cluster.LoadWorkspaceGitImage(t)
	loadEditor(t, e.cluster) // a devcontainer workspace has the web editor
	forge.AddUser(forgetest.User{Login: "alice", FullName: "Alice Liddell", Email: "alice@example.com"})
	forge.AddUser(forgetest.User{Login: "bob", FullName: "Bob", Email: "bob@example.com"})

	aliceToken, aliceAPI := e.user(t, "alice")
	bobToken, bobAPI := e.user(t, "bob")
	au := cliUser{url: e.srv.URL, token: aliceToken, home: t.TempDir()}
	bu := cliUser{url: e.srv.URL, token: bobToken, home: t.TempDir()}
	must := func(u cliUser, args ...string) string { t.Helper(); return u.must(t, args...) }
	// ssh runs script in the workspace, waiting for the proxy to reach it (255) for a while.
	ssh := func(u cliUser, ws, script string) (string, string, int) {
		t.Helper()
		return sshWhenReachable(t, u, ws, script)
	}
	mustSSH := func(u cliUser, ws, script string) string {
		t.Helper()
		out, errOut, code := ssh(u, ws, script)
		if code != 0 {
			t.Fatalf("hangar ssh %s -- %s: exit %d\nstdout %s\nstderr %s", ws, script, code, out, errOut)
		}
		return out
	}
	// A test that fails leaves no namespace behind for the next.
	cleanUp := func(c *sdk.Client, ws string) {
		w, err := c.Workspace(context.Background(), ws)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				_ = e.cluster.Client.CoreV1().Namespaces().Delete(context.Background(), w.Namespace, metav1.DeleteOptions{})
			}
		})
	}

	// 2. alice links her account through the CLI; the test is her browser.
	link(t, e.srv.URL, forge, au, aliceToken, "alice")

	// 7. Her profile: a git identity and a private dotfiles repository at the forge.
	forge.CreateRepo("alice", "dotfiles", true, map[string]string{"install.sh": "#!/bin/sh\necho \"installed by $(id -u)\" > \"$HOME/dotfiles-marker\"\n"})
	must(au, "profile", "set", "--name", "Alice Liddell", "--email", "alice@example.com", "--dotfiles-repo", forge.InsideHTTPURL()+"/alice/dotfiles.git")

	// 3. Her private repository, described by a devcontainer.json.
	dc := `// the team's environment
{
	"name": "app",
	"image": "` + kubetest.WorkspaceGitImage + `",
	"containerEnv": {"TEAM_ENV": "from-container"},
	"postCreateCommand": "echo \"created $TEAM_ENV in ${containerWorkspaceFolder}\" > /workspaces/created.txt",
}
`
	head := forge.CreateRepo("alice", "app", true, map[string]string{".devcontainer/devcontainer.json": dc, "README.md": "app\n"})
	appURL := forge.InsideHTTPURL() + "/alice/app.git"
	begin := time.Now()
	must(au, "create", "app", "--agent", e.agent, "--repo", appURL+"#main", "--wait")
	devcontainerTime := time.Since(begin)
	cleanUp(aliceAPI, "app")
	if out := mustSSH(au, "app", `cat /workspaces/created.txt; echo "$TEAM_ENV"; git -C /workspaces/app rev-parse HEAD`); out != "created from-container in /workspaces/app\nfrom-container\n"+head+"\n" {
		t.Fatalf("the postCreate file, containerEnv and the clone's HEAD: %q, want the file, the variable and %s", out, head)
	}

	// Her dotfiles, cloned with her credentials, installed at the first start.
	kubetest.Eventually(t, 2*time.Minute, "alice's dotfiles to be installed", func(context.Context) error {
		if out, errOut, code := ssh(au, "app", `cat "$HOME/dotfiles-marker"`); code != 0 || out != "installed by 5001\n" {
			return fmt.Errorf("the marker: exit %d %q %q", code, out, errOut)
		}
		return nil
	})
	if !slices.ContainsFunc(forge.GitAccesses(), func(a forgetest.GitAccess) bool {
		return a.Repo == "alice/dotfiles" && a.User == "alice" && a.Status == http.StatusOK
	}) {
		t.Fatalf("the forge never served alice/dotfiles to alice: %+v", forge.GitAccesses())
	}
	// hangar show says so: the helper reported the install to the server (through the relay, with
	// its token), and where the definition came from.
	kubetest.Eventually(t, time.Minute, "hangar show to say the dotfiles are installed", func(context.Context) error {
		out := must(au, "show", "app")
		if want := "installed (" + forge.InsideHTTPURL() + "/alice/dotfiles.git, with install.sh)"; !strings.Contains(out, want) {
			return fmt.Errorf("hangar show app lacks %q:\n%s", want, out)
		}
		return nil
	})
	if out := must(au, "show", "app"); !strings.Contains(out, "Definition:          .devcontainer/devcontainer.json at commit "+head+"\n") ||
		!strings.Contains(out, "Repository:          "+appURL+" at main\n") {
		t.Fatalf("hangar show app does not say the repository and the commit %s:\n%s", head, out)
	}
	// hangar update: the branch's newest definition becomes the running workspace's; the agent
	// rolls the pod onto it, the data volume (the clone, postCreate's file) kept.
	updated := forge.Commit("alice", "app", "another environment", map[string]string{".devcontainer/devcontainer.json": strings.Replace(dc, "from-container", "from-update", 1)})
	must(au, "update", "app", "--wait")
	kubetest.Eventually(t, 3*time.Minute, "the workspace to run the updated definition", func(context.Context) error {
		if out, errOut, code := ssh(au, "app", `echo "$TEAM_ENV"; cat /workspaces/created.txt`); code != 0 || out != "from-update\ncreated from-container in /workspaces/app\n" {
			return fmt.Errorf("exit %d %q %q", code, out, errOut)
		}
		return nil
	})
	if out := must(au, "show", "app"); !strings.Contains(out, "Definition:          .devcontainer/devcontainer.json at commit "+updated+"\n") {
		t.Fatalf("hangar show app after the update does not say the commit %s:\n%s", updated, out)
	}

	// git pull gets a commit made at the forge since the clone.
	second := forge.Commit("alice", "app", "from the forge", map[string]string{"NEWS.md": "news\n"})
	mustSSH(au, "app", "git -C /workspaces/app pull -q")
	if out := mustSSH(au, "app", "git -C /workspaces/app rev-parse HEAD; cat /workspaces/app/NEWS.md"); out != second+"\nnews\n" {
		t.Fatalf("after git pull: %q, want %s and NEWS.md", out, second)
	}
	// A commit pushed as alice, its author and committer her profile's.
	mustSSH(au, "app", `cd /workspaces/app && echo pushed > from-workspace.txt && git add from-workspace.txt &&
git commit -q -m 'from the workspace' && git push -q origin HEAD:main`)
	pushed, identity, _ := strings.Cut(strings.TrimSpace(mustSSH(au, "app", "git -C /workspaces/app log -1 --format='%H %an <%ae>|%cn <%ce>'")), " ")
	if identity != "Alice Liddell <alice@example.com>|Alice Liddell <alice@example.com>" {
		t.Fatalf("the pushed commit's author|committer: %q, want alice's profile", identity)
	}
	if got := forge.Head("alice", "app"); got != pushed || got == second {
		t.Fatalf("the forge's main is %s after the push, want the workspace's %s", got, pushed)
	}
	if got := forge.ReadFile("alice", "app", "from-workspace.txt"); got != "pushed\n" {
		t.Fatalf("the pushed file at the forge: %q", got)
	}
	var pushedAs []string
	for _, a := range forge.GitAccesses() {
		if a.Repo == "alice/app" && a.Write && a.Status == http.StatusOK {
			pushedAs = append(pushedAs, a.User)
		}
	}
	if len(pushedAs) == 0 || strings.Join(pushedAs, ",") != strings.Repeat("alice,", len(pushedAs)-1)+"alice" {
		t.Fatalf("the forge's pushes to alice/app were by %q, want alice's", pushedAs)
	}

	// 4. Access tokens live 3 s: the server refreshed alice's, and git works after that.
	refreshes := func() int {
		n := 0
		for _, r := range forge.TokenRequests() {
			if r.GrantType == "refresh_token" && r.Status == http.StatusOK && r.User == "alice" {
				n++
			}
		}
		return n
	}
	before := refreshes()
	if before == 0 {
		t.Fatalf("no refresh_token grant for alice in %+v", forge.TokenRequests())
	}
	// Each token lives less than the server's refresh margin: each git operation refreshes it.
	mustSSH(au, "app", "git -C /workspaces/app pull -q && git -C /workspaces/app ls-remote origin refs/heads/main")
	if refreshes() <= before {
		t.Fatalf("no refresh after the token expired: %+v", forge.TokenRequests())
	}

	// The same repository over SSH: alice adds her git SSH key (`hangar gitssh`) to the forge; the
	// clone at the start signs with it through the server, the forge's host key checked against
	// the forge's ssh_known_hosts.
	keyLine, _, _ := strings.Cut(must(au, "gitssh"), "\n")
	forge.AddSSHKey("alice", keyLine)
	sshURL := "ssh://git@" + forge.InsideSSHAddr() + "/alice/app.git"
	viaSSH := func() int {
		n := 0
		for _, a := range forge.GitAccesses() {
			if a.Transport == "ssh" && a.User == "alice" && a.Repo == "alice/app" && a.Status == http.StatusOK {
				n++
			}
		}
		return n
	}
	begin = time.Now()
	must(au, "create", "app-ssh", "--agent", e.agent, "--repo", sshURL, "--wait")
	sshDevcontainerTime := time.Since(begin)
	cleanUp(aliceAPI, "app-ssh")
	if out := mustSSH(au, "app-ssh", "git -C /workspaces/app rev-parse HEAD; git -C /workspaces/app remote get-url origin"); out != forge.Head("alice", "app")+"\n"+sshURL+"\n" {
		t.Fatalf("the SSH clone's HEAD and origin: %q, want %s and %s", out, forge.Head("alice", "app"), sshURL)
	}
	cloned := viaSSH()
	if cloned == 0 {
		t.Fatalf("the forge never served alice/app to alice over SSH: %+v", forge.GitAccesses())
	}
	// git in that workspace over SSH too: the helper's agent signs, and ssh checks the forge's key
	// against the same known hosts (no prompt, no ~/.ssh in the workspace).
	second = forge.Commit("alice", "app", "for the SSH workspace", map[string]string{"SSH.md": "over ssh\n"})
	if out := mustSSH(au, "app-ssh", "git -C /workspaces/app pull -q && git -C /workspaces/app rev-parse HEAD"); out != second+"\n" || viaSSH() <= cloned {
		t.Fatalf("git pull over SSH in the workspace: %q, want %s (alice's SSH accesses %d -> %d)", out, second, cloned, viaSSH())
	}

	// 5. bob links his own account; alice's repository stays hers.
	link(t, e.srv.URL, forge, bu, bobToken, "bob")
	out, errOut, code := bu.run(t, "create", "stolen", "--agent", e.agent, "--repo", appURL+"#main")
	if code == 0 || !strings.Contains(errOut, "Forge refused to read alice/app with your linked account (HTTP 404): it is private") {
		t.Fatalf("bob creating a workspace from alice's private repository: exit %d, want refused naming the forge\n%s%s", code, out, errOut)
	}
	t.Logf("bob's create from alice's repository: %s", strings.TrimSpace(errOut))
	forge.CreateRepo("bob", "tools", true, map[string]string{".devcontainer.json": `{"image": "` + kubetest.WorkspaceGitImage + `"}`})
	begin = time.Now()
	must(bu, "create", "tools", "--agent", e.agent, "--repo", forge.InsideHTTPURL()+"/bob/tools.git", "--wait")
	secondDevcontainerTime := time.Since(begin)
	cleanUp(bobAPI, "tools")
	aliceUses := func() int {
		n := 0
		for _, a := range forge.GitAccesses() {
			if a.User == "alice" {
				n++
			}
		}
		return n
	}
	aliceBefore := aliceUses()
	if out, errOut, code := ssh(bu, "tools", "git ls-remote "+appURL); code == 0 || strings.Contains(out, "refs/heads/main") {
		t.Fatalf("bob's ls-remote of alice's repository: exit %d stdout %q stderr %q", code, out, errOut)
	}
	if out := mustSSH(bu, "tools", "git -C /workspaces/tools ls-remote origin"); !strings.Contains(out, "refs/heads/main") {
		t.Fatalf("bob's own repository from his workspace: %q", out)
	}
	var bobOnApp []string
	for _, a := range forge.GitAccesses() {
		if a.Repo == "alice/app" && a.User == "bob" {
			bobOnApp = append(bobOnApp, fmt.Sprint(a.Status))
		}
	}
	if aliceUses() != aliceBefore || len(bobOnApp) == 0 || strings.Contains(strings.Join(bobOnApp, ","), "200") {
		t.Fatalf("while bob's workspace read alice/app, alice's accesses went %d -> %d; bob's answers %v (want refused as bob, never alice's token)",
			aliceBefore, aliceUses(), bobOnApp)
	}

	// 6. alice unlinks: git in her running workspace is refused within seconds, saying to link.
	if out := must(au, "external-auth", "unlink", "forge"); !strings.Contains(out, "Unlinked forge") {
		t.Fatalf("unlink: %q", out)
	}
	unlinked := time.Now()
	kubetest.Eventually(t, 10*time.Second, "git pull to be refused after the unlink", func(context.Context) error {
		out, errOut, code := ssh(au, "app", "git -C /workspaces/app pull")
		if code == 0 {
			return fmt.Errorf("git pull still works: %q %q", out, errOut)
		}
		if !strings.Contains(errOut, "hangar external-auth link forge") {
			return fmt.Errorf("git pull: exit %d, stderr %q lacks the server's message", code, errOut)
		}
		return nil
	})
	_, refusal, _ := ssh(au, "app", "git -C /workspaces/app pull")
	t.Logf("git refused %v after the unlink: %s", time.Since(unlinked).Round(time.Millisecond), strings.TrimSpace(refusal))

	// 8. The same through the UI in Chromium: carol, on the pages alone.
	cu := teamRepositoryInBrowser(t, e, forge, ssh)

	// The time to Running of a devfile workspace from a repository with the same image, for
	// docs/benchmarks.md (the devcontainer one was measured above).
	forge.CreateRepo("bob", "plain", false, map[string]string{".devfile.yaml": `schemaVersion: 2.2.0
components:
  - name: dev
    container:
      image: ` + kubetest.WorkspaceGitImage + "\n"})
	begin = time.Now()
	must(bu, "create", "plain", "--agent", e.agent, "--repo", forge.InsideHTTPURL()+"/bob/plain.git", "--wait")
	devfileTime := time.Since(begin)
	cleanUp(bobAPI, "plain")
	// The same devfile asking for the web editor, as a devcontainer.json's translation does.
	forge.CreateRepo("bob", "edited", false, map[string]string{".devfile.yaml": `schemaVersion: 2.2.0
components:
  - name: dev
    attributes: {` + devfile.EditorAttribute + `: ` + devfile.EditorCodeServer + `}
    container:
      image: ` + kubetest.WorkspaceGitImage + "\n"})
	begin = time.Now()
	must(bu, "create", "edited", "--agent", e.agent, "--repo", forge.InsideHTTPURL()+"/bob/edited.git", "--wait")
	editorDevfileTime := time.Since(begin)
	cleanUp(bobAPI, "edited")
	t.Logf("create --repo to Running: devcontainer.json %v (the node's first workspace) and %v, the first over SSH %v, devfile %v, devfile with the web editor %v",
		devcontainerTime.Round(time.Millisecond), secondDevcontainerTime.Round(time.Millisecond), sshDevcontainerTime.Round(time.Millisecond),
		devfileTime.Round(time.Millisecond), editorDevfileTime.Round(time.Millisecond))
	for _, w := range []struct {
		u    cliUser
		name string
	}{{au, "app"}, {au, "app-ssh"}, {bu, "tools"}, {bu, "plain"}, {bu, "edited"}, {cu, "site"}} {
		must(w.u, "delete", w.name, "--yes", "--wait")
	}
}

// link links user's account at the forge as login through `hangar external-auth link forge`,
// doing its browser's part: signed in to Hangar with token, the forge's consent as login, the
// callback. The command must then say it linked.
func link(t *testing.T, serverURL string, forge *forgetest.Forge, u cliUser, token, login string) {
	t.Helper()
	cmd := u.cmd("external-auth", "link", "forge", "--timeout", "2m")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	r := bufio.NewReader(stdout)
	var printed strings.Builder
	var authURL string
	for authURL == "" {
		line, err := r.ReadString('\n')
		printed.WriteString(line)
		if err != nil {
			t.Fatalf("hangar external-auth link printed no URL: %q (%v) %s", printed.String(), err, errOut.String())
		}
		if s := strings.TrimSpace(line); strings.HasPrefix(s, "http") {
			authURL = s
		}
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := browser.PostForm(serverURL+"/signin", url.Values{"token": {token}, "return_to": {"/ui/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in as %s: %s", login, resp.Status)
	}
	back, err := forge.Approve(browser, authURL, login)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = browser.Get(back.String())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the callback: %s %s", resp.Status, page)
	}
	rest, _ := io.ReadAll(r)
	printed.Write(rest)
	if err := cmd.Wait(); err != nil || !strings.Contains(printed.String(), "Linked Forge as "+login+".") {
		t.Fatalf("hangar external-auth link forge: %v\n%s%s", err, printed.String(), errOut.String())
	}
}

// setUpWithForge is setUpProxyWith and a test forge (forgetest: OAuth2 and API on loopback for the
// server, git inside the cluster's namespace for the pods) configured as the server's forge "forge"
// (client "hangar", secret "forge-secret"), its access tokens living tokenLifetime.
func setUpWithForge(t *testing.T, tokenLifetime time.Duration) (*proxyEnv, *forgetest.Forge) {
	t.Helper()
	var forge *forgetest.Forge
	e := setUpProxyWith(t, func(c *kubetest.Cluster, relayURL string) []string {
		forge = forgetest.New(t, forgetest.Options{ListenInside: c.ListenInside, InsideHost: kubetest.NodeIP, AccessTokenLifetime: tokenLifetime})
		return append(forgeServerArgs(t, forge), "--helper-url", relayURL)
	})
	forge.AddClient("hangar", "forge-secret", []string{e.srv.URL + "/external-auth/forge/callback"})
	return e, forge
}

// sshWhenReachable runs script in the workspace ws with `hangar ssh` as u, waiting (30 s at most)
// while the proxy cannot reach it yet (exit 255), and returns its stdout, stderr and exit status.
func sshWhenReachable(t *testing.T, u cliUser, ws, script string) (string, string, int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, errOut, code := u.run(t, "ssh", ws, "--", script)
		if code != 255 || time.Now().After(deadline) {
			return out, errOut, code
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// forgeServerArgs writes the server's forge configuration for forge ("forge", a gitea; client
// "hangar", secret "forge-secret"; its inside HTTP and SSH hosts, the SSH host key known) and a
// sealing key, and returns the server's flags that read them.
func forgeServerArgs(t *testing.T, forge *forgetest.Forge) []string {
	t.Helper()
	dir := t.TempDir()
	secret, keyFile, cfgFile := filepath.Join(dir, "client-secret"), filepath.Join(dir, "key"), filepath.Join(dir, "forges.yaml")
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	forgeWriteFile(t, secret, "forge-secret\n", 0o600)
	forgeWriteFile(t, keyFile, base64.StdEncoding.EncodeToString(key)+"\n", 0o600)
	// The users' repository URLs are the inside ones (the workspaces clone them); the server
	// reads the forge's API and OAuth2 at its loopback URL.
	forgeWriteFile(t, cfgFile, fmt.Sprintf(`providers:
  - id: forge
    name: Forge
    type: gitea
    client_id: hangar
    client_secret_file: %s
    base_url: %s
    allow_http_hosts: true
    hosts: [%q, %q]
    ssh_known_hosts: %q
`, secret, forge.HTTPURL(), forge.InsideHTTPURL(), "ssh://"+forge.InsideSSHAddr(), forge.KnownHosts()), 0o600)
	return []string{"--external-auth-config", cfgFile, "--external-auth-key-file", keyFile}
}
