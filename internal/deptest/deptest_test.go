package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hangar-dev/hangar"

// The domain: the rules and the vocabulary, no I/O. These import nothing of Hangar but each other.
var domain = []string{"internal/errs", "internal/workspace", "internal/build", "internal/lifecycle", "internal/parameter", "internal/prebuild"}

// A rule says which of Hangar's packages a package may depend on (transitively), by listing what
// it allows or what it forbids. Names are relative to the module and match a package and every
// package under it.
type rule struct {
	pkg    string
	why    string
	allow  []string // when not nil: only these (and pkg itself)
	forbid []string
}

var rules = []rule{
	{pkg: "internal/errs", why: "the domain imports nothing of Hangar but the domain", allow: domain},
	{pkg: "internal/workspace", why: "the domain imports nothing of Hangar but the domain", allow: domain},
	{pkg: "internal/build", why: "the domain imports nothing of Hangar but the domain", allow: domain},
	{pkg: "internal/lifecycle", why: "the domain imports nothing of Hangar but the domain", allow: domain},
	{pkg: "internal/parameter", why: "the domain imports nothing of Hangar but the domain", allow: domain},
	{pkg: "internal/prebuild", why: "the domain imports nothing of Hangar but the domain", allow: domain},
	// The reconcile decision decides over the agent's report (protocol) and the domain's entities
	// (workspace.Workspace). It is not in domain itself: it imports protocol, which the domain may not.
	{pkg: "internal/reconcile", why: "the reconcile decision is pure: the domain and the agent's report",
		allow: append([]string{"internal/protocol"}, domain...)},

	// The decisions over a helper's report from inside its workspace: pure, as reconcile's.
	{pkg: "internal/monitor", why: "the monitor's decisions are pure: the domain and the helper's report",
		allow: append([]string{"internal/protocol"}, domain...)},

	// The wire contracts stand alone: any client can take them.
	{pkg: "internal/protocol", why: "the agent's, proxy's and provisioner's protocol is a contract of its own", allow: []string{}},
	{pkg: "internal/sdk", why: "the SDK is the user API's client and types; it shares only protocol's limits", allow: []string{"internal/protocol"}},

	// The server calls the backends' services; it never reaches into what runs a workspace.
	{pkg: "internal/server", why: "the server calls the backends' services, never a backend's internals or a store engine",
		forbid: []string{"internal/agent", "internal/provisioner", "internal/wshelper", "internal/tfprovider", "internal/servercmd",
			"internal/store/sqlite", "internal/store/postgres", "internal/store/sqlstore"}},
	{pkg: "internal/backend", why: "the backends' services are called by the server, not the other way",
		forbid: []string{"internal/server", "internal/servercmd", "internal/agent", "internal/store/sqlite", "internal/store/postgres", "internal/store/sqlstore"}},
	{pkg: "internal/backend/tfbackend", why: "the Terraform service is called by the server, not the other way",
		forbid: []string{"internal/server", "internal/servercmd", "internal/provisioner", "internal/store/sqlite", "internal/store/postgres", "internal/store/sqlstore"}},

	// External auth's decisions and service are called by the server (docs/decisions.md, "Forge
	// identities"); they reach the store through its interface only.
	{pkg: "internal/externalauth", why: "external auth is called by the server, not the other way, and reaches the store through its interface",
		forbid: []string{"internal/server", "internal/servercmd", "internal/cli", "internal/backend", "internal/store/sqlite", "internal/store/postgres", "internal/store/sqlstore"}},

	// The agent and the access proxy speak protocol; the generator and the store are the server's.
	{pkg: "internal/agent", why: "the agent reads protocol's labels and configs, not the generator; it talks to the server over HTTP",
		forbid: []string{"internal/devfile", "internal/server", "internal/store", "internal/backend", "internal/reconcile"}},
	{pkg: "internal/proxy", why: "the access proxy asks the server over HTTP",
		forbid: []string{"internal/devfile", "internal/server", "internal/store", "internal/backend"}},

	// The CLI is a client of the user API.
	{pkg: "internal/cli", why: "the CLI is a client of the user API (sdk)",
		forbid: []string{"internal/server", "internal/store", "internal/backend", "internal/agent", "internal/provisioner"}},
}

// exceptions are dependencies that break a rule today, each with the reason; each must still be
// there (a stale exception fails the test, so that the list only shrinks). None today: the server
// and the CLI imported the terraform runner's package for module packing and inspection until
// those moved to internal/tfmodule.
var exceptions []struct{ pkg, dep, why string }

type pkgInfo struct {
	ImportPath string
	Imports    []string
	Deps       []string
	Standard   bool
}

