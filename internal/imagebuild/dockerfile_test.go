package imagebuild

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

// render writes a parse's outcome as text, one line per step, for the cases to compare.
func render(d *Dockerfile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "FROM %s\n", d.Base)
	for _, s := range d.Steps {
		switch s.Op {
		case OpRun:
			fmt.Fprintf(&b, "%d RUN %q", s.Line, s.Args)
			if len(s.Env) > 0 {
				fmt.Fprintf(&b, " env=%q", s.Env)
			}
		case OpEnv, OpLabel:
			fmt.Fprintf(&b, "%d %s %s=%s", s.Line, strings.ToUpper(s.Op), s.Key, s.Value)
		case OpWorkdir, OpUser:
			fmt.Fprintf(&b, "%d %s %s", s.Line, strings.ToUpper(s.Op), s.Value)
		case OpCopy:
			fmt.Fprintf(&b, "%d COPY", s.Line)
			if s.Value != "" {
				fmt.Fprintf(&b, " name=%s", s.Value)
			}
			for _, f := range s.Files {
				fmt.Fprintf(&b, "\n  %s %v %d:%d", f.Path, fs.FileMode(f.Mode), f.UID, f.GID)
				if f.User != "" || f.Group != "" {
					fmt.Fprintf(&b, " %s:%s", f.User, f.Group)
				}
				if f.Target != "" {
					fmt.Fprintf(&b, " -> %s", f.Target)
				} else if fs.FileMode(f.Mode).IsRegular() {
					fmt.Fprintf(&b, " %q", f.Data)
				}
			}
		}
		b.WriteString("\n")
	}
	for _, w := range d.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	return b.String()
}

func testContext() fstest.MapFS {
	return fstest.MapFS{
		"app.sh":                   {Data: []byte("#!/bin/sh\necho hi\n"), Mode: 0o755},
		"requirements.txt":         {Data: []byte("flask\n"), Mode: 0o644},
		"scripts/a.sh":             {Data: []byte("a"), Mode: 0o755},
		"scripts/b.sh":             {Data: []byte("b"), Mode: 0o644},
		"scripts/notes.md":         {Data: []byte("n"), Mode: 0o644},
		"scripts/lib/c.sh":         {Data: []byte("c"), Mode: 0o644},
		"scripts/link":             {Data: []byte("a.sh"), Mode: fs.ModeSymlink | 0o777},
		"tool":                     {Data: []byte("scripts/a.sh"), Mode: fs.ModeSymlink | 0o777},
		"escape":                   {Data: []byte("../../etc/passwd"), Mode: fs.ModeSymlink | 0o777},
		"secret/key":               {Data: []byte("k"), Mode: 0o600},
		"secret/public":            {Data: []byte("p"), Mode: 0o644},
		"node_modules/x/i.js":      {Data: []byte("x"), Mode: 0o644},
		"archive.tgz":              {Data: []byte{0x1f, 0x8b, 8, 0, 0}, Mode: 0o644},
		".dockerignore":            {Data: []byte("# comment\nnode_modules\nsecret\n!secret/public\n*.md\n"), Mode: 0o644},
		"with space/file name":     {Data: []byte("s"), Mode: 0o644},
		"big/one":                  {Data: []byte(strings.Repeat("x", MaxContextBytes/2)), Mode: 0o644},
		"big/two":                  {Data: []byte(strings.Repeat("y", MaxContextBytes/2+1)), Mode: 0o644},
		".devcontainer/Dockerfile": {Data: []byte("FROM x"), Mode: 0o644},
	}
}

