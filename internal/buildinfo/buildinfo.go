// Package buildinfo says which build of hangar is running: the version, commit and date a release
// build stamps (scripts/release, with -ldflags -X), else what the Go toolchain recorded (the
// module's version and the VCS commit of `go build` in a clone), plus the Go version and the
// platform.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Stamped by scripts/release:
//
//	-ldflags "-X github.com/hangar-dev/hangar/internal/buildinfo.version=v1.2.3
//	          -X github.com/hangar-dev/hangar/internal/buildinfo.commit=<sha>
//	          -X github.com/hangar-dev/hangar/internal/buildinfo.date=<RFC 3339>"
var version, commit, date string

// Info describes one build.
type Info struct {
	Version string `json:"version"` // v1.2.3, or "devel"
	Commit  string `json:"commit,omitempty"`
	// Modified: the commit's tree had uncommitted changes (known only from the toolchain's VCS info).
	Modified bool `json:"modified,omitempty"`
	// Date is when the binary was built (stamped), or else when its commit was made (VCS info);
	// DateIsCommit says which.
	Date         string `json:"date,omitempty"`
	DateIsCommit bool   `json:"date_is_commit,omitempty"`
	GoVersion    string `json:"go_version"`
	OS           string `json:"os"`
	Arch         string `json:"arch"`
	// Stamped says the version, commit and date came from a release build's stamp.
	Stamped bool `json:"stamped"`
}

// Read returns this binary's build.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	return from(version, commit, date, bi, ok)
}

// from is Read for given stamps and build info: the stamp wins, field by field; the toolchain's
// build info fills what it leaves empty.
func from(version, commit, date string, bi *debug.BuildInfo, ok bool) Info {
	in := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		Stamped: version != "" || commit != "" || date != ""}
	if ok && bi != nil {
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if in.Commit == "" {
			in.Commit = settings["vcs.revision"]
			in.Modified = in.Commit != "" && settings["vcs.modified"] == "true"
		}
		if in.Date == "" && settings["vcs.time"] != "" {
			in.Date, in.DateIsCommit = settings["vcs.time"], true
		}
	}
	if in.Version == "" {
		in.Version = "devel"
	}
	return in
}

// String is what `hangar version` prints: one field a line.
func (in Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "hangar %s\n", in.Version)
	switch {
	case in.Commit == "":
		b.WriteString("commit:   unknown (not stamped by scripts/release; no VCS information recorded)\n")
	case in.Modified:
		fmt.Fprintf(&b, "commit:   %s (with uncommitted changes)\n", in.Commit)
	default:
		fmt.Fprintf(&b, "commit:   %s\n", in.Commit)
	}
	switch {
	case in.Date == "":
		b.WriteString("built:    unknown\n")
	case in.DateIsCommit:
		fmt.Fprintf(&b, "built:    unknown (committed %s)\n", in.Date)
	default:
		fmt.Fprintf(&b, "built:    %s\n", in.Date)
	}
	fmt.Fprintf(&b, "go:       %s\n", in.GoVersion)
	fmt.Fprintf(&b, "platform: %s/%s\n", in.OS, in.Arch)
	return b.String()
}
