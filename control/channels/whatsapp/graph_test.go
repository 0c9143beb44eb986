package whatsapp

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	wa "github.com/parley-voice/parley/control/app/whatsapp"
	"github.com/parley-voice/parley/session/fakes"
)

// The client against the fake Graph API: text and template messages in Meta's shapes, mark as
// read, every page of the templates, a media download, a 429 retried, and Meta's error codes
// read (131047 is not temporary, 130429 is).
func TestGraphClientThroughFake(t *testing.T) {
	f := fakes.NewWhatsAppFake()
	f.SetToken("EAAG-token")
	srv := httptest.NewServer(fakes.NewServerWith(f))
	defer srv.Close()
	c := New(Options{BaseURL: srv.URL, Backoff: time.Millisecond})
	ctx := t.Context()
	id, err := c.SendText(ctx, "EAAG-token", "106540352242922", "16505551234", "Hello there")
	if err != nil || len(id) < 10 {
		t.Fatalf("SendText: %q %v", id, err)
	}
	if _, err := c.SendTemplate(ctx, "EAAG-token", "106540352242922", "US.13491208655302741918", wa.TemplateSend{Name: "order_update", Language: "en_US", Positional: []string{"Ada", "#7"}}); err != nil {
		t.Fatal(err)
	}
	sent := f.Sent()
	if len(sent) != 2 || sent[0].Text != "Hello there" || sent[1].To != "US.13491208655302741918" || len(sent[1].Params) != 2 || sent[1].Params[1] != "#7" {
		t.Fatalf("sent: %+v", sent)
	}
	if err := c.MarkRead(ctx, "EAAG-token", "106540352242922", id); err != nil || len(f.Reads()) != 1 {
		t.Fatalf("MarkRead: %v %v", err, f.Reads())
	}
	tpls, err := c.Templates(ctx, "EAAG-token", "102290129340398")
	if err != nil || len(tpls) != 3 || tpls[2].Name != "spring_sale" {
		t.Fatalf("templates over pages: %+v %v", tpls, err)
	}
	mid := f.AddMedia([]byte("\x89PNG..."), "image/png")
	data, mime, err := c.Media(ctx, "EAAG-token", mid, 1<<20)
	if err != nil || string(data) != "\x89PNG..." || mime != "image/png" {
		t.Fatalf("media: %q %q %v", data, mime, err)
	}
	f.FailNext(1, 429, 130429, "Rate limit hit")
	if _, err := c.SendText(ctx, "EAAG-token", "106540352242922", "16505551234", "again"); err != nil {
		t.Fatalf("a 429 is retried: %v", err)
	}
	f.FailNext(3, 503, 131016, "Service unavailable")
	_, err = c.SendText(ctx, "EAAG-token", "106540352242922", "16505551234", "again")
	var ge *wa.GraphError
	if !errors.As(err, &ge) || ge.Status != 503 || !ge.Temporary() {
		t.Fatalf("three 503s: %v", err)
	}
	f.FailNext(1, 400, 131047, "Re-engagement message")
	_, err = c.SendText(ctx, "EAAG-token", "106540352242922", "16505551234", "late")
	if !errors.As(err, &ge) || ge.Code != 131047 || ge.Temporary() {
		t.Fatalf("131047: %v", err)
	}
	if _, err := c.SendText(ctx, "wrong", "106540352242922", "16505551234", "x"); !errors.As(err, &ge) || ge.Code != 190 || ge.Status != 401 {
		t.Fatalf("a wrong token: %v", err)
	}
	if _, err := c.SendTemplate(ctx, "EAAG-token", "1", "1", wa.TemplateSend{Name: "spring_sale", Language: "en_US"}); !errors.As(err, &ge) || ge.Code != 132001 {
		t.Fatalf("a template not approved: %v", err)
	}
}