// Every instruction the parser honours, as the executor receives it.
func TestParseDockerfile(t *testing.T) {
	for _, c := range []struct {
		name, file string
		args       map[string]string
		target     string
		want       string
	}{
		{"run forms and shell", `FROM debian:12
RUN apt-get update && \
    # a comment inside the continuation
    apt-get install -y git

RUN ["/usr/bin/env", "echo", "$HOME"]
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN echo "$0" "a<<b" <<< c
`, nil, "", `FROM debian:12
2 RUN ["/bin/sh" "-c" "apt-get update &&     apt-get install -y git"]
6 RUN ["/usr/bin/env" "echo" "$HOME"]
8 RUN ["/bin/bash" "-o" "pipefail" "-c" "echo \"$0\" \"a<<b\" <<< c"]
`},
		{"args before FROM, defaults and build.args", `ARG VARIANT=bullseye
ARG REGISTRY
FROM ${REGISTRY:-mcr.microsoft.com}/devcontainers/base:${VARIANT}
ARG VARIANT
ARG NODE=18
ARG UNSET
RUN echo $NODE
`, map[string]string{"VARIANT": "bookworm", "EXTRA": "1"}, "", `FROM mcr.microsoft.com/devcontainers/base:bookworm
7 RUN ["/bin/sh" "-c" "echo $NODE"] env=["VARIANT=bookworm" "NODE=18"]
warning: Dockerfile: the build argument EXTRA is not used: no ARG of the stage built declares it
`},
		{"env forms, image environment, ARG overridden by ENV", `FROM debian:12
ARG GO=1.22
ARG NOPE
ENV GOROOT=/usr/local/go PATH="${PATH}:/usr/local/go/bin" COST='$5'
ENV PATH=$PATH:/home/me/bin
ENV LEGACY hello world
ENV GO=go${GO} A=${GO:+set} B=${NOPE-default}
ENV C=${GO}
RUN go version
`, nil, "", `FROM debian:12
4 ENV GOROOT=/usr/local/go
4 ENV PATH=${PATH}:/usr/local/go/bin
4 ENV COST=$$5
5 ENV PATH=${PATH}:/usr/local/go/bin:/home/me/bin
6 ENV LEGACY=hello world
7 ENV GO=go1.22
7 ENV A=set
7 ENV B=default
8 ENV C=go1.22
9 RUN ["/bin/sh" "-c" "go version"]
`},
		{"workdir, user, label, ignored instructions", `FROM debian:12
ARG USERNAME=vscode
WORKDIR /src
WORKDIR app
USER ${USERNAME}:${USERNAME}
LABEL org.opencontainers.image.title="My app" version=1
EXPOSE 8080
CMD ["sleep", "infinity"]
ENTRYPOINT /bin/sh
HEALTHCHECK CMD true
STOPSIGNAL SIGINT
VOLUME /data
MAINTAINER me
ONBUILD RUN true
`, nil, "", `FROM debian:12
3 WORKDIR /src
4 WORKDIR /src/app
5 USER vscode:vscode
6 LABEL org.opencontainers.image.title=My app
6 LABEL version=1
warning: Dockerfile:7: EXPOSE is ignored: the workspace's ports are its devcontainer.json's forwardPorts
warning: Dockerfile:8: CMD is ignored: Hangar runs its own helper as the workspace's command
warning: Dockerfile:9: ENTRYPOINT is ignored: Hangar runs its own helper as the workspace's command, not the image's entrypoint
warning: Dockerfile:10: HEALTHCHECK is ignored: Hangar generates the workspace's pod and its probes
warning: Dockerfile:11: STOPSIGNAL is ignored: Hangar generates the workspace's pod, which stops with SIGTERM
warning: Dockerfile:12: VOLUME is ignored: the workspace's volumes are its devcontainer.json's mounts
warning: Dockerfile:13: MAINTAINER is ignored: it is metadata only
warning: Dockerfile:14: ONBUILD is ignored: it runs only in images built FROM this one
`},
		{"copy: files, directories, globs, chown, chmod, symlinks, .dockerignore", `FROM debian:12
ARG USERNAME=vscode
WORKDIR /work
COPY app.sh /usr/local/bin
COPY --chown=${USERNAME}:staff requirements.txt scripts/*.sh ./deps/
COPY --chown=1000 --chmod=644 scripts /opt/scripts
COPY tool /usr/bin/tool
COPY ["with space/file name", "/tmp/"]
COPY secret /secret/
ADD requirements.txt /add/r.txt
`, nil, "", `FROM debian:12
3 WORKDIR /work
4 COPY name=app.sh
  /usr/local/bin -rwxr-xr-x 0:0 "#!/bin/sh\necho hi\n"
5 COPY
  /work/deps/requirements.txt -rw-r--r-- 0:0 vscode:staff "flask\n"
  /work/deps/a.sh -rwxr-xr-x 0:0 vscode:staff "a"
  /work/deps/b.sh -rw-r--r-- 0:0 vscode:staff "b"
6 COPY
  /opt/scripts/a.sh -rw-r--r-- 1000:1000 "a"
  /opt/scripts/b.sh -rw-r--r-- 1000:1000 "b"
  /opt/scripts/lib drw-r--r-- 1000:1000
  /opt/scripts/lib/c.sh -rw-r--r-- 1000:1000 "c"
  /opt/scripts/link Lrwxrwxrwx 1000:1000 -> a.sh
  /opt/scripts/notes.md -rw-r--r-- 1000:1000 "n"
7 COPY name=tool
  /usr/bin/tool -rwxr-xr-x 0:0 "a"
8 COPY
  /tmp/file name -rw-r--r-- 0:0 "s"
9 COPY
  /secret/public -rw-r--r-- 0:0 "p"
10 COPY name=requirements.txt
  /add/r.txt -rw-r--r-- 0:0 "flask\n"
`},
		{"multi-stage: the target and the stages it is FROM", `FROM golang:1.22 AS build
RUN go build
FROM debian:12 AS base
ENV A=1
RUN base
FROM base AS dev
RUN dev
FROM base AS prod
RUN prod
`, nil, "dev", `FROM debian:12
4 ENV A=1
5 RUN ["/bin/sh" "-c" "base"]
7 RUN ["/bin/sh" "-c" "dev"]
warning: Dockerfile: 2 of its 4 stages are not built: the stage built (dev) is not FROM them, and COPY --from is refused
`},
		{"escape directive, syntax directive, platform", "# syntax=docker/dockerfile:1\n# escape=`\nFROM --platform=linux/amd64 mcr.microsoft.com/windows:ltsc\nRUN echo C:\\path `\n  more\n", nil, "", "FROM mcr.microsoft.com/windows:ltsc\n4 RUN [\"/bin/sh\" \"-c\" \"echo C:\\\\path   more\"]\nwarning: Dockerfile:3: FROM --platform=linux/amd64 is ignored: the image is built on, and for, the cluster's node\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := ParseDockerfile([]byte(c.file), DockerfileOptions{Args: c.args, Target: c.target, Context: testContext()})
			if err != nil {
				t.Fatal(err)
			}
			if got := render(d); got != c.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, c.want)
			}
		})
	}
}

