// Package whatsapp reaches Meta's Graph API for the messaging-app channel (issue 19): the
// Cloud API's messages endpoint (text, templates, mark as read), a business account's message
// templates, and media downloads, with retries on 429 and 5xx. It implements
// control/app/whatsapp.Graph; its base URL is configurable (PARLEY_WHATSAPP_BASE_URL, or the
// fakes of `parley fakes`).
package whatsapp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	wa "github.com/parley-voice/parley/control/app/whatsapp"
)

// DefaultBaseURL is Meta's Graph API; DefaultVersion the API version Parley speaks.
const (
	DefaultBaseURL = "https://graph.facebook.com"
	DefaultVersion = "v21.0"
)

// Client is a Graph API client. The zero value is not usable: use New.
type Client struct {
	base    string
	version string
	hc      *http.Client
	retries int
	backoff time.Duration
	log     *slog.Logger
}

// Options configure a Client.
type Options struct {
	BaseURL string // default DefaultBaseURL
	Version string // default DefaultVersion
	// Retries of a request answered 429 or 5xx, or failed on the network (default 2); the
	// wait doubles from Backoff (default 250 ms), or is Retry-After when Meta sends it (at
	// most 5 s).
	Retries int
	Backoff time.Duration
	Timeout time.Duration // one attempt (default 20 s)
	Log     *slog.Logger
}

// New returns a client.
func New(o Options) *Client {
	if o.BaseURL == "" {
		o.BaseURL = DefaultBaseURL
	}
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.Retries == 0 {
		o.Retries = 2
	}
	if o.Backoff <= 0 {
		o.Backoff = 250 * time.Millisecond
	}
	if o.Timeout <= 0 {
		o.Timeout = 20 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Client{base: strings.TrimRight(o.BaseURL, "/"), version: o.Version, hc: &http.Client{Timeout: o.Timeout},
		retries: max(o.Retries, 0), backoff: o.Backoff, log: o.Log}
}

var _ wa.Graph = (*Client)(nil)

// graphErrorBody is Meta's error answer.
type graphErrorBody struct {
	Error struct {
		Message   string `json:"message"`
		Type      string `json:"type"`
		Code      int    `json:"code"`
		Subcode   int    `json:"error_subcode"`
		ErrorData struct {
			Details string `json:"details"`
		} `json:"error_data"`
	} `json:"error"`
}

// do sends one request (retried on 429, 5xx and network failures) and decodes a 2xx JSON
// answer into out (nil: the body is returned raw).
func (c *Client) do(ctx context.Context, method, rawURL, token string, body any, out any) ([]byte, string, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, "", err
		}
	}
	wait := c.backoff
	for attempt := 0; ; attempt++ {
		raw, ctype, retryAfter, err := c.once(ctx, method, rawURL, token, payload, out)
		if err == nil || attempt >= c.retries || !wa.Temporary(err) || ctx.Err() != nil {
			return raw, ctype, err
		}
		d := wait
		if retryAfter > 0 {
			d = min(retryAfter, 5*time.Second)
		}
		c.log.InfoContext(ctx, "whatsapp graph: retrying", "attempt", attempt+1, "after", d, "err", err)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, "", ctx.Err()
		case <-t.C:
		}
		wait *= 2
	}
}

func (c *Client) once(ctx context.Context, method, rawURL, token string, payload []byte, out any) ([]byte, string, time.Duration, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return nil, "", 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, "", 0, fmt.Errorf("graph api: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, "", 0, fmt.Errorf("graph api: read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		ge := &wa.GraphError{Status: resp.StatusCode}
		var eb graphErrorBody
		if json.Unmarshal(raw, &eb) == nil {
			ge.Code, ge.Subcode, ge.Type, ge.Message, ge.Details = eb.Error.Code, eb.Error.Subcode, eb.Error.Type, eb.Error.Message, eb.Error.ErrorData.Details
		}
		var ra time.Duration
		if s := resp.Header.Get("Retry-After"); s != "" {
			var n int
			if _, err := fmt.Sscan(s, &n); err == nil && n >= 0 {
				ra = time.Duration(n) * time.Second
			}
		}
		return nil, "", ra, ge
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, "", 0, fmt.Errorf("graph api: answer is not the JSON expected: %w", err)
		}
	}
	return raw, resp.Header.Get("Content-Type"), 0, nil
}

func (c *Client) url(parts ...string) string {
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return c.base + "/" + c.version + "/" + strings.Join(parts, "/")
}

// sendAnswer is the answer of POST /{phone-number-id}/messages.
type sendAnswer struct {
	Messages []struct {
		ID string `json:"id"`
	} `json:"messages"`
}

// recipient addresses a user: "to" with a phone number's digits, "recipient" with a
// business-scoped user id (CC.digits).
func recipient(m map[string]any, to string) map[string]any {
	if strings.Contains(to, ".") {
		m["recipient"] = to
	} else {
		m["to"] = to
	}
	return m
}

