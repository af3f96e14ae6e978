package imagebuild

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Bounds of what a Dockerfile brings into a Spec. The Spec travels to the build pod in a
// ConfigMap, which holds at most 1 MiB: COPY's files are bounded well under it, and the
// Dockerfile itself as a devcontainer.json is.
const (
	MaxDockerfileBytes = 256 << 10
	// MaxContextBytes bounds the content COPY and ADD read from the build context, in total.
	MaxContextBytes = 512 << 10
	// MaxContextFiles bounds the files, directories and symlinks they copy, in total.
	MaxContextFiles = 500
	maxInstructions = 2000
	// maxStepBytes bounds the steps' text (commands, environments, paths): with the files'
	// content, base64 in JSON, the Spec stays within a ConfigMap.
	maxStepBytes = 256 << 10
)

// DockerfileOptions are what a Dockerfile is read with.
type DockerfileOptions struct {
	// Path names the Dockerfile in messages (".devcontainer/Dockerfile").
	Path string
	// Args are the build arguments (a devcontainer.json's build.args): they override the ARGs'
	// defaults.
	Args map[string]string
	// Target is the stage to build (build.target); "": the last one.
	Target string
	// Context is the build context that COPY and ADD read from, with its .dockerignore; nil when
	// there is none, and then they are refused.
	Context fs.FS
}

// Dockerfile is what a Dockerfile builds: the image it starts from and the steps after.
type Dockerfile struct {
	Base     string
	Steps    []Step
	Warnings []string
}

// DockerfileError is a Dockerfile that cannot be built as written: its path, the instruction's
// first line (0: the file as a whole) and why.
type DockerfileError struct {
	Path string
	Line int
	Msg  string
	// Target says that the problem is the target stage asked for (build.target).
	Target bool
}