// Every refusal names the Dockerfile, the line and why.
func TestParseDockerfileRefusals(t *testing.T) {
	big := "FROM debian:12\nCOPY big /big/\n"
	for _, c := range []struct {
		name, file, want string
		noContext        bool
		target           string
	}{
		{"copy --from", "FROM debian:12 AS a\nFROM debian:12\nCOPY --from=a /x /x\n", "Dockerfile:3: COPY --from is refused: the files would come from another stage or image", false, ""},
		{"run --mount", "FROM debian:12\nRUN --mount=type=cache,target=/root/.cache pip install x\n", "Dockerfile:2: RUN --mount is refused: a build in the cluster has no cache, secret or SSH mounts", false, ""},
		{"run --network", "FROM debian:12\nRUN --network=none true\n", "Dockerfile:2: RUN --network is refused", false, ""},
		{"run --security", "FROM debian:12\nRUN --security=insecure true\n", "Dockerfile:2: RUN --security is refused: the build runs unprivileged", false, ""},
		{"heredoc", "FROM debian:12\nRUN <<EOF\necho hi\nEOF\n", "Dockerfile:2: RUN with a heredoc (<<WORD) is not supported", false, ""},
		{"heredoc in a command", "FROM debian:12\nRUN cat > /x <<-'EOF'\nhi\nEOF\n", "Dockerfile:2: RUN with a heredoc (<<WORD) is not supported", false, ""},
		{"add url", "FROM debian:12\nADD https://example.com/x.tgz /x\n", "Dockerfile:2: ADD https://example.com/x.tgz is refused: Hangar does not fetch URLs", false, ""},
		{"add archive", "FROM debian:12\nADD archive.tgz /x/\n", "Dockerfile:2: ADD archive.tgz is refused: it is an archive, which ADD would extract", false, ""},
		{"outside the context", "FROM debian:12\nCOPY ../x /x\n", "Dockerfile:2: COPY ../x is outside the build context", false, ""},
		{"symlink out", "FROM debian:12\nCOPY escape /x\n", "Dockerfile:2: COPY escape: is a symlink to ../../etc/passwd, outside the build context", false, ""},
		{"missing source", "FROM debian:12\nCOPY nope /x\n", "Dockerfile:2: COPY nope: not found in the build context", false, ""},
		{"glob matches nothing", "FROM debian:12\nCOPY *.py /x/\n", "Dockerfile:2: COPY *.py: no file of the build context matches", false, ""},
		{"ignored source", "FROM debian:12\nCOPY node_modules /x\n", "Dockerfile:2: COPY node_modules: the build context's .dockerignore excludes it", false, ""},
		{"several sources need a directory", "FROM debian:12\nCOPY app.sh requirements.txt /x\n", "Dockerfile:2: COPY of several sources needs a destination directory ending in /, got /x", false, ""},
		{"too many bytes", big, "Dockerfile:2: COPY big/two: the Dockerfile copies more than 512 KiB from the build context", false, ""},
		{"no context", "FROM debian:12\nCOPY app.sh /x\n", "Dockerfile:2: COPY needs the build context", true, ""},
		{"unknown instruction", "FROM debian:12\nRUNN true\n", "Dockerfile:2: unknown instruction RUNN", false, ""},
		{"before FROM", "RUN true\nFROM debian:12\n", "Dockerfile:1: RUN comes before the first FROM: only ARG may", false, ""},
		{"no FROM", "ARG A=1\n", "Dockerfile: has no FROM instruction", false, ""},
		{"empty FROM", "ARG IMAGE\nFROM $IMAGE\n", "Dockerfile:2: FROM $IMAGE names no image", false, ""},
		{"scratch", "FROM scratch\nCOPY app.sh /\n", "Dockerfile:1: FROM scratch is refused", false, ""},
		{"unknown target", "FROM debian:12 AS a\n", `Dockerfile: has no stage named "b" (its stages: a)`, false, "b"},
		{"bad substitution", "FROM debian:12\nENV A=${B#x}\n", "Dockerfile:2: ENV: ${B#...}: only the substitutions", false, ""},
		{"unclosed quote", "FROM debian:12\nENV A=\"x\n", "Dockerfile:2: ENV: a double quote (\") is not closed", false, ""},
		{"image env tested", "FROM debian:12\nENV A=${HOME:-/root}\n", "Dockerfile:2: ENV: ${HOME:-...} tests HOME, which the Dockerfile does not set", false, ""},
		{"image env outside ENV", "FROM debian:12\nENV P=$PATH:/x\nWORKDIR $P\n", "Dockerfile:3: WORKDIR: $P comes from the base image's environment", false, ""},
		{"required arg", "FROM debian:12\nARG V\nRUN x\nENV A=\"${V:?give V in build.args}\"\n", "Dockerfile:4: ENV: V: give V in build.args", false, ""},
		{"too deep", "FROM debian:12\nENV A=" + strings.Repeat("${A:-", 40) + strings.Repeat("}", 40) + "\n", "nested more than 16 deep", false, ""},
		{"shell not json", "FROM debian:12\nSHELL /bin/bash -c\n", "Dockerfile:2: SHELL must be a JSON list", false, ""},
		{"chmod not octal", "FROM debian:12\nCOPY --chmod=u+x app.sh /x\n", "Dockerfile:2: COPY --chmod=u+x: want octal permissions", false, ""},
		{"bad escape directive", "# escape=x\nFROM debian:12\n", "Dockerfile:1: the escape directive must be", false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ctx fs.FS = testContext()
			if c.noContext {
				ctx = nil
			}
			d, err := ParseDockerfile([]byte(c.file), DockerfileOptions{Context: ctx, Target: c.target})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, %v; want an error with %q", d, err, c.want)
			}
		})
	}
}