func (c *Client) send(ctx context.Context, token, phoneNumberID string, msg map[string]any) (string, error) {
	var a sendAnswer
	if _, _, err := c.do(ctx, http.MethodPost, c.url(phoneNumberID, "messages"), token, msg, &a); err != nil {
		return "", err
	}
	if len(a.Messages) == 0 || a.Messages[0].ID == "" {
		return "", fmt.Errorf("graph api: the answer names no message id")
	}
	return a.Messages[0].ID, nil
}

// SendText sends a text message.
func (c *Client) SendText(ctx context.Context, token, phoneNumberID, to, text string) (string, error) {
	return c.send(ctx, token, phoneNumberID, recipient(map[string]any{"messaging_product": "whatsapp", "recipient_type": "individual",
		"type": "text", "text": map[string]any{"preview_url": false, "body": text}}, to))
}

// SendTemplate sends a template message with its body's parameters.
func (c *Client) SendTemplate(ctx context.Context, token, phoneNumberID, to string, t wa.TemplateSend) (string, error) {
	var params []map[string]any
	for _, p := range t.Positional {
		params = append(params, map[string]any{"type": "text", "text": p})
	}
	names := make([]string, 0, len(t.Named))
	for k := range t.Named {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		params = append(params, map[string]any{"type": "text", "parameter_name": k, "text": t.Named[k]})
	}
	tpl := map[string]any{"name": t.Name, "language": map[string]any{"code": t.Language}}
	if len(params) > 0 {
		tpl["components"] = []map[string]any{{"type": "body", "parameters": params}}
	}
	return c.send(ctx, token, phoneNumberID, recipient(map[string]any{"messaging_product": "whatsapp", "recipient_type": "individual",
		"type": "template", "template": tpl}, to))
}

// MarkRead marks an inbound message as read.
func (c *Client) MarkRead(ctx context.Context, token, phoneNumberID, wamid string) error {
	var a struct {
		Success bool `json:"success"`
	}
	_, _, err := c.do(ctx, http.MethodPost, c.url(phoneNumberID, "messages"), token,
		map[string]any{"messaging_product": "whatsapp", "status": "read", "message_id": wamid}, &a)
	if err == nil && !a.Success {
		err = fmt.Errorf("graph api: marking %s read did not succeed", wamid)
	}
	return err
}

// maxTemplatePages bounds the pages of a template list read.
const maxTemplatePages = 50

// Templates lists every template of a business account, following paging.cursors.after.
func (c *Client) Templates(ctx context.Context, token, businessAccountID string) ([]wa.GraphTemplate, error) {
	var out []wa.GraphTemplate
	after := ""
	for page := 0; page < maxTemplatePages; page++ {
		q := url.Values{"limit": {"100"}, "fields": {"id,name,language,status,category,parameter_format,components"}}
		if after != "" {
			q.Set("after", after)
		}
		var a struct {
			Data   []wa.GraphTemplate `json:"data"`
			Paging struct {
				Cursors struct {
					After string `json:"after"`
				} `json:"cursors"`
				Next string `json:"next"`
			} `json:"paging"`
		}
		if _, _, err := c.do(ctx, http.MethodGet, c.url(businessAccountID, "message_templates")+"?"+q.Encode(), token, nil, &a); err != nil {
			return nil, err
		}
		out = append(out, a.Data...)
		if a.Paging.Next == "" || a.Paging.Cursors.After == "" {
			return out, nil
		}
		after = a.Paging.Cursors.After
	}
	return out, fmt.Errorf("graph api: more than %d pages of templates", maxTemplatePages)
}

// Media reads a media object's URL (GET /{media-id}), then downloads it with the token.
func (c *Client) Media(ctx context.Context, token, mediaID string, limit int64) ([]byte, string, error) {
	var m struct {
		URL      string `json:"url"`
		MimeType string `json:"mime_type"`
		FileSize int64  `json:"file_size"`
	}
	if _, _, err := c.do(ctx, http.MethodGet, c.url(mediaID), token, nil, &m); err != nil {
		return nil, "", err
	}
	if m.URL == "" {
		return nil, "", fmt.Errorf("graph api: media %s has no url", mediaID)
	}
	if m.FileSize > limit {
		return nil, "", fmt.Errorf("graph api: media %s is %d bytes, more than %d", mediaID, m.FileSize, limit)
	}
	data, ctype, err := c.do(ctx, http.MethodGet, m.URL, token, nil, nil)
	if err != nil {
		return nil, "", err
	}
	if int64(len(data)) > limit {
		return nil, "", fmt.Errorf("graph api: media %s is larger than %d bytes", mediaID, limit)
	}
	if m.MimeType != "" {
		ctype = m.MimeType
	}
	return data, ctype, nil
}
