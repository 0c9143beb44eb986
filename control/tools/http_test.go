package tools

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apptools "github.com/parley-voice/parley/control/app/tools"
	"github.com/parley-voice/parley/control/app/vault"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/netguard"
)

// TestHTTPToolRequest: templates fill the path (escaped), the query (escaped), headers and a
// JSON body (a whole-marker member keeps its JSON type; args before vars; args./vars. choose),
// and each secret type is applied as it says.
func TestHTTPToolRequest(t *testing.T) {
	h, err := compileHTTP(apptools.Spec{Request: apptools.ToolRequest{Method: "POST",
		URL:     "https://api.example.com/orders/{{id}}/x?who={{customer}}&q={{ args.q }}",
		Headers: map[string]string{"X-Who": "{{vars.customer}}"},
		Body:    json.RawMessage(`{"id":"{{id}}","n":"{{n}}","nested":{"who":"Dear {{customer}}"},"list":["{{n}}"],"fixed":true}`)}})
	if err != nil {
		t.Fatal(err)
	}
	v := values{args: map[string]any{"id": "A/1 2", "n": json.Number("7"), "q": "a&b", "customer": "arg wins"}, vars: map[string]any{"customer": "Ada Lovelace"}}
	for _, c := range []vault.Credential{
		vault.Credential{Type: store.SecretBearer}.WithValue("tok"),
		vault.Credential{Type: store.SecretHeader, HeaderName: "X-Api-Key"}.WithValue("tok"),
		vault.Credential{Type: store.SecretBasic, Username: "svc"}.WithValue("tok"),
		vault.Credential{Type: store.SecretQuery, QueryName: "key"}.WithValue("tok"),
	} {
		req, err := h.request(context.Background(), v, &c)
		if err != nil {
			t.Fatal(err)
		}
		if req.URL.Path != "/orders/A/1 2/x" || req.URL.EscapedPath() != "/orders/A%2F1%202/x" {
			t.Fatalf("path %q (%q)", req.URL.Path, req.URL.EscapedPath())
		}
		q := req.URL.Query()
		if q.Get("who") != "arg wins" || q.Get("q") != "a&b" || req.Header.Get("X-Who") != "Ada Lovelace" {
			t.Fatalf("query %v, header %q", q, req.Header.Get("X-Who"))
		}
		body, _ := io.ReadAll(req.Body)
		var got map[string]any
		json.Unmarshal(body, &got)
		if got["n"] != 7.0 || got["id"] != "A/1 2" || got["nested"].(map[string]any)["who"] != "Dear arg wins" || got["list"].([]any)[0] != 7.0 || got["fixed"] != true {
			t.Fatalf("body %s", body)
		}
		switch c.Type {
		case store.SecretBearer:
			if req.Header.Get("Authorization") != "Bearer tok" {
				t.Fatal("bearer")
			}
		case store.SecretHeader:
			if req.Header.Get("X-Api-Key") != "tok" {
				t.Fatal("header")
			}
		case store.SecretBasic:
			if u, p, ok := req.BasicAuth(); !ok || u != "svc" || p != "tok" {
				t.Fatal("basic")
			}
		case store.SecretQuery:
			if q.Get("key") != "tok" {
				t.Fatal("query")
			}
		}
	}
}

// TestHTTPToolResponse: the answer is bounded (64 KB), must be JSON or text and 2xx; a value
// the service echoes back is redacted; speak mode says a JSON message's text; a private
// address is refused at dial time by the guard.
func TestHTTPToolResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/json":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Write([]byte(`{"message":"It is sunny.","key":"` + r.Header.Get("Authorization") + `"}`))
		case "/exact":
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte(strings.Repeat("a", MaxResponse)))
		case "/over":
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte(strings.Repeat("a", MaxResponse+1)))
		case "/html":
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte("x"))
		case "/badjson":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte("{"))
		case "/redirect":
			http.Redirect(w, r, "http://169.254.169.254/", http.StatusFound)
		case "/500":
			http.Error(w, "boom", 500)
		}
	}))
	defer srv.Close()
	open := netguard.MustNew(netguard.Options{AllowPrivate: true}).Client(0)
	cred := vault.Credential{Type: store.SecretBearer}.WithValue("SECRET-VALUE-9")
	call := func(path, mode string, client *http.Client) (string, error) {
		h, _ := compileHTTP(apptools.Spec{Request: apptools.ToolRequest{Method: "GET", URL: srv.URL + path}, ResultMode: mode})
		req, err := h.request(context.Background(), values{}, &cred)
		if err != nil {
			t.Fatal(err)
		}
		return h.do(client, req, &cred)
	}
	out, err := call("/json", "llm", open)
	if err != nil || strings.Contains(out, "SECRET-VALUE-9") || !strings.Contains(out, "[vault secret]") {
		t.Fatalf("json: %q %v", out, err)
	}
	if out, err := call("/json", "speak", open); err != nil || out != "It is sunny." {
		t.Fatalf("speak: %q %v", out, err)
	}
	if out, err := call("/exact", "llm", open); err != nil || len(out) != MaxResponse {
		t.Fatalf("64 KB exactly: %d %v", len(out), err)
	}
	for path, want := range map[string]string{"/over": "64 KB", "/html": "content type", "/badjson": "not valid JSON", "/500": "answered 500", "/redirect": "answered 302"} {
		if _, err := call(path, "llm", open); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
	}
	strict := netguard.MustNew(netguard.Options{}).Client(0)
	_, err = call("/json", "llm", strict)
	if err == nil || !strings.Contains(err.Error(), "not allowed") || strings.Contains(err.Error(), "SECRET-VALUE-9") {
		t.Fatalf("a private address at dial time: %v", err)
	}
}
