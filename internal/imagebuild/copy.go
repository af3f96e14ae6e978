package imagebuild

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// copyStep reads COPY and ADD: local sources only, read from the context into Files.
func (p *parser) copyStep(in instruction) error {
	allowed := []string{"chown", "chmod", "link"}
	flags, rest, err := p.flags(in, in.rest, allowed...)
	if err != nil {
		return err
	}
	l := p.lexer(false)
	var words []string
	if argv, ok := jsonForm(rest); ok {
		for _, a := range argv {
			w, err := l.word(a)
			if err != nil {
				return p.lexErr(in.line, in.cmd, err)
			}
			words = append(words, w)
		}
	} else if words, err = l.words(rest); err != nil {
		return p.lexErr(in.line, in.cmd, err)
	}
	var uid, gid int
	var user, group string
	if v, ok := flags["chown"]; ok {
		if v, err = l.word(v); err == nil {
			uid, gid, user, group, err = parseChown(v)
		}
		if err != nil {
			return p.lexErr(in.line, in.cmd+" --chown", err)
		}
	}
	var chmod *uint32
	if v, ok := flags["chmod"]; ok {
		if v, err = l.word(v); err != nil {
			return p.lexErr(in.line, in.cmd+" --chmod", err)
		}
		n, err := strconv.ParseUint(v, 8, 32)
		if err != nil || n > 0o7777 {
			return p.errf(in.line, "%s --chmod=%s: want octal permissions such as 755", in.cmd, v)
		}
		m := uint32(n)
		chmod = &m
	}
	p.noteUnset(in.line, in.cmd, l)
	if len(words) < 2 {
		return p.errf(in.line, "%s needs a source and a destination", in.cmd)
	}
	if p.opts.Context == nil {
		return p.errf(in.line, "%s needs the build context, which Hangar reads from the repository when the workspace is created from it", in.cmd)
	}
	srcs, dest := words[:len(words)-1], words[len(words)-1]
	if dest == "" {
		return p.errf(in.line, "%s needs a destination", in.cmd)
	}
	intoDir := strings.HasSuffix(dest, "/") || dest == "." || strings.HasSuffix(dest, "/.")
	if !path.IsAbs(dest) {
		dest = path.Join(p.workdir, dest)
	}
	dest = path.Clean(dest)
	if p.ignore == nil {
		if p.ignore, err = readIgnore(p.opts.Context); err != nil {
			return p.errf(in.line, "%s: %v", in.cmd, err)
		}
	}
	var matches []string
	for _, src := range srcs {
		if in.cmd == "ADD" && (strings.Contains(src, "://") || strings.HasPrefix(src, "git@")) {
			return p.errf(in.line, "ADD %s is refused: Hangar does not fetch URLs in a build; fetch it in a RUN (curl, git) instead", src)
		}
		rel := path.Clean(strings.TrimLeft(src, "/"))
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return p.errf(in.line, "%s %s is outside the build context", in.cmd, src)
		}
		if strings.ContainsAny(rel, "*?[") {
			m, err := p.glob(rel)
			if err != nil {
				return p.errf(in.line, "%s %s: %v", in.cmd, src, err)
			}
			if len(m) == 0 {
				return p.errf(in.line, "%s %s: no file of the build context matches", in.cmd, src)
			}
			matches = append(matches, m...)
			continue
		}
		matches = append(matches, rel)
	}
	if len(matches) > 1 && !intoDir {
		return p.errf(in.line, "%s of several sources needs a destination directory ending in /, got %s", in.cmd, words[len(words)-1])
	}
	st := Step{Line: in.line, Op: OpCopy}
	add := func(f File) error {
		p.files++
		if p.files > MaxContextFiles {
			return p.errf(in.line, "%s: the Dockerfile copies more than %d files from the build context, the limit (the build's description travels in a ConfigMap of 1 MiB); copy fewer, or fetch them in a RUN", in.cmd, MaxContextFiles)
		}
		f.UID, f.GID, f.User, f.Group = uid, gid, user, group
		if chmod != nil && fs.FileMode(f.Mode)&fs.ModeSymlink == 0 {
			f.Mode = f.Mode&^uint32(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) | *chmod&0o777 | unixSpecial(*chmod)
		}
		st.Files = append(st.Files, f)
		return nil
	}
	for _, m := range matches {
		real, info, err := p.resolve(m)
		if err != nil {
			return p.errf(in.line, "%s %s: %v", in.cmd, m, err)
		}
		if m != "." && p.ignore.excluded(m) && (!info.IsDir() || !p.ignore.exceptions) {
			return p.errf(in.line, "%s %s: the build context's .dockerignore excludes it", in.cmd, m)
		}
		if info.IsDir() {
			n := len(st.Files)
			if err := p.walk(in, real, dest, add); err != nil {
				return err
			}
			if n == len(st.Files) && m != "." && p.ignore.excluded(m) {
				return p.errf(in.line, "%s %s: the build context's .dockerignore excludes it", in.cmd, m)
			}
			continue
		}
		data, err := p.read(in, real, info)
		if err != nil {
			return err
		}
		if in.cmd == "ADD" && isArchive(data) {
			return p.errf(in.line, "ADD %s is refused: it is an archive, which ADD would extract, and Hangar does not; COPY it and extract it in a RUN", m)
		}
		target := dest
		if intoDir {
			target = path.Join(dest, path.Base(m))
		} else {
			// A single file to a path without a trailing /: if the image has a directory there,
			// the file goes into it under its own name (Docker's rule): the executor decides.
			st.Value = path.Base(m)
		}
		if err := add(File{Path: target, Mode: uint32(info.Mode().Perm()), Data: data}); err != nil {
			return err
		}
	}
	p.steps = append(p.steps, st)
	return nil
}

