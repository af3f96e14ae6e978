// Package release holds the tests of scripts/release and of hangar's other release targets, in a
// package of its own: cold, the release job's six cross builds take minutes, and go test's time
// limit is per package.
package release

import (
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestReleaseBinaries runs scripts/release as a release is made: it must build hangar, write
// SHA256SUMS that match, and stamp the version, commit and date that `hangar version` then prints.
// Each file is checked to be an executable of its system and architecture. In `go test` (and so in
// CI) it builds the native target only, whose package compiles CI has made already: a cold build of
// each foreign target costs about 150 s of two cores (docs/benchmarks.md, "CI time on a fresh
// machine"), and TestCrossPlatformTypeCheck catches what those builds caught in hangar's own code.
// HANGAR_RELEASE_ALL=1 (scripts/release-check, the release job) builds and checks all six.
func TestReleaseBinaries(t *testing.T) {
	type target struct{ os, arch string }
	targets := []target{{runtime.GOOS, runtime.GOARCH}}
	if os.Getenv("HANGAR_RELEASE_ALL") == "1" {
		targets = []target{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"}, {"windows", "arm64"}}
	}
	var names []string
	for _, tg := range targets {
		names = append(names, tg.os+"/"+tg.arch)
	}
	dist := t.TempDir()
	const version = "v0.0.0-releasetest"
	commit, err := exec.Command("git", "rev-parse", "HEAD").Output() // what scripts/release stamps
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("../../scripts/release", version)
	cmd.Env = append(os.Environ(), "DIST="+dist, "SOURCE_DATE_EPOCH=1764140400", // 2025-11-26T07:00:00Z
		"TARGETS="+strings.Join(names, " "))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/release: %v\n%s", err, out)
	}
	t.Logf("scripts/release took %v:\n%s", time.Since(start).Round(time.Second), out)

	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not `sum  name`", line)
		}
		listed[name] = sum
	}
	if len(listed) != len(targets) {
		t.Errorf("SHA256SUMS lists %d files, want %d:\n%s", len(listed), len(targets), sums)
	}
	for _, tg := range targets {
		name := fmt.Sprintf("hangar-%s-%s-%s", version, tg.os, tg.arch)
		if tg.os == "windows" {
			name += ".exe"
		}
		path := filepath.Join(dist, name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s/%s: %v", tg.os, tg.arch, err)
			continue
		}
		h := sha256.Sum256(b)
		if got := hex.EncodeToString(h[:]); listed[name] != got {
			t.Errorf("SHA256SUMS says %s is %q; it is %s", name, listed[name], got)
		}
		if got := executableKind(path); got != tg.os+"/"+tg.arch {
			t.Errorf("%s is %s, want a %s/%s executable", name, got, tg.os, tg.arch)
		}
	}

	// The binary for this machine runs, and says which build it is.
	native := filepath.Join(dist, fmt.Sprintf("hangar-%s-%s-%s", version, runtime.GOOS, runtime.GOARCH))
	got, err := exec.Command(native, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("hangar version: %v\n%s", err, got)
	}
	wantLines := []string{
		"hangar " + version,
		"commit:   " + strings.TrimSpace(string(commit)), // "-dirty" follows in a clone with changes
		"built:    2025-11-26T07:00:00Z",
		"go:       " + runtime.Version(),
		"platform: " + runtime.GOOS + "/" + runtime.GOARCH,
	}
	for _, w := range wantLines {
		if !strings.Contains(string(got), w) {
			t.Errorf("hangar version lacks %q:\n%s", w, got)
		}
	}
	js, err := exec.Command(native, "version", "-o", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Version, Date, OS, Arch string
		Stamped                 bool
	}
	if err := json.Unmarshal(js, &info); err != nil || info.Version != version || info.Date != "2025-11-26T07:00:00Z" || !info.Stamped ||
		info.OS != runtime.GOOS || info.Arch != runtime.GOARCH {
		t.Errorf("hangar version -o json: %+v, %v\n%s", info, err, js)
	}
}

// executableKind says which system and architecture an executable is for, from its header.
func executableKind(path string) string {
	if f, err := elf.Open(path); err == nil {
		defer f.Close()
		arch := map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}[f.Machine]
		if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
			return "an ELF file that is not an executable"
		}
		return "linux/" + arch
	}
	if f, err := macho.Open(path); err == nil {
		defer f.Close()
		arch := map[macho.Cpu]string{macho.CpuAmd64: "amd64", macho.CpuArm64: "arm64"}[f.Cpu]
		if f.Type != macho.TypeExec {
			return "a Mach-O file that is not an executable"
		}
		return "darwin/" + arch
	}
	if f, err := pe.Open(path); err == nil {
		defer f.Close()
		arch := map[uint16]string{pe.IMAGE_FILE_MACHINE_AMD64: "amd64", pe.IMAGE_FILE_MACHINE_ARM64: "arm64"}[f.Machine]
		if f.Characteristics&pe.IMAGE_FILE_EXECUTABLE_IMAGE == 0 {
			return "a PE file that is not an executable"
		}
		return "windows/" + arch
	}
	return "not an executable this test knows"
}