func (e *DockerfileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// instruction is one logical line: its first line number, the command (upper case) and the rest.
type instruction struct {
	line int
	cmd  string
	rest string
}

// Why the instructions that do not change the image's files are ignored.
var ignored = map[string]string{
	"EXPOSE":      "the workspace's ports are its devcontainer.json's forwardPorts",
	"CMD":         "Hangar runs its own helper as the workspace's command",
	"ENTRYPOINT":  "Hangar runs its own helper as the workspace's command, not the image's entrypoint",
	"HEALTHCHECK": "Hangar generates the workspace's pod and its probes",
	"STOPSIGNAL":  "Hangar generates the workspace's pod, which stops with SIGTERM",
	"VOLUME":      "the workspace's volumes are its devcontainer.json's mounts",
	"MAINTAINER":  "it is metadata only",
	"ONBUILD":     "it runs only in images built FROM this one",
}

// heredocRe is a word that opens a heredoc (BuildKit looks at whole words: <<EOF, <<-"EOF").
var heredocRe = regexp.MustCompile(`^<<-?["']?[A-Za-z_]`)

// ParseDockerfile reads a Dockerfile into the Spec's Base and Steps: its target stage (and the
// earlier stages it is built FROM), ARGs and ENVs substituted where Docker substitutes them,
// COPY's and ADD's files read from the context. docs/decisions.md ("Image builds in the cluster:
// Dockerfiles") lists what is honoured, ignored with a warning and refused.
func ParseDockerfile(data []byte, opts DockerfileOptions) (*Dockerfile, error) {
	if opts.Path == "" {
		opts.Path = "Dockerfile"
	}
	p := &parser{opts: opts, usedArgs: map[string]bool{}}
	if len(data) > MaxDockerfileBytes {
		return nil, p.errf(0, "is %d bytes, more than the %d KiB a Dockerfile may have here", len(data), MaxDockerfileBytes>>10)
	}
	ins, err := p.split(string(data))
	if err != nil {
		return nil, err
	}
	if err := p.run(ins); err != nil {
		return nil, err
	}
	if n := stepBytes(p.steps); n > maxStepBytes {
		return nil, p.errf(0, "its steps are %d KiB of commands, environment and paths, more than the %d KiB a build may have (its description travels in a ConfigMap)", n>>10, maxStepBytes>>10)
	}
	for _, k := range slices.Sorted(maps.Keys(opts.Args)) {
		if !p.usedArgs[k] {
			p.warn(0, "the build argument %s is not used: no ARG of the stage built declares it", k)
		}
	}
	return &Dockerfile{Base: p.base, Steps: p.steps, Warnings: p.warnings}, nil
}

type parser struct {
	opts     DockerfileOptions
	esc      rune
	warnings []string
	usedArgs map[string]bool

	base  string
	steps []Step
	// state of the stage being read
	env     map[string]envVar
	args    *argScope
	shell   []string
	workdir string
	// what COPY and ADD have read so far
	files, bytes int
	stepBytes    int // of the RUNs so far: their environments repeat the ARGs
	ignore       *ignoreRules
}

type envVar struct {
	// val is the value: literal, or in the ENV form (Step) when deferred.
	val      string
	deferred bool
}

type arg struct {
	name, val string
	set       bool
}

// argScope is the ARGs declared in a scope (before FROM, or a stage), by name and in order.
type argScope struct {
	byName map[string]arg
	order  []string
}

func newArgScope() *argScope { return &argScope{byName: map[string]arg{}} }

// add declares a (again: the last declaration wins).
func (s *argScope) add(a arg) {
	if _, ok := s.byName[a.name]; !ok {
		s.order = append(s.order, a.name)
	}
	s.byName[a.name] = a
}

func (p *parser) errf(line int, format string, a ...any) error {
	return &DockerfileError{Path: p.opts.Path, Line: line, Msg: fmt.Sprintf(format, a...)}
}

func (p *parser) warn(line int, format string, a ...any) {
	prefix := p.opts.Path + ": "
	if line > 0 {
		prefix = fmt.Sprintf("%s:%d: ", p.opts.Path, line)
	}
	p.warnings = append(p.warnings, prefix+fmt.Sprintf(format, a...))
}

var directiveRe = regexp.MustCompile(`^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.*?)\s*$`)

// split reads the parser directives and the logical lines: comments and blank lines dropped,
// continuations (the escape character at a line's end) joined.
func (p *parser) split(text string) ([]instruction, error) {
	p.esc = '\\'
	lines := strings.Split(text, "\n")
	i := 0
	seen := map[string]bool{}
	for ; i < len(lines); i++ {
		m := directiveRe.FindStringSubmatch(strings.TrimSpace(strings.TrimSuffix(lines[i], "\r")))
		if m == nil {
			break
		}
		key := strings.ToLower(m[1])
		if seen[key] {
			return nil, p.errf(i+1, "the parser directive %s is given twice", key)
		}
		seen[key] = true
		switch key {
		case "escape":
			switch m[2] {
			case "\\":
				p.esc = '\\'
			case "`":
				p.esc = '`'
			default:
				return nil, p.errf(i+1, "the escape directive must be \\ or `, got %q", m[2])
			}
		case "syntax":
			if !strings.HasPrefix(m[2], "docker/dockerfile:") && !strings.HasPrefix(m[2], "docker.io/docker/dockerfile:") {
				p.warn(i+1, "the syntax directive %s is ignored: Hangar reads the Dockerfile itself, with the standard syntax", m[2])
			}
		}
	}
	esc := string(p.esc)
	var out []instruction
	var buf strings.Builder
	start, open := 0, false
	for ; i < len(lines); i++ {
		line := strings.TrimSuffix(lines[i], "\r")
		trimmed := strings.TrimLeft(line, " \t")
		if trimmed == "" || trimmed[0] == '#' {
			continue // a comment or blank line, also inside a continuation
		}
		if !open {
			start = i + 1
		}
		if t := strings.TrimRight(line, " \t"); strings.HasSuffix(t, esc) {
			buf.WriteString(strings.TrimSuffix(t, esc))
			open = true
			continue
		}
		buf.WriteString(line)
		ins, err := p.instruction(start, buf.String())
		if err != nil {
			return nil, err
		}
		out = append(out, ins)
		buf.Reset()
		open = false
		if len(out) > maxInstructions {
			return nil, p.errf(start, "the Dockerfile has more than %d instructions", maxInstructions)
		}
	}
	if open {
		ins, err := p.instruction(start, buf.String())
		if err != nil {
			return nil, err
		}
		out = append(out, ins)
	}
	return out, nil
}

func (p *parser) instruction(line int, s string) (instruction, error) {
	s = strings.TrimSpace(s)
	cmd, rest, _ := strings.Cut(s, " ")
	if i := strings.IndexAny(cmd, "\t"); i >= 0 {
		cmd, rest = s[:i], s[i+1:]
	}
	in := instruction{line: line, cmd: strings.ToUpper(cmd), rest: strings.TrimSpace(rest)}
	switch in.cmd {
	case "RUN", "COPY", "ADD":
		if slices.ContainsFunc(rawWords(in.rest, p.esc), heredocRe.MatchString) {
			return in, p.errf(line, "%s with a heredoc (<<WORD) is not supported: put the script in a file of the build context and COPY it, or write it on the %s line", in.cmd, in.cmd)
		}
	}
	return in, nil
}

// run reads the stages and builds the target one.
func (p *parser) run(ins []instruction) error {
	type stage struct {
		name   string
		from   instruction
		base   string
		body   []instruction
		parent int
	}
	globals := newArgScope()
	var stages []*stage
	for _, in := range ins {
		switch {
		case in.cmd == "FROM":
			stages = append(stages, &stage{from: in, parent: -1})
		case len(stages) == 0 && in.cmd == "ARG":
			a, err := p.argDecl(in, nil, newArgScope())
			if err != nil {
				return err
			}
			for _, x := range a {
				globals.add(x)
			}
		case len(stages) == 0:
			return p.errf(in.line, "%s comes before the first FROM: only ARG may", in.cmd)
		default:
			stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
		}
	}
	if len(stages) == 0 {
		return p.errf(0, "has no FROM instruction")
	}
	gl := &lexer{esc: p.esc, lookup: func(n string) (string, varState) { return argLookup(globals, n) }}
	names := map[string]int{}
	for i, st := range stages {
		flags, rest, err := p.flags(st.from, st.from.rest, "platform")
		if err != nil {
			return err
		}
		if v, ok := flags["platform"]; ok {
			p.warn(st.from.line, "FROM --platform=%s is ignored: the image is built on, and for, the cluster's node", v)
		}
		w := rawWords(rest, p.esc)
		if len(w) != 1 && (len(w) != 3 || !strings.EqualFold(w[1], "AS")) {
			return p.errf(st.from.line, "FROM must be FROM image [AS name], got %q", st.from.rest)
		}
		gl.unset = nil
		if st.base, err = gl.word(w[0]); err != nil {
			return p.lexErr(st.from.line, "FROM", err)
		}
		if st.base == "" {
			return p.errf(st.from.line, "FROM %s names no image: declare its ARGs before FROM, with a default, or give them in build.args", w[0])
		}
		if len(w) == 3 {
			st.name = strings.ToLower(w[2])
			if _, dup := names[st.name]; dup {
				return p.errf(st.from.line, "the stage name %q is used twice", w[2])
			}
			names[st.name] = i
		}
		if j, ok := names[strings.ToLower(st.base)]; ok && j < i {
			st.parent = j
		}
	}
	target := len(stages) - 1
	if p.opts.Target != "" {
		j, ok := names[strings.ToLower(p.opts.Target)]
		if !ok {
			var list []string
			for _, st := range stages {
				if st.name != "" {
					list = append(list, st.name)
				}
			}
			return &DockerfileError{Path: p.opts.Path, Target: true, Msg: fmt.Sprintf("has no stage named %q (its stages: %s)", p.opts.Target, cmpOr(strings.Join(list, ", "), "none named"))}
		}
		target = j
	}
	var chain []int
	for i := target; i >= 0; i = stages[i].parent {
		chain = append([]int{i}, chain...)
	}
	if skipped := len(stages) - len(chain); skipped > 0 {
		p.warn(0, "%d of its %d stages are not built: the stage built (%s) is not FROM them, and COPY --from is refused", skipped, len(stages), cmpOr(stages[target].name, "the last"))
	}
	root := stages[chain[0]]
	if strings.EqualFold(root.base, "scratch") {
		return p.errf(root.from.line, "FROM scratch is refused: the build runs in a container of the base image, which needs a shell")
	}
	if _, err := name.ParseReference(root.base); err != nil {
		return p.errf(root.from.line, "FROM %q is not an image reference: %v", root.base, err)
	}
	p.base = root.base
	p.env = map[string]envVar{}
	p.shell = []string{"/bin/sh", "-c"}
	p.workdir = "/"
	for _, i := range chain {
		p.args = newArgScope()
		for _, in := range stages[i].body {
			if err := p.step(in, globals); err != nil {
				return err
			}
		}
	}
	return nil
}

// argLookup finds an ARG in a scope.
func argLookup(args *argScope, n string) (string, varState) {
	a, ok := args.byName[n]
	switch {
	case !ok:
		return "", varUnknown
	case !a.set:
		return "", varUnset
	}
	return a.val, varSet
}

// lookup finds a variable in the stage being read: ENV first, then ARG (Docker's order).
func (p *parser) lookup(n string) (string, varState) {
	if e, ok := p.env[n]; ok {
		if e.deferred {
			return e.val, varDeferred
		}
		return e.val, varSet
	}
	return argLookup(p.args, n)
}

func (p *parser) lexer(imageEnv bool) *lexer {
	return &lexer{esc: p.esc, lookup: p.lookup, imageEnv: imageEnv}
}

// lexErr names the line of a problem in a word.
func (p *parser) lexErr(line int, cmd string, err error) error {
	if errors.Is(err, errLex) {
		return p.errf(line, "%s: %s", cmd, strings.TrimPrefix(err.Error(), errLex.Error()))
	}
	return err
}

// noteUnset warns of the variables a substitution found unset.
func (p *parser) noteUnset(line int, cmd string, l *lexer) {
	for _, n := range slices.Compact(l.unset) {
		p.warn(line, "%s uses $%s, which no ARG or ENV before it sets: it is empty here (the base image's environment is read only when the image is built)", cmd, n)
	}
	l.unset = nil
}

// argDecl reads ARG name[=default] ...: the value is the build argument given, else the default,
// else (in a stage) the global ARG of that name.
func (p *parser) argDecl(in instruction, l *lexer, globals *argScope) ([]arg, error) {
	if l == nil {
		l = &lexer{esc: p.esc, lookup: func(string) (string, varState) { return "", varUnset }}
	}
	var out []arg
	raw := rawWords(in.rest, p.esc)
	if len(raw) == 0 {
		return nil, p.errf(in.line, "ARG needs a name")
	}
	for _, w := range raw {
		n, def, hasDef := strings.Cut(w, "=")
		if !validName(n) {
			return nil, p.errf(in.line, "ARG %q is not a valid name", n)
		}
		a := arg{name: n}
		if hasDef {
			v, err := l.word(def)
			if err != nil {
				return nil, p.lexErr(in.line, "ARG", err)
			}
			a.val, a.set = v, true
		}
		if v, ok := p.opts.Args[n]; ok {
			a.val, a.set = v, true
			p.usedArgs[n] = true
		} else if !hasDef {
			if v, st := argLookup(globals, n); st == varSet {
				a.val, a.set = v, true
			}
		}
		out = append(out, a)
	}
	p.noteUnset(in.line, "ARG", l)
	return out, nil
}

func validName(n string) bool {
	if n == "" {
		return false
	}
	for i, r := range n {
		if !isNameRune(r, i == 0) {
			return false
		}
	}
	return true
}

// flags reads an instruction's leading --name[=value] flags, refusing those not allowed.
func (p *parser) flags(in instruction, rest string, allowed ...string) (map[string]string, string, error) {
	out := map[string]string{}
	for strings.HasPrefix(rest, "--") {
		f, r, _ := strings.Cut(rest, " ")
		if i := strings.IndexByte(f, '\t'); i >= 0 {
			f, r = rest[:i], rest[i+1:]
		}
		rest = strings.TrimSpace(r)
		k, v, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		if !slices.Contains(allowed, k) {
			return nil, "", p.errf(in.line, "%s --%s is refused: %s", in.cmd, k, flagRefusal(in.cmd, k))
		}
		out[k] = v
	}
	return out, rest, nil
}

func flagRefusal(cmd, flag string) string {
	switch flag {
	case "mount":
		return "a build in the cluster has no cache, secret or SSH mounts; write the files with COPY, or fetch them in the RUN"
	case "network":
		return "the build runs in the cluster's default network, which Hangar does not change per RUN"
	case "security":
		return "the build runs unprivileged and cannot grant a RUN more"
	case "from":
		return "the files would come from another stage or image, and Hangar builds one stage; copy them from the build context, or fetch them in a RUN"
	case "parents", "exclude", "keep-git-dir", "checksum":
		return "Hangar's builder does not support this flag"
	}
	return fmt.Sprintf("Hangar does not know this flag of %s", cmd)
}

// step reads one instruction of the stage being built.
func (p *parser) step(in instruction, globals *argScope) error {
	switch in.cmd {
	case "ARG":
		l := p.lexer(false)
		a, err := p.argDecl(in, l, globals)
		if err != nil {
			return err
		}
		for _, x := range a {
			p.args.add(x)
		}
	case "ENV":
		return p.envStep(in)
	case "LABEL":
		l := p.lexer(false)
		pairs, err := p.pairs(in, l)
		if err != nil {
			return err
		}
		for _, kv := range pairs {
			p.steps = append(p.steps, Step{Line: in.line, Op: OpLabel, Key: kv[0], Value: kv[1]})
		}
		p.noteUnset(in.line, "LABEL", l)
	case "WORKDIR":
		l := p.lexer(false)
		v, err := l.word(in.rest)
		if err != nil {
			return p.lexErr(in.line, in.cmd, err)
		}
		p.noteUnset(in.line, in.cmd, l)
		if v == "" {
			return p.errf(in.line, "WORKDIR needs a path")
		}
		if !path.IsAbs(v) {
			v = path.Join(p.workdir, v)
		}
		p.workdir = path.Clean(v)
		p.steps = append(p.steps, Step{Line: in.line, Op: OpWorkdir, Value: p.workdir})
	case "USER":
		l := p.lexer(false)
		v, err := l.word(in.rest)
		if err != nil {
			return p.lexErr(in.line, in.cmd, err)
		}
		p.noteUnset(in.line, in.cmd, l)
		if v == "" || strings.ContainsAny(v, " \t") {
			return p.errf(in.line, "USER needs a user, user:group, uid or uid:gid, got %q", v)
		}
		p.steps = append(p.steps, Step{Line: in.line, Op: OpUser, Value: v})
	case "SHELL":
		argv, ok := jsonForm(in.rest)
		if !ok || len(argv) == 0 {
			return p.errf(in.line, "SHELL must be a JSON list such as [\"/bin/bash\", \"-c\"]")
		}
		p.shell = argv
	case "RUN":
		_, rest, err := p.flags(in, in.rest)
		if err != nil {
			return err
		}
		argv, ok := jsonForm(rest)
		if !ok {
			if strings.TrimSpace(rest) == "" {
				return p.errf(in.line, "RUN needs a command")
			}
			argv = append(slices.Clone(p.shell), rest)
		} else if len(argv) == 0 {
			return p.errf(in.line, "RUN [] has no command")
		}
		p.steps = append(p.steps, Step{Line: in.line, Op: OpRun, Args: argv, Env: p.runEnv()})
		if n := stepBytes(p.steps[len(p.steps)-1:]); p.stepBytes+n > maxStepBytes {
			return p.errf(in.line, "the steps up to this RUN are more than %d KiB of commands, environment and paths, the limit (the build's description travels in a ConfigMap)", maxStepBytes>>10)
		} else {
			p.stepBytes += n
		}
	case "COPY", "ADD":
		return p.copyStep(in)
	case "FROM":
		// split put each FROM at a stage's head
	default:
		if why, ok := ignored[in.cmd]; ok {
			p.warn(in.line, "%s is ignored: %s", in.cmd, why)
			return nil
		}
		return p.errf(in.line, "unknown instruction %s", in.cmd)
	}
	return nil
}

// runEnv is what a RUN sees besides the image's environment: the stage's ARGs that are set and
// that no ENV overrides.
func (p *parser) runEnv() []string {
	var out []string
	for _, n := range p.args.order {
		a := p.args.byName[n]
		if _, env := p.env[n]; env || !a.set {
			continue
		}
		out = append(out, n+"="+a.val)
	}
	return out
}

// pairs reads key=value words (or the legacy "key value" form: the rest of the line is the value).
func (p *parser) pairs(in instruction, l *lexer) ([][2]string, error) {
	raw := rawWords(in.rest, p.esc)
	if len(raw) == 0 {
		return nil, p.errf(in.line, "%s needs key=value", in.cmd)
	}
	var out [][2]string
	if !strings.Contains(raw[0], "=") {
		_, v, _ := strings.Cut(strings.TrimSpace(in.rest), raw[0])
		val, err := l.word(strings.TrimSpace(v))
		if err != nil {
			return nil, p.lexErr(in.line, in.cmd, err)
		}
		key, err := p.lexer(false).word(raw[0])
		if err != nil {
			return nil, p.lexErr(in.line, in.cmd, err)
		}
		return [][2]string{{key, val}}, nil
	}
	for _, w := range raw {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			return nil, p.errf(in.line, "%s: %q is not key=value", in.cmd, w)
		}
		key, err := p.lexer(false).word(k)
		if err != nil {
			return nil, p.lexErr(in.line, in.cmd, err)
		}
		val, err := l.word(v)
		if err != nil {
			return nil, p.lexErr(in.line, in.cmd, err)
		}
		out = append(out, [2]string{key, val})
	}
	return out, nil
}

