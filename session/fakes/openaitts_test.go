package fakes

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestOpenAITTSFakeValidation(t *testing.T) {
	srv := httptest.NewServer(NewOpenAITTSFake(OpenAITTSFakeOptions{APIKey: "sk-x"}))
	defer srv.Close()
	long := strings.Repeat("a", 4097)
	cases := []struct {
		name, auth, body string
		status           int
		param, code      any
	}{
		{"no key", "", `{}`, 401, nil, nil},
		{"wrong key", "Bearer sk-y", `{}`, 401, nil, "invalid_api_key"},
		{"bad json", "Bearer sk-x", `{`, 400, nil, nil},
		{"no model", "Bearer sk-x", `{"input":"hi","voice":"alloy"}`, 400, "model", nil},
		{"no input", "Bearer sk-x", `{"model":"tts-1","voice":"alloy"}`, 400, "input", nil},
		{"no voice", "Bearer sk-x", `{"model":"tts-1","input":"hi"}`, 400, "voice", nil},
		{"too long", "Bearer sk-x", `{"model":"tts-1","input":"` + long + `","voice":"alloy","response_format":"pcm"}`, 400, "input", "string_above_max_length"},
		{"mp3 default", "Bearer sk-x", `{"model":"tts-1","input":"hi","voice":"alloy"}`, 400, "response_format", nil},
		{"bad format", "Bearer sk-x", `{"model":"tts-1","input":"hi","voice":"alloy","response_format":"ogg"}`, 400, "response_format", "invalid_value"},
		{"bad speed", "Bearer sk-x", `{"model":"tts-1","input":"hi","voice":"alloy","response_format":"pcm","speed":5}`, 400, "speed", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+"/v1/audio/speech", strings.NewReader(tc.body))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct {
				Error struct {
					Message, Type string
					Param, Code   any
				}
			}
			json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != tc.status || e.Error.Message == "" || e.Error.Param != tc.param || e.Error.Code != tc.code {
				t.Errorf("status %d error %+v", resp.StatusCode, e.Error)
			}
		})
	}
}

func TestOpenAITTSFakeStreams(t *testing.T) {
	f := NewOpenAITTSFake(OpenAITTSFakeOptions{FirstByte: 80 * time.Millisecond, Speed: 10})
	srv := httptest.NewServer(f)
	defer srv.Close()
	for _, format := range []string{"pcm", "wav"} {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/audio/speech", strings.NewReader(`{"model":"tts-1","input":"hello","voice":"alloy","response_format":"`+format+`"}`))
		req.Header.Set("Authorization", "Bearer k")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		ttfb := time.Since(start)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || ttfb < 80*time.Millisecond {
			t.Errorf("%s: status %d after %v", format, resp.StatusCode, ttfb)
		}
		pcm := b
		if format == "wav" {
			w, err := audioParseWAV(b)
			if err != nil || w.Rate != OpenAITTSRate {
				t.Fatalf("wav: %+v %v", w, err)
			}
			pcm = w.Data
		}
		if want := 5 * 60 * OpenAITTSRate / 1000 * 2; len(pcm) != want {
			t.Errorf("%s: %d bytes, want %d", format, len(pcm), want)
		}
		if r := audioRMS(audioSamplesLE(pcm)); r < 0.2 {
			t.Errorf("%s: RMS %v", format, r)
		}
	}
}
