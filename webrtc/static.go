package webrtc

import (
	"embed"
	"net/http"
)

// static holds the browser client and the join page, served without a build step.
//
//go:embed static/parley.js static/call.js static/call.html
var static embed.FS

func serveStatic(w http.ResponseWriter, name, contentType string) {
	b, err := static.ReadFile("static/" + name)
	if err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(b)
}

// serveClient serves the ES module /client/parley.js. Any site may import it (the token is
// what authorizes a join), so it is served with CORS open.
func serveClient(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	serveStatic(w, "parley.js", "text/javascript; charset=utf-8")
}

// servePageScript serves the join page's own script.
func servePageScript(w http.ResponseWriter, r *http.Request) {
	serveStatic(w, "call.js", "text/javascript; charset=utf-8")
}

// servePage serves the join page. Its token travels in the URL fragment, which browsers never
// send to the server or in a Referer.
func servePage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self' ws: wss:; media-src 'self' blob: mediastream:; img-src 'self' data:; base-uri 'none'; form-action 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Permissions-Policy", "microphone=(self)")
	h.Set("Cache-Control", "no-store")
	serveStatic(w, "call.html", "text/html; charset=utf-8")
}
