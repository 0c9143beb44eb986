package webrtctest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Join reports a refusal with its code and the socket's close code, and a welcome as such.
func TestJoin(t *testing.T) {
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/signal") {
			http.NotFound(w, r)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		var m msg
		if c.ReadJSON(&m) != nil {
			return
		}
		if m.Token == "good" {
			c.WriteJSON(msg{Type: "welcome", Welcome: &Welcome{Role: "caller", Session: "s1"}})
			return
		}
		c.WriteJSON(msg{Type: "error", Code: "token_used", Message: "the token was already used"})
		c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4401, "token_used"))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w, err := Join(ctx, srv.URL+"/call/abc", "good")
	if err != nil || w.Role != "caller" || w.Session != "s1" {
		t.Fatalf("welcome %+v, %v", w, err)
	}
	_, err = Join(ctx, srv.URL+"/call/abc#token=x", "bad")
	var je *JoinError
	if !errors.As(err, &je) || je.Code != "token_used" || je.CloseCode != 4401 {
		t.Fatalf("refusal %v", err)
	}
}
