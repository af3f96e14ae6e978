package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// flagLine is one line of a help's flag list: the flag and what follows it up to the help text.
// pflag puts one space between the flag and its placeholder, and at least two before the help.
var flagLine = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9-]+)(?: (\S+))?\s{2,}\S`)

// placeholderOK: an upper-case word (FILE, URL, KEY=VALUE, HOST:PORT) or one of pflag's kind names.
var placeholderOK = regexp.MustCompile(`^(?:[A-Z][A-Z0-9_]*(?:[=:][A-Z][A-Z0-9_]*)?|string|strings|stringArray|int|duration)$`)

// Every command's --help, hidden ones included, names each flag's value with a placeholder that
// reads as one (--token-file FILE), never with a fragment of its help text: pflag takes the first
// backquoted word of a flag's help for the placeholder, which once made `hangar agent --help` show
// "--token-file hangar agents create".
func TestHelpPlaceholders(t *testing.T) {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(rootCommand(), nil)
	if len(paths) < 40 {
		t.Fatalf("walked only %d commands", len(paths))
	}

	flags := 0
	helps := map[string]string{}
	for _, path := range paths {
		var out bytes.Buffer
		root := rootCommand()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(append([]string(nil), path...), "--help"))
		if err := root.Execute(); err != nil {
			t.Fatalf("hangar %s --help: %v", strings.Join(path, " "), err)
		}
		name := strings.TrimSpace("hangar " + strings.Join(path, " "))
		helps[name] = out.String()
		for _, line := range strings.Split(out.String(), "\n") {
			m := flagLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			flags++
			if m[2] != "" && !placeholderOK.MatchString(m[2]) {
				t.Errorf("%s --help: --%s has the placeholder %q:\n%s", name, m[1], m[2], line)
			}
		}
	}
	if flags < 100 {
		t.Fatalf("found only %d flag lines: the pattern no longer matches the help's layout", flags)
	}

	// --url and --token are listed the same way everywhere: under Flags of each command that talks
	// to a server, never under Global Flags, and never under the daemons' help.
	withURL := 0
	for name, help := range helps {
		local, global, _ := strings.Cut(help, "\nGlobal Flags:\n")
		if strings.Contains(global, "--url URL") || strings.Contains(global, "--token TOKEN") {
			t.Errorf("%s --help lists --url or --token under Global Flags:\n%s", name, help)
		}
		if strings.Contains(local, "--url URL") {
			withURL++
		}
	}
	if withURL < 40 {
		t.Errorf("only %d commands' help lists --url URL under Flags", withURL)
	}
	for _, daemon := range []string{"hangar server", "hangar agent", "hangar provisioner", "hangar proxy"} {
		if strings.Contains(helps[daemon], "--url URL") {
			t.Errorf("%s --help offers the client's --url:\n%s", daemon, helps[daemon])
		}
	}

	// The lines this test was written for, and the kinds typed options show.
	for cmd, want := range map[string][]string{
		"hangar agent":         {"--token-file FILE ", "--config FILE ", "--kube-qps int ", "(printed by hangar agents create)"},
		"hangar proxy":         {"--token-file FILE ", "--auth-cache-ttl duration ", "--max-body-bytes int "},
		"hangar provisioner":   {"--token-file FILE ", "--terraform PATH ", "(printed by hangar provisioners create)"},
		"hangar server":        {"--build-heartbeat-timeout duration ", "--provisioners int ", "--oidc-scopes strings ", "--config FILE ", "--listen ADDR "},
		"hangar agents create": {"--config FILE "},
	} {
		for _, w := range want {
			if !strings.Contains(helps[cmd], w) {
				t.Errorf("%s --help lacks %q:\n%s", cmd, w, helps[cmd])
			}
		}
	}
}

var updateHelp = flag.Bool("update", false, "rewrite testdata/help/hangar.golden")

// `hangar --help` lists the client commands by what a user does, and the server and its daemons
// apart (not mixed in with them); with -update it rewrites the golden file.
func TestRootHelp(t *testing.T) {
	var out bytes.Buffer
	root := rootCommand()
	root.SetOut(&out)
	root.SetArgs([]string{"--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "help", "hangar.golden")
	if *updateHelp {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("hangar --help:\n%s\nwant (%s; -update rewrites it):\n%s", out.String(), path, want)
	}
}
