package imagebuild

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// Bounds on /proc/self/mountinfo: a pod has a few dozen mounts; a line longer than this, or more
// lines than this, is not a mount table.
const (
	maxMountinfoLine  = 64 << 10
	maxMountinfoLines = 100000
)

// parseMountinfo reads the mount points of /proc/self/mountinfo (proc(5): the fifth field, with
// spaces, tabs, newlines and backslashes escaped as octal). The snapshot skips every one of them
// under the root but the root itself: /proc, /sys, /dev, the pod's volumes, the files the kubelet
// bind-mounts (/etc/hosts, /etc/resolv.conf, /etc/hostname) and the build's own mounts.
func parseMountinfo(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxMountinfoLine)
	var points []string
	for n := 1; sc.Scan(); n++ {
		if n > maxMountinfoLines {
			return nil, fmt.Errorf("mountinfo: more than %d lines", maxMountinfoLines)
		}
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 5 {
			return nil, fmt.Errorf("mountinfo line %d: %d fields, want at least 5", n, len(fields))
		}
		p, err := unescapeMountPath(fields[4])
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: mount point %q: %w", n, fields[4], err)
		}
		if !path.IsAbs(p) {
			return nil, fmt.Errorf("mountinfo line %d: mount point %q is not absolute", n, p)
		}
		points = append(points, path.Clean(p))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	return points, nil
}

// unescapeMountPath undoes the kernel's octal escapes (\040 for a space).
func unescapeMountPath(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("truncated escape at byte %d", i)
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("bad escape %q", s[i:i+4])
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}
