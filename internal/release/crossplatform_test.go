package release

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/crosscheck"
)

// TestCrossPlatformTypeCheck: hangar's command, the one binary scripts/release ships, type-checks
// for every release target but the native one (which the tests build) from source, with the files
// each target's build would choose. This is what CI runs instead of five cold cross builds: it
// catches a Unix-only call in a file built on Windows or macOS (unix.Setns and syscall.Kill are the
// two such breaks hangar has had; internal/crosscheck's test shows they are caught) in about 10 s
// a target, where a cold build costs about 150 s. The builds themselves run in the release job,
// scripts/release-check.
func TestCrossPlatformTypeCheck(t *testing.T) {
	for _, tg := range []crosscheck.Target{{OS: "linux", Arch: "arm64"}, {OS: "darwin", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"}, {OS: "windows", Arch: "amd64"}, {OS: "windows", Arch: "arm64"}} {
		t.Run(tg.OS+"-"+tg.Arch, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			problems, err := crosscheck.Check(context.Background(), "../..", tg, "./cmd/hangar")
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) > 0 {
				t.Errorf("./cmd/hangar does not compile for %s (put the code that needs Unix behind a unix build tag, with a counterpart: docs/decisions.md, \"Release binaries\"):\n%s",
					tg, strings.Join(problems, "\n"))
			}
			t.Logf("%s type-checked in %v", tg, time.Since(start).Round(100*time.Millisecond))
		})
	}
}
