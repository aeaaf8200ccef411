package serve

import (
	"embed"
	"mime"
	"net/http"
	"path"
)

// viewerFiles are the transcript viewer's assets: one HTML page (the
// list and the session page are the same app), its CSS and JavaScript.
// Nothing is fetched from anywhere else.
//
//go:embed viewer
var viewerFiles embed.FS

// viewerCSP forbids the viewer every origin but its own.
const viewerCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// viewerPage handles GET /, /sessions/{id}, /runs, /runs/{run}, /evals
// and /evals/{run}: the viewer's page (the script reads the path). Signing in with ?token= is done by wrap.
func (s *Server) viewerPage(w http.ResponseWriter, r *http.Request) error {
	if r.PathValue("id") != "" {
		if _, err := pathID(r); err != nil {
			return err
		}
	}
	if run := r.PathValue("run"); run != "" {
		if e := checkID(run); e != nil {
			return e
		}
	}
	page, err := viewerFiles.ReadFile("viewer/index.html")
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", viewerCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.Write(page)
	return nil
}

// viewerAsset handles GET /assets/{file}.
func (s *Server) viewerAsset(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("file")
	if name == "index.html" {
		return errorf(http.StatusNotFound, "not_found", "no such asset: %s", name)
	}
	data, err := viewerFiles.ReadFile("viewer/" + path.Base(name))
	if err != nil || path.Base(name) != name {
		return errorf(http.StatusNotFound, "not_found", "no such asset: %s", truncate(name, 40))
	}
	h := w.Header()
	h.Set("Content-Type", mime.TypeByExtension(path.Ext(name)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	w.Write(data)
	return nil
}
