// Package tools runs the tools of conversations: HTTP function tools (a request made from a
// template, with the vault secret applied, through the SSRF guard, bounded in time and size) and
// MCP tools (over warm sessions of the official Go SDK). It implements session.ToolRunner for
// one conversation and records every call.
//
// It must never put a vault secret's value in a result, a record, a log line or an error, and
// never reach a customer's URL except through internal/netguard.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	apptools "github.com/parley-voice/parley/control/app/tools"
	"github.com/parley-voice/parley/control/app/vault"
)

// MaxResponse is the most of a tool's response body Parley reads.
const MaxResponse = 64 << 10

// ErrTooLarge says a response passed MaxResponse.
var ErrTooLarge = errors.New("the response is larger than 64 KB")

// segment is one piece of a compiled template: literal text, or a value to look up.
type segment struct {
	lit string
	key string // "" for literal text
}

type template []segment

var marker = regexp.MustCompile(`\{\{\s*([a-zA-Z0-9_.-]+)\s*\}\}`)

func compile(s string) template {
	var t template
	last := 0
	for _, m := range marker.FindAllStringSubmatchIndex(s, -1) {
		if m[0] > last {
			t = append(t, segment{lit: s[last:m[0]]})
		}
		t = append(t, segment{key: s[m[2]:m[3]]})
		last = m[1]
	}
	if last < len(s) {
		t = append(t, segment{lit: s[last:]})
	}
	return t
}

// values are what templates are filled from: the call's arguments, then the conversation's
// variables.
type values struct {
	args map[string]any
	vars map[string]any
}

func (v values) lookup(key string) (any, bool) {
	if k, ok := strings.CutPrefix(key, "args."); ok {
		x, found := v.args[k]
		return x, found
	}
	if k, ok := strings.CutPrefix(key, "vars."); ok {
		x, found := v.vars[k]
		return x, found
	}
	if x, ok := v.args[key]; ok {
		return x, true
	}
	x, ok := v.vars[key]
	return x, ok
}

func text(x any) string {
	switch t := x.(type) {
	case nil:
		return ""
	case string:
		return t
	case json.Number:
		return t.String()
	case float64, bool, int, int64:
		return fmt.Sprint(t)
	}
	b, _ := json.Marshal(x)
	return string(b)
}

// fill renders t, passing each value through esc.
func (t template) fill(buf *strings.Builder, v values, esc func(string) string) {
	for _, s := range t {
		if s.key == "" {
			buf.WriteString(s.lit)
			continue
		}
		x, _ := v.lookup(s.key)
		buf.WriteString(esc(text(x)))
	}
}

func identity(s string) string { return s }

// urlTemplate renders the path with path escaping and the query with query escaping.
type urlTemplate struct{ path, query template }

func compileURL(raw string) urlTemplate {
	p, q, found := strings.Cut(raw, "?")
	u := urlTemplate{path: compile(p)}
	if found {
		u.query = append(template{{lit: "?"}}, compile(q)...)
	}
	return u
}

func (u urlTemplate) fill(v values) string {
	var b strings.Builder
	u.path.fill(&b, v, url.PathEscape)
	u.query.fill(&b, v, url.QueryEscape)
	return b.String()
}

// bodyTemplate is a JSON body template: string leaves are templates, and a leaf that is exactly
// one marker takes the value itself.
type bodyTemplate struct {
	tree any
	set  bool
}

func compileBody(raw json.RawMessage) (bodyTemplate, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return bodyTemplate{}, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var tree any
	if err := d.Decode(&tree); err != nil {
		return bodyTemplate{}, err
	}
	return bodyTemplate{tree: tree, set: true}, nil
}

func (b bodyTemplate) fill(v values) any { return fillTree(b.tree, v) }

func fillTree(x any, v values) any {
	switch t := x.(type) {
	case string:
		if m := marker.FindStringSubmatchIndex(t); m != nil && m[0] == 0 && m[1] == len(t) {
			val, _ := v.lookup(t[m[2]:m[3]])
			return val
		}
		if !strings.Contains(t, "{{") {
			return t
		}
		var sb strings.Builder
		compile(t).fill(&sb, v, identity)
		return sb.String()
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = fillTree(e, v)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = fillTree(e, v)
		}
		return out
	}
	return x
}

