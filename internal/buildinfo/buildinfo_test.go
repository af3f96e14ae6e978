package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFrom(t *testing.T) {
	vcs := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/hangar-dev/hangar", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-11-20T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	platform := "platform: " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	for _, tc := range []struct {
		name                  string
		version, commit, date string
		bi                    *debug.BuildInfo
		ok                    bool
		want                  string
	}{
		{name: "stamped by scripts/release", version: "v1.2.3", commit: "0123456789abcdef", date: "2026-11-26T07:00:00Z", bi: vcs, ok: true,
			want: "hangar v1.2.3\ncommit:   0123456789abcdef\nbuilt:    2026-11-26T07:00:00Z\ngo:       go1.26.8\n" + platform},
		{name: "go build in a clone: the toolchain's VCS info", bi: vcs, ok: true,
			want: "hangar devel\ncommit:   abc123 (with uncommitted changes)\nbuilt:    unknown (committed 2026-11-20T10:00:00Z)\ngo:       go1.26.8\n" + platform},
		{name: "go install of a module version", bi: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}}, ok: true,
			want: "hangar v1.4.0\ncommit:   unknown (not stamped by scripts/release; no VCS information recorded)\nbuilt:    unknown\ngo:       go1.26.8\n" + platform},
		{name: "no build info at all", ok: false,
			want: "hangar devel\ncommit:   unknown (not stamped by scripts/release; no VCS information recorded)\nbuilt:    unknown\ngo:       " + runtime.Version() + "\n" + platform},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := from(tc.version, tc.commit, tc.date, tc.bi, tc.ok)
			if got.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			if got.Stamped != (tc.version != "") {
				t.Errorf("Stamped = %v", got.Stamped)
			}
		})
	}
}

// The test binary itself is not stamped: Read falls back to the toolchain's information.
func TestReadUnstamped(t *testing.T) {
	in := Read()
	if in.Stamped || in.Version == "" || !strings.HasPrefix(in.GoVersion, "go") || in.OS != runtime.GOOS || in.Arch != runtime.GOARCH {
		t.Errorf("Read() = %+v", in)
	}
}
