package fakes

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// WhatsAppFake is Meta's Graph API as the WhatsApp Cloud API uses it, in its documented wire
// shapes: POST /{version}/{phone-number-id}/messages (text, template, mark as read),
// GET /{version}/{waba-id}/message_templates (paged with cursors), GET /{version}/{media-id}
// and the media download URL it names. Errors are Meta's {"error": {message, type, code,
// error_data, fbtrace_id}}. It also builds the webhooks Meta posts (messages and statuses) and
// posts them signed with X-Hub-Signature-256, so a test or the keyless demo can hold a
// conversation (POST /_fakes/whatsapp/inbound does it over HTTP).
type WhatsAppFake struct {
	mu        sync.Mutex
	token     string
	templates []WhatsAppFakeTemplate
	pageSize  int
	media     map[string]whatsAppMedia
	sent      []WhatsAppFakeSent
	reads     []string
	fails     []whatsAppFail
	hc        *http.Client
}

// WhatsAppFakeTemplate is a template of the fake business account, as Graph lists it.
type WhatsAppFakeTemplate struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	Language        string            `json:"language"`
	Status          string            `json:"status"`
	Category        string            `json:"category"`
	ParameterFormat string            `json:"parameter_format"`
	Components      []json.RawMessage `json:"components"`
}

// WhatsAppFakeSent is a message the fake was asked to send.
type WhatsAppFakeSent struct {
	PhoneNumberID string
	To            string // "to", or "recipient" for a business-scoped user id
	Type          string
	Text          string // a text's body
	Template      string // a template's name
	Params        []string
	WAMID         string
	Body          json.RawMessage
}

type whatsAppMedia struct {
	data []byte
	mime string
}

type whatsAppFail struct {
	status, code int
	message      string
}

// NewWhatsAppFake returns the fake with the default templates: order_update (positional,
// approved), welcome (named, approved), spring_sale (pending review).
func NewWhatsAppFake() *WhatsAppFake {
	comp := func(s string) json.RawMessage { return json.RawMessage(s) }
	return &WhatsAppFake{pageSize: 2, media: map[string]whatsAppMedia{}, hc: &http.Client{Timeout: 10 * time.Second},
		templates: []WhatsAppFakeTemplate{
			{ID: "1001", Name: "order_update", Language: "en_US", Status: "APPROVED", Category: "UTILITY", ParameterFormat: "POSITIONAL",
				Components: []json.RawMessage{comp(`{"type":"HEADER","format":"TEXT","text":"Your order"}`),
					comp(`{"type":"BODY","text":"Hello {{1}}, your order {{2}} has shipped. Reply here with any question.","example":{"body_text":[["Ada","#1234"]]}}`),
					comp(`{"type":"FOOTER","text":"Acme Shop"}`)}},
			{ID: "1002", Name: "welcome", Language: "en_US", Status: "APPROVED", Category: "MARKETING", ParameterFormat: "NAMED",
				Components: []json.RawMessage{comp(`{"type":"BODY","text":"Hi {{first_name}}, thanks for joining!","example":{"body_text_named_params":[{"param_name":"first_name","example":"Ada"}]}}`)}},
			{ID: "1003", Name: "spring_sale", Language: "en_US", Status: "PENDING", Category: "MARKETING", ParameterFormat: "POSITIONAL",
				Components: []json.RawMessage{comp(`{"type":"BODY","text":"Spring sale!"}`)}},
		}}
}

// SetToken makes the fake accept only this access token (default: any).
func (f *WhatsAppFake) SetToken(token string) { f.mu.Lock(); f.token = token; f.mu.Unlock() }

// FailNext answers the next n send requests with status and Meta's error code.
func (f *WhatsAppFake) FailNext(n, status, code int, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.fails = append(f.fails, whatsAppFail{status, code, message})
	}
}

// Sent returns the messages sent so far.
func (f *WhatsAppFake) Sent() []WhatsAppFakeSent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]WhatsAppFakeSent(nil), f.sent...)
}

// Reads returns the wamids marked as read.
func (f *WhatsAppFake) Reads() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reads...)
}

// AddMedia stores media the fake serves (as an inbound picture or voice note) and returns its id.
func (f *WhatsAppFake) AddMedia(data []byte, mime string) string {
	id := fmt.Sprint(time.Now().UnixNano())
	f.mu.Lock()
	f.media[id] = whatsAppMedia{data: data, mime: mime}
	f.mu.Unlock()
	return id
}

