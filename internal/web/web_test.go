package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestAssets: every asset is served under the version's path with a year's cache, gzip when the
// client takes it (and decompresses to the file), its ETag (304 when it matches); an asset of
// another version is not cached; unknown names are 404; the page is never cached and has the CSP.
func TestAssets(t *testing.T) {
	u := New()
	if !bytes.Contains(u.index, []byte(`src="`+u.AssetsBase()+`app.js"`)) {
		t.Fatalf("index.html does not load app.js from %s:\n%s", u.AssetsBase(), u.index)
	}
	for name, a := range u.assets {
		req := httptest.NewRequest("GET", u.AssetsBase()+name, nil)
		req.Header.Set("Accept-Encoding", "gzip, deflate")
		rec := httptest.NewRecorder()
		u.ServeAsset(rec, req)
		res := rec.Result()
		if res.StatusCode != 200 || res.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" || res.Header.Get("ETag") != a.etag {
			t.Errorf("%s: %d %v", name, res.StatusCode, res.Header)
		}
		body := rec.Body.Bytes()
		if res.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			body, _ = io.ReadAll(zr)
		} else if a.gz != nil {
			t.Errorf("%s: not compressed for a client that takes gzip", name)
		}
		if !bytes.Equal(body, a.body) {
			t.Errorf("%s: the body served is not the file", name)
		}
		req = httptest.NewRequest("GET", u.AssetsBase()+name, nil)
		req.Header.Set("If-None-Match", a.etag)
		rec = httptest.NewRecorder()
		u.ServeAsset(rec, req)
		if rec.Code != http.StatusNotModified {
			t.Errorf("%s with its ETag: %d, want 304", name, rec.Code)
		}
		rec = httptest.NewRecorder()
		u.ServeAsset(rec, httptest.NewRequest("GET", AssetsPath+"0000/"+name, nil))
		if rec.Code != 200 || rec.Header().Get("Cache-Control") != "no-cache" || rec.Header().Get("Content-Encoding") != "" {
			t.Errorf("%s of another version, no gzip asked: %d %v", name, rec.Code, rec.Header())
		}
	}
	for _, p := range []string{u.AssetsBase() + "nope.js", u.AssetsBase() + "index.html", u.AssetsBase(), AssetsPath + "app.js"} {
		rec := httptest.NewRecorder()
		u.ServeAsset(rec, httptest.NewRequest("GET", p, nil))
		if rec.Code != 404 {
			t.Errorf("%s: %d, want 404", p, rec.Code)
		}
	}
	rec := httptest.NewRecorder()
	u.ServeIndex(rec, httptest.NewRequest("GET", "/ui/anything", nil))
	if rec.Header().Get("Cache-Control") != "no-cache" || rec.Header().Get("Content-Security-Policy") != ContentSecurityPolicy {
		t.Errorf("the page's headers: %v", rec.Header())
	}
}

// TestNoInlineScriptNoOutsideAddress: the files obey the CSP (no inline script, handler or style)
// and name no other address (fonts, scripts, images come from the server or nowhere).
var cssComment = regexp.MustCompile(`(?s)/\*.*?\*/`)

func TestNoInlineScriptNoOutsideAddress(t *testing.T) {
	inline := regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]|\son[a-z]+\s*=|\sstyle\s*=|style:\s*'`)
	outside := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|url\(`)
	_ = fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := static.ReadFile(p)
		if strings.HasPrefix(p, "static/vendor/") {
			// Vendored files (vendor_test.go pins them): their licences and comments name their
			// authors' sites, which nothing fetches.
			if strings.HasSuffix(p, ".txt") {
				return nil
			}
			b = cssComment.ReplaceAll(b, nil)
			b = bytes.ReplaceAll(b, []byte("new URL("), nil) // a link's parsing (OSC 8), not a CSS url()
		}
		if m := inline.Find(b); m != nil {
			t.Errorf("%s: inline script or style %q", p, m)
		}
		if m := outside.Find(b); m != nil {
			t.Errorf("%s: names an outside address %q", p, m)
		}
		if strings.HasSuffix(p, ".html") && !bytes.Contains(b, []byte("<noscript>")) {
			t.Errorf("%s: no <noscript> note", p)
		}
		return nil
	})
}

func FuzzServeAsset(f *testing.F) {
	u := New()
	f.Add(u.AssetsBase()+"app.js", "gzip")
	f.Add(AssetsPath+"x/../app.js", "gzip;q=0")
	f.Add(AssetsPath, "")
	f.Fuzz(func(t *testing.T, p, enc string) {
		req, err := http.NewRequest("GET", "http://h"+p, nil)
		if err != nil || !strings.HasPrefix(req.URL.Path, AssetsPath) {
			return
		}
		req.Header.Set("Accept-Encoding", enc)
		rec := httptest.NewRecorder()
		u.ServeAsset(rec, req)
		if rec.Code == 200 {
			_, name, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, AssetsPath), "/")
			if _, ok := u.assets[name]; !ok {
				t.Fatalf("%q served %q, which is no asset", p, name)
			}
		}
	})
}
