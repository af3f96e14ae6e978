// Package web is Hangar's web UI: hand-written HTML, CSS and JavaScript modules embedded in the
// binary (docs/decisions.md, "The web UI"), with no build step. The server serves index.html for
// every page under /ui/ (the pages route by path) and the assets under /ui/assets/<version>/,
// where version is a hash of all the assets: their addresses change when any of them does, so
// they are cached for a year, and index.html is never cached.
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"sort"
	"strings"
)

//go:embed static
var static embed.FS

// Base is where the pages are; AssetsPath + version + "/" is where the assets are.
const (
	Base       = "/ui/"
	AssetsPath = "/ui/assets/"
)

// ContentSecurityPolicy allows the pages their own scripts, styles, images and API only: no
// inline script, no outside address, no frames.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

type asset struct {
	body, gz    []byte
	contentType string
	etag        string
}

// UI is the embedded UI, read and compressed once.
type UI struct {
	version string
	assets  map[string]asset // by name under static/, without index.html
	index   []byte
}

// New reads the embedded assets.
func New() *UI {
	u := &UI{assets: map[string]asset{}}
	var names []string
	_ = fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	sort.Strings(names)
	all := sha256.New()
	var indexTmpl []byte
	for _, p := range names {
		body, err := static.ReadFile(p)
		if err != nil {
			panic(err) // embedded: cannot happen
		}
		name := strings.TrimPrefix(p, "static/")
		all.Write([]byte(name + "\x00"))
		all.Write(body)
		if name == "index.html" {
			indexTmpl = body
			continue
		}
		sum := sha256.Sum256(body)
		ct := mime.TypeByExtension(path.Ext(name))
		if path.Ext(name) == ".js" {
			ct = "text/javascript; charset=utf-8"
		}
		u.assets[name] = asset{body: body, gz: gzipped(body), contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	u.version = hex.EncodeToString(all.Sum(nil)[:6])
	var b bytes.Buffer
	t := template.Must(template.New("index").Parse(string(indexTmpl)))
	if err := t.Execute(&b, map[string]string{"Assets": u.AssetsBase()}); err != nil {
		panic(err)
	}
	u.index = b.Bytes()
	return u
}

func gzipped(b []byte) []byte {
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	if out.Len() >= len(b) {
		return nil
	}
	return out.Bytes()
}

// AssetsBase is the address of the assets of this build: AssetsPath + version + "/".
func (u *UI) AssetsBase() string { return AssetsPath + u.version + "/" }

// Weight returns the bytes of every asset a page loads, as sent (gzip where it is smaller) and
// uncompressed: the page weight of docs/benchmarks.md.
func (u *UI) Weight() (sent, raw int) {
	sent, raw = len(u.index), len(u.index)
	for _, a := range u.assets {
		raw += len(a.body)
		if a.gz != nil {
			sent += len(a.gz)
		} else {
			sent += len(a.body)
		}
	}
	return sent, raw
}

// ServeIndex writes the page (every path under Base is this one page; it routes by path).
func (u *UI) ServeIndex(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(u.index)
	}
}

// ServeAsset serves AssetsPath + version + "/" + name. An asset of another version (a page loaded
// before an upgrade) is served too, but not cached: it is today's file.
func (u *UI) ServeAsset(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, AssetsPath)
	version, name, ok := strings.Cut(rest, "/")
	a, found := u.assets[name]
	if !ok || !found {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", a.etag)
	h.Set("Vary", "Accept-Encoding")
	if version == u.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	if match := r.Header.Get("If-None-Match"); match != "" && match == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if a.gz != nil && acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		body = a.gz
	}
	h.Set("Content-Length", itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
			return true
		}
	}
	return false
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
