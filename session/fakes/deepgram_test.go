package fakes

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

const dgTestKey = "dg-key"

func dgTestServer(t *testing.T, o DeepgramFakeOptions) (*DeepgramFake, string) {
	t.Helper()
	o.APIKey = dgTestKey
	f := NewDeepgramFake(o)
	srv := httptest.NewServer(f)
	t.Cleanup(func() { f.Close(); srv.Close() })
	return f, "ws" + strings.TrimPrefix(srv.URL, "http")
}

func dgTestDial(t *testing.T, url, query string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	h := http.Header{"Authorization": {"Token " + dgTestKey}}
	c, resp, err := websocket.DefaultDialer.Dial(url+"/v1/listen?"+query, h)
	if c != nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, resp, err
}

// TestDeepgramFakeRefusals: handshake failures carry Deepgram's status and error JSON.
func TestDeepgramFakeRefusals(t *testing.T) {
	_, url := dgTestServer(t, DeepgramFakeOptions{})
	cases := []struct {
		name, auth, path, query string
		status                  int
		code                    string
	}{
		{"no key", "", "/v1/listen", "encoding=linear16&sample_rate=16000", 401, "INVALID_AUTH"},
		{"wrong key", "Token nope", "/v1/listen", "encoding=linear16&sample_rate=16000", 401, "INVALID_AUTH"},
		{"bearer", "Bearer " + dgTestKey, "/v1/listen", "encoding=linear16&sample_rate=16000", 401, "INVALID_AUTH"},
		{"no encoding", "Token " + dgTestKey, "/v1/listen", "sample_rate=16000", 400, "Bad Request"},
		{"opus", "Token " + dgTestKey, "/v1/listen", "encoding=opus&sample_rate=48000", 400, "Bad Request"},
		{"no sample_rate", "Token " + dgTestKey, "/v1/listen", "encoding=linear16", 400, "Bad Request"},
		{"stereo", "Token " + dgTestKey, "/v1/listen", "encoding=linear16&sample_rate=16000&channels=2", 400, "Bad Request"},
		{"bad endpointing", "Token " + dgTestKey, "/v1/listen", "encoding=linear16&sample_rate=16000&endpointing=soon", 400, "Bad Request"},
		{"bad bool", "Token " + dgTestKey, "/v1/listen", "encoding=linear16&sample_rate=16000&interim_results=yes", 400, "Bad Request"},
		{"wrong path", "Token " + dgTestKey, "/v2/listen", "", 404, "NOT_FOUND"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.auth != "" {
				h.Set("Authorization", tc.auth)
			}
			_, resp, err := websocket.DefaultDialer.Dial(url+tc.path+"?"+tc.query, h)
			if !errors.Is(err, websocket.ErrBadHandshake) || resp == nil {
				t.Fatalf("err %v", err)
			}
			var body struct{ ErrCode, ErrMsg, RequestID string }
			b, _ := io.ReadAll(resp.Body)
			json.Unmarshal(b, &body)
			var raw map[string]string
			json.Unmarshal(b, &raw)
			if resp.StatusCode != tc.status || raw["err_code"] != tc.code || raw["err_msg"] == "" || raw["request_id"] == "" {
				t.Errorf("status %d body %s", resp.StatusCode, b)
			}
			if resp.Header.Get("dg-request-id") == "" || resp.Header.Get("dg-error") == "" {
				t.Errorf("headers %v", resp.Header)
			}
		})
	}
	plain, err := http.Get(strings.Replace(url, "ws", "http", 1) + "/v1/listen?encoding=linear16&sample_rate=16000")
	if err != nil {
		t.Fatal(err)
	}
	plain.Body.Close()
	if plain.StatusCode != 401 {
		t.Errorf("plain GET without key: %d", plain.StatusCode)
	}
}

type dgTestMsg struct {
	Type         string  `json:"type"`
	IsFinal      bool    `json:"is_final"`
	SpeechFinal  bool    `json:"speech_final"`
	FromFinalize bool    `json:"from_finalize"`
	Start        float64 `json:"start"`
	Duration     float64 `json:"duration"`
	LastWordEnd  float64 `json:"last_word_end"`
	Timestamp    float64 `json:"timestamp"`
	RequestID    string  `json:"request_id"`
	Channel      json.RawMessage
}

func (m dgTestMsg) transcript() string {
	var ch struct {
		Alternatives []struct{ Transcript string } `json:"alternatives"`
	}
	json.Unmarshal(m.Channel, &ch)
	if len(ch.Alternatives) == 0 {
		return ""
	}
	return ch.Alternatives[0].Transcript
}

// dgTestReadAll reads server messages until the close frame.
func dgTestReadAll(t *testing.T, c *websocket.Conn) ([]dgTestMsg, int) {
	t.Helper()
	var out []dgTestMsg
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	for {
		_, b, err := c.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return out, ce.Code
			}
			t.Fatalf("read: %v", err)
		}
		var m dgTestMsg
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("bad message %s", b)
		}
		out = append(out, m)
	}
}

func dgTestAudio(mulaw bool, rate int, speech bool, d time.Duration) []byte {
	n := int(int64(rate) * int64(d) / int64(time.Second))
	pcm := make([]int16, n)
	if speech {
		pcm = audioTone(500, 0.3, rate, 0, n)
	}
	if !mulaw {
		return audioLE(nil, pcm)
	}
	b := make([]byte, n)
	for i, v := range pcm {
		b[i] = audioLinearToMulaw(v)
	}
	return b
}

