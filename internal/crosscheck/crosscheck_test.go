package crosscheck

import (
	"context"
	"strings"
	"testing"
)

// TestCheckFindsUnixOnlyCalls: the two breaks hangar's cross builds have had, unix.Setns and
// syscall.Kill in a file built on Windows (testdata/unixonly), are reported for windows with their
// file and line, and not for linux; the same call behind a unix build tag with a counterpart
// (testdata/split) passes everywhere.
func TestCheckFindsUnixOnlyCalls(t *testing.T) {
	ctx := context.Background()
	const unixonly = "./internal/crosscheck/testdata/unixonly"
	for _, tg := range []Target{{"windows", "amd64"}, {"windows", "arm64"}} {
		got, err := Check(ctx, "../..", tg, unixonly)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			"internal/crosscheck/testdata/unixonly/unixonly.go:13:", "undefined: unix.Setns",
			"internal/crosscheck/testdata/unixonly/unixonly.go:16:", "undefined: syscall.Kill",
		}
		all := strings.Join(got, "\n")
		for _, w := range want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: the problems lack %q:\n%s", tg, w, all)
			}
		}
	}
	for _, tg := range []Target{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "arm64"}} {
		got, err := Check(ctx, "../..", tg, unixonly)
		if err != nil {
			t.Fatal(err)
		}
		if tg.OS == "linux" && len(got) != 0 {
			t.Errorf("%s: want no problem, got:\n%s", tg, strings.Join(got, "\n"))
		}
		if all := strings.Join(got, "\n"); tg.OS == "darwin" && (!strings.Contains(all, "undefined: unix.Setns") || strings.Contains(all, "syscall.Kill")) {
			t.Errorf("%s: want only unix.Setns (macOS has kill but no setns), got:\n%s", tg, strings.Join(got, "\n"))
		}
	}
	for _, tg := range []Target{{"linux", "amd64"}, {"darwin", "amd64"}, {"windows", "amd64"}} {
		got, err := Check(ctx, "../..", tg, "./internal/crosscheck/testdata/split")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 0 {
			t.Errorf("split, %s: want no problem, got:\n%s", tg, strings.Join(got, "\n"))
		}
	}
}

// TestCheckReportsMissingPackage: a pattern that names nothing, or an import of a package that does
// not exist, is a problem, not a silent pass.
func TestCheckReportsMissingPackage(t *testing.T) {
	got, err := Check(context.Background(), "../..", Target{"windows", "amd64"}, "./internal/crosscheck/testdata/nosuchpackage")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), "nosuchpackage") {
		t.Errorf("want a problem naming the missing package, got %q", got)
	}
}
