package imagebuild

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseDockerfile: any text is parsed or refused with a *DockerfileError naming the file;
// never a panic, and what comes out stays within the bounds (steps, files, bytes).
func FuzzParseDockerfile(f *testing.F) {
	for _, s := range []string{
		"FROM debian:12\nRUN echo hi\n",
		"ARG V=1\nFROM img:${V:-x}\nENV A=\"${B:+$V}\" C='$x'\nCOPY --chown=1:2 app.sh scripts/ /x/\n",
		"# escape=`\nFROM a AS b\nRUN x `\n y\nFROM b\nWORKDIR w\nUSER u\nLABEL a=b\nSHELL [\"a\"]\nRUN [\"x\"]\n",
		"FROM x\nENV A=" + strings.Repeat("${A:-", 30) + strings.Repeat("}", 30),
		"FROM x\nRUN " + strings.Repeat("a", 1<<16),
		"FROM x\nCOPY \"a\\\" b\" /\nADD archive.tgz /\nCOPY ../x /\nCOPY *.sh scripts/* ./\n",
		"FROM x\nENV a b\nENV P=$PATH:${HOME}\nWORKDIR $P\n",
		"FROM x\nRUN <<EOF\nEOF\n", "\\\n", "FROM", "FROM $", "FROM ${", "FROM ${a:", "ARG a=\"", "\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := ParseDockerfile(in, DockerfileOptions{Path: "Dockerfile", Args: map[string]string{"V": "2"}, Context: testContext()})
		if err != nil {
			var de *DockerfileError
			if !errors.As(err, &de) || !strings.HasPrefix(err.Error(), "Dockerfile") {
				t.Fatalf("not a DockerfileError naming the file: %v", err)
			}
			return
		}
		if d.Base == "" {
			t.Fatal("no base image")
		}
		files, size := 0, 0
		for _, s := range d.Steps {
			files += len(s.Files)
			for _, f := range s.Files {
				size += len(f.Data)
			}
		}
		if len(d.Steps) > maxInstructions*2 || files > MaxContextFiles || size > MaxContextBytes {
			t.Fatalf("over the bounds: %d steps, %d files, %d bytes", len(d.Steps), files, size)
		}
	})
}

// A huge line and deep nesting stay cheap: the parse is bounded by the file's size.
func BenchmarkParseDockerfileHuge(b *testing.B) {
	huge := []byte("FROM x\nENV A=" + strings.Repeat("${A:-", 1<<14) + strings.Repeat("x", MaxDockerfileBytes/2))
	for b.Loop() {
		if _, err := ParseDockerfile(huge, DockerfileOptions{}); err == nil {
			b.Fatal("accepted")
		}
	}
}
