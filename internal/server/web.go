package server

import (
	"net/http"
	"net/url"
	"sync"

	"github.com/hangar-dev/hangar/internal/web"
)

// The web UI's routes (internal/web; docs/decisions.md, "The web UI"): / goes to /ui/, every page
// under /ui/ is the one page (signed-in browsers only: the others go to the sign-in, and come back
// to where they were), and /ui/assets/ are its scripts and styles, the same for everyone.

var (
	uiOnce sync.Once
	theUI  *web.UI
)

func embeddedUI() *web.UI {
	uiOnce.Do(func() { theUI = web.New() })
	return theUI
}

func (s *Server) webRoutes() {
	ui := embeddedUI()
	toUI := func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, web.Base, http.StatusFound) }
	s.mux.HandleFunc("GET /{$}", toUI)
	s.mux.HandleFunc("GET /ui", toUI)
	s.mux.HandleFunc("GET "+web.AssetsPath, ui.ServeAsset)
	s.mux.HandleFunc("GET "+web.Base, func(w http.ResponseWriter, r *http.Request) {
		_, ok, err := s.sessionOf(r)
		if err != nil {
			s.log.Error("web UI: read browser session", "err", err)
			http.Error(w, "The server could not read your session; its log has the details.", http.StatusInternalServerError)
			return
		}
		if !ok {
			back := r.URL.EscapedPath()
			if r.URL.RawQuery != "" {
				back += "?" + r.URL.RawQuery
			}
			if !SafeReturnPath(back) {
				back = web.Base
			}
			http.Redirect(w, r, "/signin?"+url.Values{"return_to": {back}}.Encode(), http.StatusFound)
			return
		}
		ui.ServeIndex(w, r)
	})
}