// unixSpecial turns the setuid, setgid and sticky bits of a chmod number into fs.FileMode's.
func unixSpecial(m uint32) uint32 {
	var out fs.FileMode
	if m&0o4000 != 0 {
		out |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	return uint32(out)
}

// resolve follows a source that is a symlink, inside the context only.
func (p *parser) resolve(rel string) (string, fs.FileInfo, error) {
	for range 16 {
		info, err := fs.Lstat(p.opts.Context, rel)
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil, errors.New("not found in the build context")
		}
		if err != nil {
			return "", nil, fmt.Errorf("reading the build context: %w", err)
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			return rel, info, nil
		}
		target, err := fs.ReadLink(p.opts.Context, rel)
		if err != nil {
			return "", nil, fmt.Errorf("reading the build context: %w", err)
		}
		next := path.Join(path.Dir(rel), target)
		if path.IsAbs(target) || next == ".." || strings.HasPrefix(next, "../") {
			return "", nil, fmt.Errorf("is a symlink to %s, outside the build context", target)
		}
		rel = next
	}
	return "", nil, errors.New("is a chain of more than 16 symlinks")
}

// read reads one file of the context within the bounds.
func (p *parser) read(in instruction, rel string, info fs.FileInfo) ([]byte, error) {
	over := func() error {
		return p.errf(in.line, "%s %s: the Dockerfile copies more than %d KiB from the build context, the limit (the build's description travels in a ConfigMap of 1 MiB); copy less, or fetch it in a RUN", in.cmd, rel, MaxContextBytes>>10)
	}
	if !info.Mode().IsRegular() {
		return nil, p.errf(in.line, "%s %s: not a regular file, directory or symlink", in.cmd, rel)
	}
	if p.bytes+int(info.Size()) > MaxContextBytes {
		return nil, over()
	}
	data, err := fs.ReadFile(p.opts.Context, rel)
	if err != nil {
		return nil, p.errf(in.line, "%s %s: reading the build context: %v", in.cmd, rel, err)
	}
	p.bytes += len(data)
	if p.bytes > MaxContextBytes {
		return nil, over()
	}
	return data, nil
}

// walk copies a directory's contents (not the directory itself) into dest, recursively;
// symlinks inside it are copied as symlinks, as Docker does.
func (p *parser) walk(in instruction, dir, dest string, add func(File) error) error {
	entries, err := fs.ReadDir(p.opts.Context, dir)
	if err != nil {
		return p.errf(in.line, "%s %s: reading the build context: %v", in.cmd, dir, err)
	}
	for _, e := range entries {
		rel := path.Join(dir, e.Name())
		target := path.Join(dest, e.Name())
		excluded := p.ignore.excluded(rel)
		if excluded && (!e.IsDir() || !p.ignore.exceptions) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return p.errf(in.line, "%s %s: reading the build context: %v", in.cmd, rel, err)
		}
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			link, err := fs.ReadLink(p.opts.Context, rel)
			if err != nil {
				return p.errf(in.line, "%s %s: reading the build context: %v", in.cmd, rel, err)
			}
			if err := add(File{Path: target, Mode: uint32(fs.ModeSymlink | 0o777), Target: link}); err != nil {
				return err
			}
		case e.IsDir():
			if !excluded {
				if err := add(File{Path: target, Mode: uint32(fs.ModeDir | info.Mode().Perm())}); err != nil {
					return err
				}
			}
			if err := p.walk(in, rel, target, add); err != nil {
				return err
			}
		default:
			data, err := p.read(in, rel, info)
			if err != nil {
				return err
			}
			if err := add(File{Path: target, Mode: uint32(info.Mode().Perm()), Data: data}); err != nil {
				return err
			}
		}
	}
	return nil
}

