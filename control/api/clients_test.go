package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/cdp"
	"github.com/parley-voice/parley/internal/testenv"
)

// TestRealClients: server-side clients are never taken for browsers, and a web page of another
// origin is. Each client is the real program a customer would use, calling the API over a real
// socket: Node's fetch (which sends sec-fetch-mode: cors), Python's urllib, curl and Go's
// net/http with a live key are accepted; headless Chromium running fetch from a page of another
// origin is refused with a live key and served with a test key (CORS preflight included).
func TestRealClients(t *testing.T) {
	w := newWorld(t, migrate(t, store.Options{DataDir: t.TempDir()}), worldOpts{})
	srv := httptest.NewServer(w.h)
	t.Cleanup(srv.Close)
	live, test := w.keys[kLive], w.keys[kTest]
	me := srv.URL + "/v1/me"

	run := func(t *testing.T, name string, args ...string) string {
		t.Helper()
		bin := testenv.NeedCommand(t, name)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	t.Run("node fetch", func(t *testing.T) {
		got := run(t, "node", "-e", `fetch(process.argv[1], {headers: {Authorization: "Bearer " + process.argv[2]}}).then(async r => console.log(r.status, (await r.json()).object))`, me, live)
		if got != "200 me" {
			t.Fatalf("Node's fetch with a live key: %q, want 200 me", got)
		}
	})
	t.Run("python urllib", func(t *testing.T) {
		got := run(t, "python3", "-c", `import sys, urllib.request, json
r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + sys.argv[2]}))
print(r.status, json.load(r)["object"])`, me, live)
		if got != "200 me" {
			t.Fatalf("Python's urllib with a live key: %q, want 200 me", got)
		}
	})
	t.Run("curl", func(t *testing.T) {
		got := run(t, "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Authorization: Bearer "+live, me)
		if got != "200" {
			t.Fatalf("curl with a live key: %q, want 200", got)
		}
	})
	t.Run("go net/http", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, me, nil)
		req.Header.Set("Authorization", "Bearer "+live)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("Go's net/http with a live key: %d", res.StatusCode)
		}
	})
	t.Run("chromium page of another origin", func(t *testing.T) {
		bin := testenv.NeedCommand(t, "chromium")
		// The page's own origin differs from the API's by its port.
		page := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			rw.Header().Set("Content-Type", "text/html")
			fmt.Fprint(rw, `<!doctype html><title>shop</title><p>shop`)
		}))
		t.Cleanup(page.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b, err := cdp.Launch(ctx, bin)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		p, err := b.NewPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Navigate(ctx, page.URL); err != nil {
			t.Fatal(err)
		}
		call := func(key string) string {
			var got string
			expr := fmt.Sprintf(`fetch(%q, {headers: {Authorization: "Bearer %s"}}).then(async r => r.status + " " + ((await r.json()).code || "ok")).catch(e => "error " + e)`, me, key)
			if err := p.Eval(ctx, expr, &got); err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got := call(live); got != "403 live_key_in_browser" {
			t.Errorf("a page of another origin with a live key: %q, want 403 live_key_in_browser\n%s", got, strings.Join(p.Logs(), "\n"))
		}
		if got := call(test); got != "200 ok" {
			t.Errorf("a page of another origin with a test key: %q, want 200 (CORS lets pages use test keys)\n%s", got, strings.Join(p.Logs(), "\n"))
		}
	})
}