// Close releases nothing; it is here for symmetry with the other fakes.
func (f *WhatsAppFake) Close() {}

var graphPath = regexp.MustCompile(`^/v[0-9]+\.[0-9]+/([^/]+)(?:/([a-z_]+))?$`)

// IsGraphPath reports whether a request path is one of the fake's.
func IsGraphPath(p string) bool {
	return graphPath.MatchString(p) || strings.HasPrefix(p, "/whatsapp_business/attachments/") || strings.HasPrefix(p, "/_fakes/whatsapp/")
}

func graphError(w http.ResponseWriter, status, code int, typ, msg, details string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	e := map[string]any{"message": msg, "type": typ, "code": code, "fbtrace_id": "A" + randID(10)}
	if details != "" {
		e["error_data"] = map[string]any{"messaging_product": "whatsapp", "details": details}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"error": e})
}

func randID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.TrimRight(base64.StdEncoding.EncodeToString(b), "=")
}

func (f *WhatsAppFake) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	want := f.token
	f.mu.Unlock()
	return ok && tok != "" && (want == "" || tok == want)
}

func (f *WhatsAppFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_fakes/whatsapp/") {
		f.serveControl(w, r)
		return
	}
	if !f.authorized(r) {
		graphError(w, http.StatusUnauthorized, 190, "OAuthException", "Invalid OAuth access token - Cannot parse access token", "")
		return
	}
	if strings.HasPrefix(r.URL.Path, "/whatsapp_business/attachments/") {
		f.mu.Lock()
		m, ok := f.media[r.URL.Query().Get("mid")]
		f.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", m.mime)
		_, _ = w.Write(m.data)
		return
	}
	mt := graphPath.FindStringSubmatch(r.URL.Path)
	switch {
	case mt[2] == "messages" && r.Method == http.MethodPost:
		f.messages(w, r, mt[1])
	case mt[2] == "message_templates" && r.Method == http.MethodGet:
		f.listTemplates(w, r)
	case mt[2] == "" && r.Method == http.MethodGet:
		f.mu.Lock()
		m, ok := f.media[mt[1]]
		f.mu.Unlock()
		if !ok {
			graphError(w, http.StatusBadRequest, 100, "OAuthException", "Unsupported get request. Object with ID '"+mt[1]+"' does not exist", "")
			return
		}
		sum := sha256.Sum256(m.data)
		_ = json.NewEncoder(w).Encode(map[string]any{"messaging_product": "whatsapp", "url": "http://" + r.Host + "/whatsapp_business/attachments/?mid=" + mt[1],
			"mime_type": m.mime, "sha256": hex.EncodeToString(sum[:]), "file_size": len(m.data), "id": mt[1]})
	default:
		graphError(w, http.StatusBadRequest, 100, "OAuthException", "Unsupported "+strings.ToLower(r.Method)+" request.", "")
	}
}