// httpTool is an HTTP tool compiled for a conversation.
type httpTool struct {
	method  string
	url     urlTemplate
	headers []headerTemplate
	body    bodyTemplate
	speak   bool
}

type headerTemplate struct {
	name string
	val  template
}

func compileHTTP(sp apptools.Spec) (*httpTool, error) {
	h := &httpTool{method: sp.Request.Method, url: compileURL(sp.Request.URL), speak: sp.ResultMode == "speak"}
	for k, v := range sp.Request.Headers {
		h.headers = append(h.headers, headerTemplate{name: k, val: compile(v)})
	}
	var err error
	if h.body, err = compileBody(sp.Request.Body); err != nil {
		return nil, fmt.Errorf("tools: body template: %w", err)
	}
	return h, nil
}

// request makes the call's request.
func (h *httpTool) request(ctx context.Context, v values, cred *vault.Credential) (*http.Request, error) {
	u := h.url.fill(v)
	var body io.Reader
	hasBody := false
	if h.body.set {
		b, err := json.Marshal(h.body.fill(v))
		if err != nil {
			return nil, err
		}
		body, hasBody = bytes.NewReader(b), true
	} else if h.method == http.MethodPost || h.method == http.MethodPut || h.method == http.MethodPatch {
		b, err := json.Marshal(v.args)
		if err != nil {
			return nil, err
		}
		body, hasBody = bytes.NewReader(b), true
	}
	req, err := http.NewRequestWithContext(ctx, h.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("the URL cannot be made: %w", err)
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.1")
	req.Header.Set("User-Agent", "Parley-Tools/1")
	var sb strings.Builder
	for _, ht := range h.headers {
		sb.Reset()
		ht.val.fill(&sb, v, identity)
		req.Header.Set(ht.name, strings.NewReplacer("\r", "", "\n", "").Replace(sb.String()))
	}
	if cred != nil {
		if name, val, ok := cred.Header(); ok {
			req.Header.Set(name, val)
		}
		if name, val, ok := cred.Query(); ok {
			q := req.URL.Query()
			q.Set(name, val)
			req.URL.RawQuery = q.Encode()
		}
	}
	return req, nil
}

// do sends the request and reads the bounded, checked response.
func (h *httpTool) do(client *http.Client, req *http.Request, cred *vault.Credential) (string, error) {
	resp, err := client.Do(req)
	if err != nil {
		msg := err.Error()
		if cred != nil {
			msg = cred.Redact(msg)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			msg = ue.Err.Error()
			if cred != nil {
				msg = cred.Redact(msg)
			}
		}
		return "", fmt.Errorf("the request failed: %s", clip(msg, 300))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err != nil {
		return "", fmt.Errorf("the response could not be read: %w", err)
	}
	if len(raw) > MaxResponse {
		return "", ErrTooLarge
	}
	out := string(raw)
	if cred != nil {
		out = cred.Redact(out)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", fmt.Errorf("the service answered %d", resp.StatusCode)
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	isJSON := ct == "application/json" || strings.HasSuffix(ct, "+json")
	switch {
	case isJSON:
		if len(raw) > 0 && !json.Valid(raw) {
			return "", errors.New("the response is not valid JSON")
		}
	case strings.HasPrefix(ct, "text/"), ct == "" && len(raw) == 0:
	default:
		return "", fmt.Errorf("the response's content type %q is neither JSON nor text", ct)
	}
	if h.speak {
		return speakable(out, isJSON), nil
	}
	return out, nil
}

// speakable is what a speak-mode result says: the text itself, a JSON string, or the first of
// the members speak, text, message or result of a JSON object.
func speakable(out string, isJSON bool) string {
	if !isJSON {
		return strings.TrimSpace(out)
	}
	var x any
	if json.Unmarshal([]byte(out), &x) != nil {
		return out
	}
	switch t := x.(type) {
	case string:
		return t
	case map[string]any:
		for _, k := range []string{"speak", "text", "message", "result"} {
			if s, ok := t[k].(string); ok {
				return s
			}
		}
	}
	return out
}
