package fakes

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func elevenTestPost(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("xi-api-key", key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestElevenLabsFakeValidation(t *testing.T) {
	srv := httptest.NewServer(NewElevenLabsFake(ElevenLabsFakeOptions{APIKey: "xi", Voices: []string{"v1"}}))
	defer srv.Close()
	stream := srv.URL + "/v1/text-to-speech/v1/stream?output_format=pcm_16000"
	cases := []struct {
		name, url, key, body string
		status               int
		status2              string // detail.status, or detail[0].type for 422
	}{
		{"no key", stream, "", `{"text":"hi"}`, 401, "needs_authorization"},
		{"wrong key", stream, "nope", `{"text":"hi"}`, 401, "invalid_api_key"},
		{"not json", stream, "xi", `{`, 422, "json_invalid"},
		{"missing text", stream, "xi", `{"model_id":"m"}`, 422, "missing"},
		{"text not string", stream, "xi", `{"text":5}`, 422, "string_type"},
		{"empty text", stream, "xi", `{"text":"  "}`, 400, "empty_text"},
		{"bad settings", stream, "xi", `{"text":"hi","voice_settings":{"stability":"high"}}`, 422, "float_type"},
		{"mp3 default", srv.URL + "/v1/text-to-speech/v1/stream", "xi", `{"text":"hi"}`, 400, "unsupported_output_format"},
		{"unknown voice", srv.URL + "/v1/text-to-speech/v2/stream?output_format=pcm_16000", "xi", `{"text":"hi"}`, 404, "voice_not_found"},
		{"wrong path", srv.URL + "/v1/text-to-speech/v1/speak", "xi", `{"text":"hi"}`, 404, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := elevenTestPost(t, tc.url, tc.key, tc.body)
			b, _ := io.ReadAll(resp.Body)
			var obj struct {
				Detail struct{ Status, Message string }
			}
			var list struct {
				Detail []struct {
					Type string
					Loc  []any
					Msg  string
				}
			}
			got := ""
			if json.Unmarshal(b, &obj) == nil && obj.Detail.Status != "" {
				got = obj.Detail.Status
			} else if json.Unmarshal(b, &list) == nil && len(list.Detail) > 0 && len(list.Detail[0].Loc) > 0 {
				got = list.Detail[0].Type
			}
			if resp.StatusCode != tc.status || got != tc.status2 {
				t.Errorf("status %d body %s", resp.StatusCode, b)
			}
		})
	}
}

func TestElevenLabsFakeWithTimestamps(t *testing.T) {
	f := NewElevenLabsFake(ElevenLabsFakeOptions{Speed: -1, Chunk: 100e6})
	srv := httptest.NewServer(f)
	defer srv.Close()
	text := "say ça"
	resp := elevenTestPost(t, srv.URL+"/v1/text-to-speech/v/stream/with-timestamps?output_format=pcm_22050", "k", `{"text":"`+text+`","model_id":"eleven_flash_v2_5"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var chars []string
	var audio int
	var last float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			AudioBase64 string `json:"audio_base64"`
			Alignment   struct {
				Characters []string  `json:"characters"`
				Starts     []float64 `json:"character_start_times_seconds"`
				Ends       []float64 `json:"character_end_times_seconds"`
			} `json:"alignment"`
			Normalized *json.RawMessage `json:"normalized_alignment"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Normalized == nil {
			t.Fatalf("line %s: %v", sc.Bytes(), err)
		}
		b, err := base64.StdEncoding.DecodeString(line.AudioBase64)
		if err != nil {
			t.Fatal(err)
		}
		audio += len(b)
		a := line.Alignment
		if len(a.Characters) != len(a.Starts) || len(a.Starts) != len(a.Ends) {
			t.Fatalf("ragged alignment %+v", a)
		}
		for i := range a.Starts {
			if a.Starts[i] < last || a.Ends[i] < a.Starts[i] {
				t.Errorf("times go backwards at %q", a.Characters[i])
			}
			last = a.Starts[i]
		}
		chars = append(chars, a.Characters...)
	}
	if strings.Join(chars, "") != text {
		t.Errorf("aligned %q, want %q", strings.Join(chars, ""), text)
	}
	if want := 6 * 60 * 22050 / 1000 * 2; audio != want {
		t.Errorf("%d audio bytes, want %d", audio, want)
	}
	r := f.Requests()[0]
	if !r.WithTimestamps || r.VoiceID != "v" || r.Body["model_id"] != "eleven_flash_v2_5" {
		t.Errorf("recorded %+v", r)
	}
}
