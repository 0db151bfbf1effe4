// Package webapp serves the browser front end: the editor at / and /s/{id},
// the dashboard at /dashboard, the TeX page at /tex, the job browser at /jobs
// (every path under it is the same page, which routes on the client), and the bundled assets under /assets/. The
// bundle is built from web/ by `make web` and embedded, so serving it needs
// no Node.
package webapp

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed dist
var dist embed.FS

// FS is the embedded bundle, rooted at its top (index.html, assets/...).
func FS() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// Handler serves the pages and assets. Pages are revalidated on every load;
// assets keep fixed names (the build is deterministic, without hashes in
// names), so browsers may cache them only for five minutes.
func Handler() http.Handler {
	files := FS()
	mux := http.NewServeMux()
	page := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { serveFile(w, r, files, name, "no-cache") }
	}
	mux.HandleFunc("GET /{$}", page("index.html"))
	mux.HandleFunc("GET /s/{id}", page("index.html"))
	mux.HandleFunc("GET /dashboard", page("dashboard.html"))
	mux.HandleFunc("GET /tex", page("tex.html"))
	mux.HandleFunc("GET /jobs", page("jobs.html"))
	mux.HandleFunc("GET /jobs/", page("jobs.html"))
	mux.HandleFunc("GET /assets/{name}", func(w http.ResponseWriter, r *http.Request) {
		serveFile(w, r, files, "assets/"+r.PathValue("name"), "public, max-age=300")
	})
	return mux
}

func serveFile(w http.ResponseWriter, r *http.Request, files fs.FS, name, cache string) {
	if strings.Contains(name, "..") {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(files, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	if ct, ok := contentTypes[path.Ext(name)]; ok {
		h.Set("Content-Type", ct)
	}
	h.Set("Cache-Control", cache)
	h.Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}
