package tfmodule

import (
	"strings"
	"testing"
)

// BenchmarkInspectTokenDense inspects the costliest accepted file: a variable whose default is a
// list as long as MaxConfigFileBytes allows.
func BenchmarkInspectTokenDense(b *testing.B) {
	prefix, suffix := "variable \"v\" {\n  default = [", "]\n}\n"
	body := prefix + strings.Repeat("1,", (MaxConfigFileBytes-len(prefix)-len(suffix))/2) + suffix
	archive := makeArchive(b, tarEntry{name: "main.tf", body: body})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Inspect(archive); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInspectLocals inspects a file as large as MaxConfigFileBytes allows of an expression
// Hangar parses but does not evaluate.
func BenchmarkInspectLocals(b *testing.B) {
	prefix, suffix := "locals {\n  l = [", "]\n}\n"
	body := prefix + strings.Repeat("{},", (MaxConfigFileBytes-len(prefix)-len(suffix))/3) + suffix
	archive := makeArchive(b, tarEntry{name: "main.tf", body: body})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Inspect(archive); err != nil {
			b.Fatal(err)
		}
	}
}
