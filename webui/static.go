package webui

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// static holds the dashboard: plain HTML, CSS and ES modules, plus the
// vendored uPlot chart library. Nothing is fetched from elsewhere.
//
//go:embed static
var static embed.FS

// staticHandler serves index.html at / and the assets under /static/.
func (s *Server) staticHandler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has the directory
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		switch {
		case r.URL.Path == "/":
			http.ServeFileFS(w, r, sub, "index.html")
		case strings.HasPrefix(r.URL.Path, "/static/") && !strings.HasSuffix(r.URL.Path, "/"):
			http.StripPrefix("/static", files).ServeHTTP(w, r)
		default:
			writeError(w, http.StatusNotFound, "not found: "+r.URL.Path)
		}
	})
}
