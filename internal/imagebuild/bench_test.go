//go:build linux

package imagebuild

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// BenchmarkSnapshot walks a tree of 20,000 files (100 directories) and reports the memory one
// snapshot keeps per path: what docs/decisions.md quotes for a whole image's build.
func BenchmarkSnapshot(b *testing.B) {
	root := b.TempDir()
	const dirs, files = 100, 200
	for d := 0; d < dirs; d++ {
		dir := filepath.Join(root, "usr/share/package-"+fmt.Sprint(d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 0; f < files; f++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file-%04d.txt", f)), nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	s := &snapshotter{root: root, skip: map[string]bool{}}
	var kept snapshot
	b.ResetTimer()
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		snap, err := s.take()
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		kept = snap
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(snap)), "heap-B/path")
	}
	b.ReportMetric(float64(len(kept)), "paths")
}