func (f *WhatsAppFake) messages(w http.ResponseWriter, r *http.Request, phoneID string) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var m struct {
		MessagingProduct string `json:"messaging_product"`
		Status           string `json:"status"`
		MessageID        string `json:"message_id"`
		To               string `json:"to"`
		Recipient        string `json:"recipient"`
		Type             string `json:"type"`
		Text             struct {
			Body string `json:"body"`
		} `json:"text"`
		Template struct {
			Name     string `json:"name"`
			Language struct {
				Code string `json:"code"`
			} `json:"language"`
			Components []struct {
				Type       string `json:"type"`
				Parameters []struct {
					Type string `json:"type"`
					Text string `json:"text"`
					Name string `json:"parameter_name"`
				} `json:"parameters"`
			} `json:"components"`
		} `json:"template"`
	}
	if err != nil || json.Unmarshal(raw, &m) != nil {
		graphError(w, http.StatusBadRequest, 100, "OAuthException", "(#100) Invalid parameter", "The request body is not JSON")
		return
	}
	if m.MessagingProduct != "whatsapp" {
		graphError(w, http.StatusBadRequest, 100, "OAuthException", "(#100) The parameter messaging_product is required.", "")
		return
	}
	if m.Status == "read" {
		if m.MessageID == "" {
			graphError(w, http.StatusBadRequest, 100, "OAuthException", "(#100) The parameter message_id is required.", "")
			return
		}
		f.mu.Lock()
		f.reads = append(f.reads, m.MessageID)
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"success": true})
		return
	}
	f.mu.Lock()
	var fail *whatsAppFail
	if len(f.fails) > 0 {
		fail = &f.fails[0]
		f.fails = f.fails[1:]
	}
	f.mu.Unlock()
	if fail != nil {
		graphError(w, fail.status, fail.code, "OAuthException", fail.message, fail.message)
		return
	}
	to := m.To
	if to == "" {
		to = m.Recipient
	}
	if to == "" {
		graphError(w, http.StatusBadRequest, 100, "OAuthException", "(#100) The parameter to is required.", "")
		return
	}
	s := WhatsAppFakeSent{PhoneNumberID: phoneID, To: to, Type: m.Type, Body: raw}
	switch m.Type {
	case "text":
		if m.Text.Body == "" || utf8.RuneCountInString(m.Text.Body) > 4096 {
			graphError(w, http.StatusBadRequest, 100, "OAuthException", "(#100) Param text['body'] must be between 1 and 4096 characters long.", "")
			return
		}
		s.Text = m.Text.Body
	case "template":
		ok := false
		f.mu.Lock()
		for _, t := range f.templates {
			ok = ok || t.Name == m.Template.Name && t.Language == m.Template.Language.Code && t.Status == "APPROVED"
		}
		f.mu.Unlock()
		if !ok {
			graphError(w, http.StatusNotFound, 132001, "OAuthException", "(#132001) Template name does not exist in the translation", "template name ("+m.Template.Name+") does not exist in "+m.Template.Language.Code)
			return
		}
		s.Template = m.Template.Name
		for _, c := range m.Template.Components {
			for _, p := range c.Parameters {
				s.Params = append(s.Params, p.Text)
			}
		}
	default:
		graphError(w, http.StatusBadRequest, 100, "OAuthException", "(#100) Param type must be one of {AUDIO, CONTACTS, DOCUMENT, IMAGE, INTERACTIVE, LOCATION, REACTION, STICKER, TEMPLATE, TEXT, VIDEO}", "")
		return
	}
	s.WAMID = "wamid." + randID(24)
	f.mu.Lock()
	f.sent = append(f.sent, s)
	f.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]any{"messaging_product": "whatsapp",
		"contacts": []any{map[string]any{"input": to, "wa_id": to}},
		"messages": []any{map[string]any{"id": s.WAMID, "message_status": "accepted"}}})
}

func (f *WhatsAppFake) listTemplates(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	all := append([]WhatsAppFakeTemplate(nil), f.templates...)
	size := f.pageSize
	f.mu.Unlock()
	if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n > 0 && n < size {
		size = n
	}
	start := 0
	if a := r.URL.Query().Get("after"); a != "" {
		b, err := base64.StdEncoding.DecodeString(a)
		n, err2 := strconv.Atoi(string(b))
		if err != nil || err2 != nil || n < 0 || n > len(all) {
			graphError(w, http.StatusBadRequest, 100, "OAuthException", "(#100) Invalid cursor", "")
			return
		}
		start = n
	}
	end := min(start+size, len(all))
	paging := map[string]any{"cursors": map[string]any{"before": base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(start))),
		"after": base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(end)))}}
	if end < len(all) {
		paging["next"] = "http://" + r.Host + r.URL.Path + "?after=" + base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(end)))
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"data": all[start:end], "paging": paging})
}

// Webhooks, as Meta posts them (object whatsapp_business_account, field messages).

// WhatsAppInbound is an inbound message to build a webhook of.
type WhatsAppInbound struct {
	PhoneNumberID, DisplayNumber string
	From                         string // the user's wa_id; empty with UserID only (a username user)
	UserID                       string // business-scoped user id
	Name                         string
	WAMID                        string // default a fresh one
	Type                         string // text (default), image, audio, location, sticker
	Text                         string // text body or image caption
	MediaID, MediaMIME           string
	At                           time.Time
}

