package fakes

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// oaiSTTTestForm builds a multipart body; file nil leaves the file part out.
func oaiSTTTestForm(fields map[string]string, file []byte) (io.Reader, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	if file != nil {
		fw, _ := mw.CreateFormFile("file", "a.wav")
		fw.Write(file)
	}
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	mw.Close()
	return &b, mw.FormDataContentType()
}

func oaiSTTTestWAV(d time.Duration) []byte {
	n := int(16000 * d / time.Second)
	return audioLE(oaiAudioWAVHeader(nil, n, 16000), audioTone(300, 0.2, 16000, 0, n))
}

func TestOpenAISTTFakeValidation(t *testing.T) {
	f := NewOpenAISTTFake(OpenAISTTFakeOptions{APIKey: "sk-x"})
	srv := httptest.NewServer(f)
	defer srv.Close()
	wav := oaiSTTTestWAV(100 * time.Millisecond)
	cases := []struct {
		name, method, path, auth string
		fields                   map[string]string
		file                     []byte
		status                   int
		param                    any
		code                     any
	}{
		{"no key", "POST", "/v1/audio/transcriptions", "", map[string]string{"model": "m"}, wav, 401, nil, nil},
		{"wrong key", "POST", "/v1/audio/transcriptions", "Bearer sk-y", map[string]string{"model": "m"}, wav, 401, nil, "invalid_api_key"},
		{"no file", "POST", "/v1/audio/transcriptions", "Bearer sk-x", map[string]string{"model": "m"}, nil, 400, "file", nil},
		{"no model", "POST", "/v1/audio/transcriptions", "Bearer sk-x", nil, wav, 400, "model", nil},
		{"not wav", "POST", "/v1/audio/transcriptions", "Bearer sk-x", map[string]string{"model": "m"}, []byte("ID3 mp3 bytes"), 400, "file", nil},
		{"bad format", "POST", "/v1/audio/transcriptions", "Bearer sk-x", map[string]string{"model": "m", "response_format": "srt"}, wav, 400, "response_format", nil},
		{"wrong path", "POST", "/v1/audio/translations", "Bearer sk-x", map[string]string{"model": "m"}, wav, 404, nil, nil},
		{"GET", "GET", "/v1/audio/transcriptions", "Bearer sk-x", nil, nil, 405, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, ct := oaiSTTTestForm(tc.fields, tc.file)
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, body)
			req.Header.Set("Content-Type", ct)
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
			if resp.StatusCode != tc.status || e.Error.Message == "" || e.Error.Type == "" || e.Error.Param != tc.param || e.Error.Code != tc.code {
				t.Errorf("status %d error %+v", resp.StatusCode, e.Error)
			}
		})
	}
}

func TestOpenAISTTFakeFormats(t *testing.T) {
	f := NewOpenAISTTFake(OpenAISTTFakeOptions{Script: []string{"alpha", "beta"}, Latency: 50 * time.Millisecond})
	srv := httptest.NewServer(f)
	defer srv.Close()
	post := func(format string) (string, time.Duration) {
		body, ct := oaiSTTTestForm(map[string]string{"model": "whisper-1", "response_format": format, "language": "en"}, oaiSTTTestWAV(500*time.Millisecond))
		req, _ := http.NewRequest("POST", srv.URL+"/v1/audio/transcriptions", body)
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer anything")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), time.Since(start)
	}
	out, took := post("json")
	if strings.TrimSpace(out) != `{"text":"alpha"}` || took < 50*time.Millisecond {
		t.Errorf("json: %s after %v", out, took)
	}
	out, _ = post("verbose_json")
	var v struct {
		Text     string
		Duration float64
		Segments []struct {
			AvgLogprob float64 `json:"avg_logprob"`
		}
	}
	if json.Unmarshal([]byte(out), &v); v.Text != "beta" || v.Duration != 0.5 || len(v.Segments) != 1 || v.Segments[0].AvgLogprob >= 0 {
		t.Errorf("verbose_json: %s", out)
	}
	if out, _ = post("text"); out != "alpha\n" {
		t.Errorf("text: %q", out)
	}
	r := f.Requests()[0]
	if r.SampleRate != 16000 || r.AudioDuration != 500*time.Millisecond || r.RMS < 0.1 || r.Fields["language"] != "en" || r.Status != 200 {
		t.Errorf("recorded %+v", r)
	}
}