// glob expands a source pattern element by element (a * does not cross a /, as in Docker).
func (p *parser) glob(pattern string) ([]string, error) {
	cur := []string{"."}
	for _, el := range strings.Split(pattern, "/") {
		var next []string
		if !strings.ContainsAny(el, "*?[") {
			for _, c := range cur {
				next = append(next, path.Join(c, el))
			}
			cur = next
			continue
		}
		if _, err := path.Match(el, ""); err != nil {
			return nil, fmt.Errorf("a bad pattern: %v", err)
		}
		for _, c := range cur {
			entries, err := fs.ReadDir(p.opts.Context, c)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("reading the build context: %w", err)
			}
			for _, e := range entries {
				if ok, _ := path.Match(el, e.Name()); ok {
					next = append(next, path.Join(c, e.Name()))
				}
			}
			if len(next) > MaxContextFiles {
				return nil, fmt.Errorf("matches more than %d files", MaxContextFiles)
			}
		}
		cur = next
	}
	out := cur[:0]
	for _, c := range cur {
		if _, err := fs.Lstat(p.opts.Context, c); err == nil && !p.ignore.excluded(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// isArchive says whether ADD would extract data: a tar (possibly compressed), as Docker detects it.
func isArchive(b []byte) bool {
	for _, magic := range [][]byte{{0x1f, 0x8b}, []byte("BZh"), {0xfd, '7', 'z', 'X', 'Z', 0}, {0x28, 0xb5, 0x2f, 0xfd}} {
		if bytes.HasPrefix(b, magic) {
			return true
		}
	}
	return len(b) >= 262 && string(b[257:262]) == "ustar"
}

// ignoreRules is a context's .dockerignore: the last pattern that matches a path (or one of its
// parents) decides, a ! pattern including it again.
type ignoreRules struct {
	rules      []ignoreRule
	exceptions bool
}

type ignoreRule struct {
	re     *regexp.Regexp
	negate bool
}

const maxIgnoreBytes = 64 << 10

func readIgnore(ctx fs.FS) (*ignoreRules, error) {
	r := &ignoreRules{}
	f, err := fs.Stat(ctx, ".dockerignore")
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err == nil && f.Size() > maxIgnoreBytes {
		return nil, fmt.Errorf(".dockerignore is larger than %d KiB", maxIgnoreBytes>>10)
	}
	b, err := fs.ReadFile(ctx, ".dockerignore")
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading .dockerignore: %w", err)
	}
	if len(b) > maxIgnoreBytes {
		return nil, fmt.Errorf(".dockerignore is larger than %d KiB", maxIgnoreBytes>>10)
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		rule := ignoreRule{}
		if line[0] == '!' {
			rule.negate, r.exceptions = true, true
			line = strings.TrimSpace(line[1:])
		}
		line = path.Clean(strings.TrimLeft(line, "/"))
		re, err := regexp.Compile(ignoreRegexp(line))
		if err != nil {
			return nil, fmt.Errorf(".dockerignore: the pattern %q: %v", line, err)
		}
		rule.re = re
		r.rules = append(r.rules, rule)
	}
	return r, nil
}

// ignoreRegexp turns a .dockerignore pattern into a regular expression: ** any number of
// elements, * and ? within one, [...] a class.
func ignoreRegexp(pat string) string {
	var b strings.Builder
	b.WriteString("^")
	rs := []rune(pat)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '*':
			if i+1 < len(rs) && rs[i+1] == '*' {
				i++
				if i+1 < len(rs) && rs[i+1] == '/' {
					i++
					b.WriteString("(.*/)?")
				} else {
					b.WriteString(".*")
				}
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		case '[':
			j := i + 1
			for j < len(rs) && rs[j] != ']' {
				j++
			}
			if j >= len(rs) {
				b.WriteString(regexp.QuoteMeta(string(c)))
				continue
			}
			class := string(rs[i+1 : j])
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i = j
		case '\\':
			if i+1 < len(rs) {
				i++
				b.WriteString(regexp.QuoteMeta(string(rs[i])))
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return b.String()
}

func (r *ignoreRules) excluded(rel string) bool {
	if r == nil || len(r.rules) == 0 {
		return false
	}
	out := false
	for _, rule := range r.rules {
		for p := rel; ; p = path.Dir(p) {
			if rule.re.MatchString(p) {
				out = !rule.negate
				break
			}
			if !strings.Contains(p, "/") {
				break
			}
		}
	}
	return out
}