// envStep reads ENV: every value is substituted with the variables as they were before the
// instruction, in the ENV form (Step).
func (p *parser) envStep(in instruction) error {
	l := p.lexer(true)
	pairs, err := p.pairs(in, l)
	if err != nil {
		return err
	}
	for _, kv := range pairs {
		if !validName(kv[0]) {
			return p.errf(in.line, "ENV %q is not a valid variable name", kv[0])
		}
	}
	for _, kv := range pairs {
		deferred := imageRefRe.MatchString(strings.ReplaceAll(kv[1], "$$", ""))
		v := kv[1]
		if !deferred {
			v = strings.ReplaceAll(v, "$$", "$")
		}
		p.env[kv[0]] = envVar{val: v, deferred: deferred}
		p.steps = append(p.steps, Step{Line: in.line, Op: OpEnv, Key: kv[0], Value: kv[1]})
	}
	return nil
}

var imageRefRe = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)

// stepBytes is the size of the steps' text.
func stepBytes(steps []Step) int {
	n := 0
	for _, s := range steps {
		n += len(s.Key) + len(s.Value) + 16
		for _, a := range s.Args {
			n += len(a) + 4
		}
		for _, e := range s.Env {
			n += len(e) + 4
		}
		for _, f := range s.Files {
			n += len(f.Path) + len(f.Target) + len(f.User) + len(f.Group) + 64
		}
	}
	return n
}

// jsonForm reads the exec form: a JSON list of strings.
func jsonForm(s string) ([]string, bool) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "[") {
		return nil, false
	}
	var argv []string
	if json.Unmarshal([]byte(s), &argv) != nil {
		return nil, false
	}
	return argv, true
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// parseChown reads --chown's user[:group], each a number or a name.
func parseChown(s string) (uid, gid int, user, group string, err error) {
	u, g, hasGroup := strings.Cut(s, ":")
	if u == "" || hasGroup && g == "" {
		return 0, 0, "", "", fmt.Errorf("--chown=%s: want user, user:group, uid or uid:gid", s)
	}
	num := func(x string) (int, bool) {
		n, err := strconv.Atoi(x)
		return n, err == nil && n >= 0 && n < 1<<31
	}
	if n, ok := num(u); ok {
		uid = n
		gid = n // Docker: a user without a group has the group of the same number
	} else {
		user = u
	}
	if hasGroup {
		if n, ok := num(g); ok {
			gid = n
		} else {
			gid, group = 0, g
		}
	}
	return uid, gid, user, group, nil
}
