package tts

import (
	"errors"
	"testing"
)

// TestVendorErrorParsing is the table of vendor error bodies → code and message.
func TestVendorErrorParsing(t *testing.T) {
	tests := []struct {
		name, body, code, msg string
		parse                 func([]byte) (string, string)
	}{
		{"eleven detail object", `{"detail":{"status":"invalid_api_key","message":"Invalid API key"}}`, "invalid_api_key", "Invalid API key", parseElevenError},
		{"eleven 422 list", `{"detail":[{"type":"missing","loc":["body","text"],"msg":"Field required"}]}`, "missing", "[body text]: Field required", parseElevenError},
		{"eleven detail string", `{"detail":"Not Found"}`, "", "Not Found", parseElevenError},
		{"eleven not json", `Bad Gateway`, "", "Bad Gateway", parseElevenError},
		{"openai object", `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, "invalid_api_key", "Incorrect API key provided.", parseOpenAIError},
		{"openai null code", `{"error":{"message":"boom","type":"server_error","code":null}}`, "server_error", "boom", parseOpenAIError},
		{"compatible string", `{"error":"model not loaded"}`, "", "model not loaded", parseOpenAIError},
		{"openai not json", `<html>`, "", "<html>", parseOpenAIError},
	}
	for _, tt := range tests {
		code, msg := tt.parse([]byte(tt.body))
		if code != tt.code || msg != tt.msg {
			t.Errorf("%s: got (%q, %q), want (%q, %q)", tt.name, code, msg, tt.code, tt.msg)
		}
	}
}

func TestProviderErrorClasses(t *testing.T) {
	for status, class := range map[int]error{401: ErrAuth, 403: ErrAuth, 422: ErrBadRequest, 429: ErrRateLimited, 500: ErrUnavailable, 502: ErrUnavailable} {
		e := &ProviderError{Provider: "x", Status: status}
		if !errors.Is(e, class) {
			t.Errorf("%d is not %v", status, class)
		}
		if e.Temporary() != (status >= 429 && status != 403) {
			t.Errorf("%d Temporary = %v", status, e.Temporary())
		}
	}
}

func TestRequestNormalize(t *testing.T) {
	if r, err := (Request{Text: "x"}).normalize(); err != nil || r.SampleRate != 16000 {
		t.Errorf("%+v %v", r, err)
	}
	for _, r := range []Request{{}, {Text: "x", SampleRate: 100}} {
		if _, err := r.normalize(); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%+v: %v", r, err)
		}
	}
	if primaryLanguage("en-US") != "en" || primaryLanguage("pt_BR") != "pt" || primaryLanguage("") != "" {
		t.Error("primaryLanguage")
	}
}