// The context's bound on the number of files.
func TestParseDockerfileFileBound(t *testing.T) {
	ctx := fstest.MapFS{}
	for i := range MaxContextFiles + 1 {
		ctx[fmt.Sprintf("d/f%04d", i)] = &fstest.MapFile{Data: []byte("x")}
	}
	_, err := ParseDockerfile([]byte("FROM debian:12\nCOPY d /d\n"), DockerfileOptions{Path: ".devcontainer/Dockerfile", Context: ctx})
	if err == nil || !strings.Contains(err.Error(), ".devcontainer/Dockerfile:2: COPY: the Dockerfile copies more than 500 files") {
		t.Fatalf("got %v", err)
	}
}

// .dockerignore as Docker reads it: patterns anchored at the context's root, a folder's pattern
// excluding what is inside it, ** any depth, the last matching line deciding, ! including again.
func TestDockerignore(t *testing.T) {
	r, err := readIgnore(fstest.MapFS{".dockerignore": {Data: []byte("# comment\n/node_modules\n*.md\n**/*.log\n!keep.log\nbuild/\n!build/out\ndocs/[a-c]*\n")}})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{
		"node_modules":        true,
		"node_modules/x/y.js": true,
		"src/node_modules":    false, // anchored at the root
		"README.md":           true,
		"docs/guide.md":       false, // *.md is the root's only
		"a.log":               true,
		"deep/er/a.log":       true,
		"keep.log":            false,
		"build/tmp":           true,
		"build/out":           false,
		"build/out/bin":       false,
		"docs/alpha.txt":      true,
		"docs/delta.txt":      false,
		"src/main.go":         false,
	} {
		if got := r.excluded(p); got != want {
			t.Errorf("%s: excluded %v, want %v", p, got, want)
		}
	}
}