// InboundPayload builds the webhook of one inbound message.
func (f *WhatsAppFake) InboundPayload(in WhatsAppInbound) []byte {
	if in.WAMID == "" {
		in.WAMID = "wamid." + randID(24)
	}
	if in.Type == "" {
		in.Type = "text"
	}
	if in.At.IsZero() {
		in.At = time.Now()
	}
	contact := map[string]any{"profile": map[string]any{"name": in.Name}}
	msg := map[string]any{"id": in.WAMID, "timestamp": strconv.FormatInt(in.At.Unix(), 10), "type": in.Type}
	if in.From != "" {
		contact["wa_id"], msg["from"] = in.From, in.From
	}
	if in.UserID != "" {
		contact["user_id"], msg["from_user_id"] = in.UserID, in.UserID
	}
	switch in.Type {
	case "text":
		msg["text"] = map[string]any{"body": in.Text}
	case "image":
		msg["image"] = map[string]any{"id": in.MediaID, "mime_type": in.MediaMIME, "sha256": "", "caption": in.Text}
	case "audio":
		msg["audio"] = map[string]any{"id": in.MediaID, "mime_type": "audio/ogg; codecs=opus", "voice": true}
	case "location":
		msg["location"] = map[string]any{"latitude": 38.9, "longitude": -77.0, "name": "Somewhere"}
	case "sticker":
		msg["sticker"] = map[string]any{"id": in.MediaID, "mime_type": "image/webp", "animated": false}
	}
	return webhookEnvelope(in.PhoneNumberID, in.DisplayNumber, map[string]any{"contacts": []any{contact}, "messages": []any{msg}})
}

// StatusPayload builds the webhook of a status update (sent, delivered, read, failed with
// Meta's error code).
func (f *WhatsAppFake) StatusPayload(phoneNumberID, wamid, status, recipient string, code int, title string) []byte {
	st := map[string]any{"id": wamid, "status": status, "timestamp": strconv.FormatInt(time.Now().Unix(), 10), "recipient_id": recipient}
	if code != 0 {
		st["errors"] = []any{map[string]any{"code": code, "title": title, "message": title,
			"error_data": map[string]any{"details": title}, "href": "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/"}}
	}
	return webhookEnvelope(phoneNumberID, "", map[string]any{"statuses": []any{st}})
}

func webhookEnvelope(phoneNumberID, display string, value map[string]any) []byte {
	value["messaging_product"] = "whatsapp"
	value["metadata"] = map[string]any{"display_phone_number": display, "phone_number_id": phoneNumberID}
	b, _ := json.Marshal(map[string]any{"object": "whatsapp_business_account", "entry": []any{map[string]any{
		"id": "102290129340398", "changes": []any{map[string]any{"value": value, "field": "messages"}}}}})
	return b
}

// Sign is the X-Hub-Signature-256 of a body under an app secret.
func Sign(appSecret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(appSecret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// PostWebhook posts a webhook body to url signed with appSecret, as Meta does, and returns the
// status Parley answered.
func (f *WhatsAppFake) PostWebhook(ctx context.Context, url, appSecret string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", Sign(appSecret, body))
	resp, err := f.hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// serveControl is the fake's own control endpoint: POST /_fakes/whatsapp/inbound with
// {"url", "app_secret", "phone_number_id", "from", "text"} posts a signed inbound text to
// Parley (the keyless demo); GET /_fakes/whatsapp/sent lists what was sent.
func (f *WhatsAppFake) serveControl(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_fakes/whatsapp/sent" && r.Method == http.MethodGet:
		_ = json.NewEncoder(w).Encode(f.Sent())
	case r.URL.Path == "/_fakes/whatsapp/inbound" && r.Method == http.MethodPost:
		var in struct {
			URL           string `json:"url"`
			AppSecret     string `json:"app_secret"`
			PhoneNumberID string `json:"phone_number_id"`
			From          string `json:"from"`
			Text          string `json:"text"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil || in.URL == "" || in.PhoneNumberID == "" || in.From == "" {
			http.Error(w, "want JSON with url, app_secret, phone_number_id, from and text", http.StatusBadRequest)
			return
		}
		status, err := f.PostWebhook(r.Context(), in.URL, in.AppSecret, f.InboundPayload(WhatsAppInbound{PhoneNumberID: in.PhoneNumberID, From: in.From, Text: in.Text}))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"parley_status": status})
	default:
		http.NotFound(w, r)
	}
}