// TestDeepgramFakeSession drives the protocol by hand: audio in, the documented messages out.
func TestDeepgramFakeSession(t *testing.T) {
	for _, mulaw := range []bool{false, true} {
		f, url := dgTestServer(t, DeepgramFakeOptions{Script: []string{"one two three four"}, InterimEvery: 100 * time.Millisecond})
		enc, rate := "linear16", 16000
		if mulaw {
			enc, rate = "mulaw", 8000
		}
		c, _, err := dgTestDial(t, url, "encoding="+enc+"&sample_rate="+map[bool]string{false: "16000", true: "8000"}[mulaw]+
			"&interim_results=true&vad_events=true&endpointing=100&utterance_end_ms=200")
		if err != nil {
			t.Fatal(err)
		}
		send := func(speech bool, d time.Duration) {
			for range int(d / (20 * time.Millisecond)) {
				c.WriteMessage(websocket.BinaryMessage, dgTestAudio(mulaw, rate, speech, 20*time.Millisecond))
			}
		}
		send(false, 100*time.Millisecond)
		send(true, 400*time.Millisecond)
		send(false, 300*time.Millisecond)
		c.WriteMessage(websocket.TextMessage, []byte(`{"type":"KeepAlive"}`))
		c.WriteMessage(websocket.TextMessage, []byte(`{"type":"CloseStream"}`))
		msgs, code := dgTestReadAll(t, c)
		if code != websocket.CloseNormalClosure {
			t.Errorf("close code %d", code)
		}
		var kinds []string
		for _, m := range msgs {
			k := m.Type
			if m.Type == "Results" && m.IsFinal {
				k = "Final"
			}
			kinds = append(kinds, k)
		}
		want := "SpeechStarted Results Results Results Results Final UtteranceEnd Metadata"
		if strings.Join(kinds, " ") != want {
			t.Fatalf("%s: messages %v, want %s", enc, kinds, want)
		}
		if msgs[0].Timestamp != 0.1 {
			t.Errorf("SpeechStarted at %v", msgs[0].Timestamp)
		}
		if msgs[1].transcript() != "one" || msgs[2].transcript() != "one two" {
			t.Errorf("interims %q %q", msgs[1].transcript(), msgs[2].transcript())
		}
		if msgs[4].transcript() != "one two three" {
			t.Errorf("last interim %q: the final words are kept for the final", msgs[4].transcript())
		}
		fin := msgs[5]
		if !fin.SpeechFinal || fin.transcript() != "one two three four" || fin.Start != 0.1 || fin.Duration < 0.39 || fin.Duration > 0.41 {
			t.Errorf("final %+v %q", fin, fin.transcript())
		}
		if msgs[6].LastWordEnd < 0.49 || msgs[6].LastWordEnd > 0.51 || msgs[7].RequestID == "" {
			t.Errorf("UtteranceEnd %+v Metadata %+v", msgs[6], msgs[7])
		}
		conn := f.Connections()[0]
		if got := strings.Join(conn.Messages, ","); got != "KeepAlive,CloseStream" || conn.Utterances != 1 || conn.AudioMessages != 40 {
			t.Errorf("recorded %+v", conn)
		}
	}
}

func TestDeepgramFakeFinalizeAndBadMessages(t *testing.T) {
	_, url := dgTestServer(t, DeepgramFakeOptions{Script: []string{"flushed"}})
	c, _, err := dgTestDial(t, url, "encoding=linear16&sample_rate=16000&endpointing=false")
	if err != nil {
		t.Fatal(err)
	}
	c.WriteMessage(websocket.BinaryMessage, dgTestAudio(false, 16000, true, 200*time.Millisecond))
	c.WriteMessage(websocket.TextMessage, []byte(`{"type":"Finalize"}`))
	c.WriteMessage(websocket.TextMessage, []byte(`{"type":"Dance"}`))
	msgs, code := dgTestReadAll(t, c)
	if code != websocket.CloseUnsupportedData || len(msgs) != 1 || !msgs[0].IsFinal || !msgs[0].FromFinalize || msgs[0].SpeechFinal || msgs[0].transcript() != "flushed" {
		t.Errorf("code %d msgs %+v", code, msgs)
	}
}

func TestDeepgramFakeIdleTimeout(t *testing.T) {
	_, url := dgTestServer(t, DeepgramFakeOptions{IdleTimeout: 100 * time.Millisecond})
	c, _, err := dgTestDial(t, url, "encoding=linear16&sample_rate=16000")
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, _, err = c.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseInternalServerErr || ce.Text != "NET-0001" {
		t.Errorf("idle close: %v", err)
	}
}

func TestDeepgramFakeDrop(t *testing.T) {
	f, url := dgTestServer(t, DeepgramFakeOptions{DropAfterSpeech: 100 * time.Millisecond})
	f.ArmDrop()
	c, _, err := dgTestDial(t, url, "encoding=linear16&sample_rate=16000")
	if err != nil {
		t.Fatal(err)
	}
	c.WriteMessage(websocket.BinaryMessage, dgTestAudio(false, 16000, true, 300*time.Millisecond))
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, _, err = c.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseAbnormalClosure {
		t.Errorf("want an abrupt drop (no close frame: 1006), got %v", err)
	}
	if conn := f.Connections()[0]; !conn.Dropped {
		t.Errorf("not recorded as dropped: %+v", conn)
	}
}
