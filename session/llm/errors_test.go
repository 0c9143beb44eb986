package llm

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRetryableStatus(t *testing.T) {
	for status, want := range map[int]bool{
		400: false, 401: false, 403: false, 404: false, 408: true, 409: true, 413: false, 422: false,
		425: true, 429: true, 500: true, 502: true, 503: true, 504: true, 529: true,
	} {
		if got := retryableStatus(status); got != want {
			t.Fatalf("%d: %v", status, got)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		h    map[string]string
		want time.Duration
	}{
		{map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "1"}, 250 * time.Millisecond},
		{map[string]string{"Retry-After": now.Add(10 * time.Second).Format(http.TimeFormat)}, 10 * time.Second},
		{map[string]string{"Retry-After": now.Add(-10 * time.Second).Format(http.TimeFormat)}, 0},
		{map[string]string{"Retry-After": "soon"}, 0},
		{map[string]string{"Retry-After": "-1"}, 0},
		{map[string]string{"Retry-After-Ms": "x", "Retry-After": "2"}, 2 * time.Second},
		{map[string]string{}, 0},
	}
	for _, c := range cases {
		h := http.Header{}
		for k, v := range c.h {
			h.Set(k, v)
		}
		if got := parseRetryAfter(h, now); got != c.want {
			t.Fatalf("%v: %v, want %v", c.h, got, c.want)
		}
	}
}

func TestParseErrorBody(t *testing.T) {
	cases := []struct{ body, code, msg string }{
		{`{"error":{"message":"Incorrect API key","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, "invalid_api_key", "Incorrect API key"},
		{`{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}`, "invalid_request_error", "bad"},
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded_error", "Overloaded"},
		{`{"error":"model 'x' not found"}`, "", "model 'x' not found"},
		{`{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`, "unavailable_error", "Loading model"},
		{`{"error":{"code":500,"message":"oops"}}`, "500", "oops"},
		{`{"message":"plain"}`, "", "plain"},
		{`<html>Bad Gateway</html>`, "", "<html>Bad Gateway</html>"},
		{strings.Repeat("x", 2000), "", strings.Repeat("x", 512)},
	}
	for _, c := range cases {
		code, msg := parseErrorBody([]byte(c.body))
		if code != c.code || msg != c.msg {
			t.Fatalf("%s: %q %q", c.body, code, msg)
		}
	}
}

func TestErrorFormatAndUnwrap(t *testing.T) {
	e := &Error{Provider: "openai", Status: 429, Code: "rate_limit_exceeded", Message: "slow down", Retryable: true, BeforeFirstByte: true}
	if got := e.Error(); got != "llm: openai: 429 rate_limit_exceeded: slow down" {
		t.Fatal(got)
	}
	e = &Error{Provider: "anthropic", Code: CodeConnection, Message: "reset", Err: io.ErrUnexpectedEOF}
	if got := e.Error(); got != "llm: anthropic: connection: reset (mid-stream)" {
		t.Fatal(got)
	}
	var err error = e
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatal("Unwrap")
	}
}

func TestRetryableCode(t *testing.T) {
	for code, want := range map[string]bool{"overloaded_error": true, "api_error": true, "rate_limit_error": true,
		"server_error": true, "invalid_request_error": false, "authentication_error": false, "": false} {
		if retryableCode(code) != want {
			t.Fatalf("%q", code)
		}
	}
}
