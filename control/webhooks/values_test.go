package webhooks_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/app/events"
	appwebhooks "github.com/parley-voice/parley/control/app/webhooks"
	"github.com/parley-voice/parley/control/store"
)

// TestIncludeValuesStripsBodies: a receiver with include_values false gets every event without
// the start values (variables), the caller's metadata and both phone numbers; one with the
// default (true) gets them. Through real deliveries to a local HTTPS receiver, on both stores.
func TestIncludeValuesStripsBodies(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		var mu sync.Mutex
		bodies := map[string][]map[string]any{}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			var ev map[string]any
			if err := json.Unmarshal(b, &ev); err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			mu.Lock()
			bodies[r.URL.Path] = append(bodies[r.URL.Path], ev)
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
		srv.StartTLS()
		t.Cleanup(srv.Close)
		w := newWorld(t, open(t), worldOpts{guard: localGuard(t, writeCert(t, srv)), schedule: short})
		off := false
		full := w.receiver(t, srv.URL+"/full", appwebhooks.WebhookReceiverCreate{})
		bare := w.receiver(t, srv.URL+"/bare", appwebhooks.WebhookReceiverCreate{IncludeValues: &off})
		w.emit(t, map[string]any{"object": "conversation", "id": "c1", "variables": map[string]any{"customer": "Ada"},
			"metadata": map[string]any{"crm": 7}, "from_number": "+14155550100", "to_number": "+14155550101", "status": "ended"})
		w.waitStatus(t, full.ID, 1, store.DeliveryDelivered, 20*time.Second)
		w.waitStatus(t, bare.ID, 1, store.DeliveryDelivered, 20*time.Second)
		mu.Lock()
		defer mu.Unlock()
		if len(bodies["/full"]) != 1 || len(bodies["/bare"]) != 1 {
			t.Fatalf("bodies %v", bodies)
		}
		fd := bodies["/full"][0]["data"].(map[string]any)
		bd := bodies["/bare"][0]["data"].(map[string]any)
		for _, k := range events.Stripped {
			if _, ok := fd[k]; !ok {
				t.Errorf("include_values true: %s missing from %v", k, fd)
			}
			if _, ok := bd[k]; ok {
				t.Errorf("include_values false: %s kept in %v", k, bd)
			}
		}
		if len(events.Stripped) < 4 || bd["status"] != "ended" || bd["id"] != "c1" || !strings.HasPrefix(bodies["/bare"][0]["type"].(string), "conversation.") {
			t.Fatalf("the stripped body lost more than the values: %v (stripped %v)", bodies["/bare"][0], events.Stripped)
		}
	})
}
