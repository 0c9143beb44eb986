package fakes

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// scriptSSE is one raw server-sent event as a fake wrote it.
type scriptSSE struct {
	event string
	data  string
	at    time.Duration // when it arrived, from the request
}

// scriptReadSSE reads a fake's stream. The fakes write LF-terminated "event:" and "data:" lines.
func scriptReadSSE(t *testing.T, r io.Reader, start time.Time) []scriptSSE {
	t.Helper()
	var out []scriptSSE
	var cur scriptSSE
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data == "" {
				t.Fatalf("event without data: %+v", cur)
			}
			cur.at = time.Since(start)
			out = append(out, cur)
			cur = scriptSSE{}
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if cur.data != "" {
				t.Fatalf("the fakes write one data line per event")
			}
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	if cur.data != "" {
		t.Fatalf("unterminated event %+v", cur)
	}
	return out
}

// scriptPost sends a JSON body with headers and returns the response.
func scriptPost(t *testing.T, url string, hdr map[string]string, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func scriptDecode(t *testing.T, r io.Reader) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestScriptPacerLatency(t *testing.T) {
	f := NewOpenAIChatFake(ScriptOptions{Script: NewScript(ScriptTurn{Text: "a b c d e"}), FirstTokenDelay: 80 * time.Millisecond, TokensPerSecond: 50})
	srv := httptest.NewServer(f)
	defer srv.Close()
	start := time.Now()
	resp := scriptPost(t, srv.URL+"/v1/chat/completions", nil, `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	evs := scriptReadSSE(t, resp.Body, start)
	var tokens []time.Duration
	for _, ev := range evs {
		if strings.Contains(ev.data, `"content":"`) && !strings.Contains(ev.data, `"content":""`) {
			tokens = append(tokens, ev.at)
		}
	}
	if len(tokens) != 5 {
		t.Fatalf("%d token chunks", len(tokens))
	}
	if tokens[0] < 80*time.Millisecond {
		t.Fatalf("first token after %v, want >= 80ms", tokens[0])
	}
	if span := tokens[4] - tokens[0]; span < 4*20*time.Millisecond {
		t.Fatalf("5 tokens at 50/s spanned %v, want >= 80ms", span)
	}
	// SetLatency takes effect for the next request.
	f.SetLatency(0, 0)
	start = time.Now()
	resp = scriptPost(t, srv.URL+"/v1/chat/completions", nil, `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	evs = scriptReadSSE(t, resp.Body, start)
	if last := evs[len(evs)-1]; last.data != "[DONE]" || last.at > 2*time.Second {
		t.Fatalf("last event %+v", last)
	}
}

func TestScriptStallReleasedByClose(t *testing.T) {
	f := NewAnthropicFake(ScriptOptions{})
	srv := httptest.NewServer(f)
	defer srv.Close()
	f.StallNext(1, 0)
	done := make(chan []scriptSSE, 1)
	go func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/v1/messages",
			strings.NewReader(`{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- nil
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- []scriptSSE{{data: string(b)}}
	}()
	// The stall holds the response open until Close.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for len(f.Requests()) == 0 {
		<-tick.C
	}
	select {
	case <-done:
		t.Fatal("stalled response ended by itself")
	case <-time.After(50 * time.Millisecond):
	}
	f.Close()
	f.Close()
	select {
	case got := <-done:
		if got == nil || !strings.Contains(got[0].data, "message_start") || strings.Contains(got[0].data, "message_stop") {
			t.Fatalf("body %v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the stalled response")
	}
}

func TestScriptFailNextThenSucceed(t *testing.T) {
	f := NewOpenAIChatFake(ScriptOptions{})
	srv := httptest.NewServer(f)
	defer srv.Close()
	f.FailNext(2, 0, 1500*time.Millisecond)
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`
	for i := range 2 {
		resp := scriptPost(t, srv.URL+"/v1/chat/completions", nil, body)
		if resp.StatusCode != 500 || resp.Header.Get("Retry-After") != "2" || resp.Header.Get("Retry-After-Ms") != "1500" {
			t.Fatalf("attempt %d: %d %v", i, resp.StatusCode, resp.Header)
		}
		e := scriptDecode(t, resp.Body)["error"].(map[string]any)
		if e["type"] != "server_error" || e["message"] == "" {
			t.Fatalf("error body %v", e)
		}
	}
	resp := scriptPost(t, srv.URL+"/v1/chat/completions", nil, body)
	if resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	reqs := f.Requests()
	if len(reqs) != 3 || reqs[0].Status != 500 || reqs[2].Status != 200 || reqs[2].Body["model"] != "m" || !bytes.Equal(reqs[2].Raw, []byte(body)) {
		t.Fatalf("recorded %+v", reqs)
	}
}
