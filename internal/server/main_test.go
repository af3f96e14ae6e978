package server_test

import (
	"os"
	"testing"

	"github.com/hangar-dev/hangar/internal/wshelper"
)

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "git-known-hosts" {
		// The workspace helper of TestGitCloneOverSSHWithTheHelpersAgent points git's ssh at its
		// own binary, this one, as its KnownHostsCommand (`hangar git-known-hosts SOCKET` in a
		// workspace).
		wshelper.GitKnownHostsMain(os.Args[2], os.Stdout, os.Stderr)
		return
	}
	os.Exit(m.Run())
}