// listAll is every package of the module with its dependencies, from `go list -deps -json`.
func listAll(t *testing.T) map[string]pkgInfo {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,Deps,Standard", module+"/...")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	all := map[string]pkgInfo{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkgInfo
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		all[p.ImportPath] = p
	}
	return all
}

// rel is an import path relative to the module, or "" for a package of another module.
func rel(path string) string {
	if path == module {
		return "."
	}
	r, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return ""
	}
	return r
}

// under reports whether p is name or a package under it.
func under(p, name string) bool { return p == name || strings.HasPrefix(p, name+"/") }

func matchesAny(p string, names []string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return under(p, n) })
}

// chain is the import chain from from to to (both full import paths), shortest first.
func chain(all map[string]pkgInfo, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var out []string
			for ; p != ""; p = prev[p] {
				out = append([]string{rel(p)}, out...)
			}
			return out
		}
		for _, imp := range all[p].Imports {
			if _, seen := prev[imp]; !seen && rel(imp) != "" {
				prev[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return []string{rel(from), "?", rel(to)}
}

// violations lists each dependency of Hangar that a rule forbids, as "pkg: chain (why)".
func violations(all map[string]pkgInfo) (broken []string, excused map[int]bool) {
	excused = map[int]bool{}
	for path, p := range all {
		r := rel(path)
		if r == "" {
			continue
		}
		for _, ru := range rules {
			if !under(r, ru.pkg) {
				continue
			}
			for _, dep := range p.Deps {
				d := rel(dep)
				if d == "" || under(d, ru.pkg) {
					continue
				}
				bad := (ru.allow != nil && !matchesAny(d, ru.allow)) || matchesAny(d, ru.forbid)
				if !bad {
					continue
				}
				if i := slices.IndexFunc(exceptions, func(e struct{ pkg, dep, why string }) bool { return under(r, e.pkg) && d == e.dep }); i >= 0 {
					excused[i] = true
					continue
				}
				broken = append(broken, fmt.Sprintf("%s depends on %s: %s\n\t(rule for %s: %s)", r, d, strings.Join(chain(all, path, dep), " → "), ru.pkg, ru.why))
			}
		}
	}
	slices.Sort(broken)
	return broken, excused
}

// TestImportRules enforces the rules above over every package of the module.
func TestImportRules(t *testing.T) {
	all := listAll(t)
	for _, ru := range rules {
		if _, ok := all[module+"/"+ru.pkg]; !ok {
			t.Errorf("rule for %s: no such package (renamed? update the rule)", ru.pkg)
		}
	}
	broken, excused := violations(all)
	for _, b := range broken {
		t.Error(b)
	}
	for i, e := range exceptions {
		if !excused[i] {
			t.Errorf("exception %s → %s is no longer needed (%s): remove it", e.pkg, e.dep, e.why)
		}
	}
}

// TestRulesCatchABadImport: the rules see a dependency that breaks them, with its chain (a fake
// graph in which reconcile imports the store, and the domain reaches both through reconcile).
func TestRulesCatchABadImport(t *testing.T) {
	p := func(r string) string { return module + "/" + r }
	all := map[string]pkgInfo{
		p("internal/errs"):      {ImportPath: p("internal/errs")},
		p("internal/workspace"): {ImportPath: p("internal/workspace"), Imports: []string{p("internal/errs")}, Deps: []string{p("internal/errs")}},
		p("internal/store"): {ImportPath: p("internal/store"), Imports: []string{p("internal/workspace")},
			Deps: []string{p("internal/errs"), p("internal/workspace")}},
		p("internal/reconcile"): {ImportPath: p("internal/reconcile"), Imports: []string{p("internal/store")},
			Deps: []string{p("internal/errs"), p("internal/store"), p("internal/workspace")}},
		p("internal/lifecycle"): {ImportPath: p("internal/lifecycle"), Imports: []string{p("internal/workspace"), p("internal/reconcile"), "time"},
			Deps: []string{p("internal/errs"), p("internal/reconcile"), p("internal/store"), p("internal/workspace"), "time"}},
	}
	broken, _ := violations(all)
	want := []string{
		"internal/lifecycle depends on internal/reconcile: internal/lifecycle → internal/reconcile\n",
		"internal/lifecycle depends on internal/store: internal/lifecycle → internal/reconcile → internal/store\n",
		"internal/reconcile depends on internal/store: internal/reconcile → internal/store\n",
	}
	if len(broken) != len(want) {
		t.Fatalf("violations = %q, want %d", broken, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(broken[i], w) {
			t.Errorf("violation %d = %q, want it to start %q", i, broken[i], w)
		}
	}
}
