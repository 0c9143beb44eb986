package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/session/fakes"
)

func TestStreamText(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, v, fakes.ScriptOptions{Script: fakes.NewScript(fakes.ScriptTurn{Text: "Hello there, how are you today?"})}, Config{})
			got, err := run(t, r.client, userSays("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if got.text != "Hello there, how are you today?" {
				t.Fatalf("text %q", got.text)
			}
			deltas := 0
			for _, ev := range got.events {
				if ev.Kind == TextDelta {
					deltas++
				}
			}
			if deltas != 6 {
				t.Fatalf("%d text deltas, want one per word (6)", deltas)
			}
			if last := got.events[len(got.events)-1]; last.Kind != Done {
				t.Fatalf("last event %v, want Done", last.Kind)
			}
			if got.done.FinishReason != FinishStop {
				t.Fatalf("finish %q", got.done.FinishReason)
			}
			if got.done.Usage.InputTokens <= 0 || got.done.Usage.OutputTokens < 6 {
				t.Fatalf("usage %+v", got.done.Usage)
			}
			// The fallback after the script: an echo of the last user text.
			got, err = run(t, r.client, userSays("what time is it"))
			if err != nil {
				t.Fatal(err)
			}
			if got.text != "You said: what time is it" {
				t.Fatalf("fallback text %q", got.text)
			}
		})
	}
}

// TestStreamParallelToolCallRoundTrip: the model calls two tools at once, with arguments streamed
// in small pieces; the results go back and the model answers. The fakes reject any request whose
// tool results do not pair up with the calls, so the second request succeeding checks the shape.
func TestStreamParallelToolCallRoundTrip(t *testing.T) {
	weather := `{"city":"Paris","units":"metric","when":{"day":"today","hours":[9,12,18]}}`
	clock := `{"timezone":"Europe/Paris"}`
	tools := []Tool{
		{Name: "get_weather", Description: "Weather for a city", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
		{Name: "get_time", Description: "Local time", Parameters: json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string"}}}`)},
	}
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			script := fakes.NewScript(
				fakes.ScriptTurn{Text: "Let me check.", ToolCalls: []fakes.ScriptToolCall{
					{Name: "get_weather", Args: json.RawMessage(weather)},
					{Name: "get_time", Args: json.RawMessage(clock)},
				}},
				fakes.ScriptTurn{Text: "Sunny, and it is ten past nine."},
			)
			r := newRig(t, v, fakes.ScriptOptions{Script: script, ArgChunkBytes: 5}, Config{})
			req := Request{System: "Be helpful.", Tools: tools, ToolChoice: ToolChoiceAuto,
				Messages: []Message{{Role: RoleUser, Content: "Weather and time in Paris?"}}}
			got, err := run(t, r.client, req)
			if err != nil {
				t.Fatal(err)
			}
			if got.text != "Let me check." {
				t.Fatalf("text %q", got.text)
			}
			if len(got.calls) != 2 {
				t.Fatalf("%d calls, want 2: %+v", len(got.calls), got.calls)
			}
			if got.calls[0].Name != "get_weather" || !jsonEqual(t, got.calls[0].Arguments, []byte(weather)) {
				t.Fatalf("call 0 = %s %s", got.calls[0].Name, got.calls[0].Arguments)
			}
			if got.calls[1].Name != "get_time" || !jsonEqual(t, got.calls[1].Arguments, []byte(clock)) {
				t.Fatalf("call 1 = %s %s", got.calls[1].Name, got.calls[1].Arguments)
			}
			if got.calls[0].ID == "" || got.calls[0].ID == got.calls[1].ID {
				t.Fatalf("call ids %q %q", got.calls[0].ID, got.calls[1].ID)
			}
			if got.done.FinishReason != FinishToolCalls {
				t.Fatalf("finish %q", got.done.FinishReason)
			}
			// The calls must come out after all their pieces, before Done.
			if k := got.events[len(got.events)-1].Kind; k != Done {
				t.Fatalf("last event %v", k)
			}

			req.Messages = append(req.Messages,
				Message{Role: RoleAssistant, Content: got.text, ToolCalls: got.calls},
				Message{Role: RoleTool, ToolCallID: got.calls[0].ID, Content: `{"sky":"sunny","temp_c":21}`},
				Message{Role: RoleTool, ToolCallID: got.calls[1].ID, Content: "09:10"},
			)
			got2, err := run(t, r.client, req)
			if err != nil {
				t.Fatal(err)
			}
			if got2.text != "Sunny, and it is ten past nine." {
				t.Fatalf("text %q", got2.text)
			}
			reqs := r.fake.Requests()
			if len(reqs) != 2 || reqs[1].Status != http.StatusOK {
				t.Fatalf("requests %d, last status %d", len(reqs), reqs[len(reqs)-1].Status)
			}
			checkToolRoundTripShape(t, v.name, reqs[1].Body, got.calls)
		})
	}
}

// checkToolRoundTripShape checks how the assistant's calls and the tool results were sent back.
func checkToolRoundTripShape(t *testing.T, vendor string, body map[string]any, calls []ToolCall) {
	t.Helper()
	msgs := body["messages"].([]any)
	switch vendor {
	case "openai":
		// system, user, assistant (tool_calls), tool, tool
		if len(msgs) != 5 {
			t.Fatalf("%d messages", len(msgs))
		}
		a := msgs[2].(map[string]any)
		if a["role"] != "assistant" || a["content"] != "Let me check." {
			t.Fatalf("assistant message %v", a)
		}
		tcs := a["tool_calls"].([]any)
		for i, tv := range tcs {
			tc := tv.(map[string]any)
			fn := tc["function"].(map[string]any)
			args, isString := fn["arguments"].(string)
			if tc["id"] != calls[i].ID || tc["type"] != "function" || fn["name"] != calls[i].Name || !isString || !jsonEqual(t, []byte(args), calls[i].Arguments) {
				t.Fatalf("tool_calls[%d] = %v", i, tc)
			}
		}
		for i := range 2 {
			m := msgs[3+i].(map[string]any)
			if m["role"] != "tool" || m["tool_call_id"] != calls[i].ID {
				t.Fatalf("tool message %d = %v", i, m)
			}
		}
		if msgs[4].(map[string]any)["content"] != "09:10" {
			t.Fatalf("tool content %v", msgs[4])
		}
	case "anthropic":
		// user, assistant (text + 2 tool_use), user (2 tool_result)
		if len(msgs) != 3 {
			t.Fatalf("%d messages: %v", len(msgs), msgs)
		}
		a := msgs[1].(map[string]any)
		blocks := a["content"].([]any)
		if a["role"] != "assistant" || len(blocks) != 3 || blocks[0].(map[string]any)["text"] != "Let me check." {
			t.Fatalf("assistant message %v", a)
		}
		for i := range 2 {
			b := blocks[1+i].(map[string]any)
			in, _ := json.Marshal(b["input"])
			if b["type"] != "tool_use" || b["id"] != calls[i].ID || b["name"] != calls[i].Name || !jsonEqual(t, in, calls[i].Arguments) {
				t.Fatalf("tool_use %d = %v", i, b)
			}
		}
		u := msgs[2].(map[string]any)
		results := u["content"].([]any)
		if u["role"] != "user" || len(results) != 2 {
			t.Fatalf("tool results message %v", u)
		}
		for i := range 2 {
			b := results[i].(map[string]any)
			if b["type"] != "tool_result" || b["tool_use_id"] != calls[i].ID {
				t.Fatalf("tool_result %d = %v", i, b)
			}
		}
		if results[1].(map[string]any)["content"] != "09:10" {
			t.Fatalf("tool_result content %v", results[1])
		}
	}
}

func TestStreamImages(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake image bytes")
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, v, fakes.ScriptOptions{}, Config{})
			req := Request{Messages: []Message{{Role: RoleUser, Content: "What is this?", Images: []Image{
				{MIME: "image/png", Data: png},
				{URL: "data:image/jpeg;base64,/9j/4AAQ"},
			}}}}
			got, err := run(t, r.client, req)
			if err != nil {
				t.Fatal(err)
			}
			if got.text != "You said: What is this?" {
				t.Fatalf("text %q", got.text)
			}
			m := r.fake.Requests()[0].Body["messages"].([]any)
			parts := m[len(m)-1].(map[string]any)["content"].([]any)
			if len(parts) != 3 {
				t.Fatalf("content %v", parts)
			}
			switch v.name {
			case "openai":
				if p := parts[0].(map[string]any); p["type"] != "text" || p["text"] != "What is this?" {
					t.Fatalf("part 0 %v", p)
				}
				u := parts[1].(map[string]any)["image_url"].(map[string]any)["url"]
				if u != "data:image/png;base64,iVBORw0KGgpmYWtlIGltYWdlIGJ5dGVz" {
					t.Fatalf("image url %v", u)
				}
				if u := parts[2].(map[string]any)["image_url"].(map[string]any)["url"]; u != "data:image/jpeg;base64,/9j/4AAQ" {
					t.Fatalf("image url %v", u)
				}
			case "anthropic":
				// Images first, then the text, as Anthropic recommends.
				src := parts[0].(map[string]any)["source"].(map[string]any)
				if parts[0].(map[string]any)["type"] != "image" || src["type"] != "base64" || src["media_type"] != "image/png" || src["data"] != "iVBORw0KGgpmYWtlIGltYWdlIGJ5dGVz" {
					t.Fatalf("image block %v", parts[0])
				}
				src = parts[1].(map[string]any)["source"].(map[string]any)
				if src["media_type"] != "image/jpeg" || src["data"] != "/9j/4AAQ" {
					t.Fatalf("image block %v", parts[1])
				}
				if p := parts[2].(map[string]any); p["type"] != "text" || p["text"] != "What is this?" {
					t.Fatalf("text block %v", p)
				}
			}
		})
	}
}

// TestFirstDeltaNotBuffered: the server sends one token and then stalls with the response open;
// the token must reach the caller anyway.
func TestFirstDeltaNotBuffered(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, v, fakes.ScriptOptions{Script: fakes.NewScript(fakes.ScriptTurn{Text: "one two three"})}, Config{})
			r.fake.StallNext(1, 1)
			s, err := r.client.Stream(context.Background(), userSays("hi"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got := make(chan Event, 1)
			go func() {
				ev, _ := s.Recv()
				got <- ev
			}()
			select {
			case ev := <-got:
				if ev.Kind != TextDelta || ev.Text != "one" {
					t.Fatalf("first event %+v", ev)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the first delta was held back")
			}
		})
	}
}

func TestFirstTokenTimeout(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, v, fakes.ScriptOptions{Script: fakes.NewScript(fakes.ScriptTurn{Text: "late"})}, Config{FirstTokenTimeout: 150 * time.Millisecond})
			r.fake.StallNext(1, 0)
			start := time.Now()
			_, err := run(t, r.client, userSays("hi"))
			e := asError(t, err)
			if e.Code != CodeFirstTokenTimeout || !errors.Is(err, ErrFirstTokenTimeout) || !e.Retryable || !e.BeforeFirstByte {
				t.Fatalf("error %+v", e)
			}
			if el := time.Since(start); el < 150*time.Millisecond || el > 3*time.Second {
				t.Fatalf("timed out after %v", el)
			}
			// With retries, the second attempt answers.
			r.fake.StallNext(1, 0)
			got, err := run(t, WithRetry(r.client, RetryPolicy{Attempts: 2, BaseDelay: time.Millisecond}), userSays("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if got.text != "You said: hi" {
				t.Fatalf("text %q", got.text)
			}
		})
	}
}

func TestIdleTimeoutMidStream(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, v, fakes.ScriptOptions{Script: fakes.NewScript(fakes.ScriptTurn{Text: "one two three four"})},
				Config{FirstTokenTimeout: 5 * time.Second, IdleTimeout: 150 * time.Millisecond})
			r.fake.StallNext(1, 2)
			got, err := run(t, WithRetry(r.client, RetryPolicy{BaseDelay: time.Millisecond}), userSays("hi"))
			e := asError(t, err)
			if got.text != "one two" {
				t.Fatalf("text before the stall %q", got.text)
			}
			if e.Code != CodeIdleTimeout || !errors.Is(err, ErrIdleTimeout) || e.Retryable || e.BeforeFirstByte {
				t.Fatalf("error %+v", e)
			}
			if n := len(r.fake.Requests()); n != 1 {
				t.Fatalf("%d requests: a mid-stream failure must not be retried", n)
			}
		})
	}
}

func TestDropMidStream(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, v, fakes.ScriptOptions{Script: fakes.NewScript(fakes.ScriptTurn{Text: "one two three four five"})}, Config{})
			r.fake.DropNext(1, 3)
			got, err := run(t, WithRetry(r.client, RetryPolicy{BaseDelay: time.Millisecond}), userSays("hi"))
			e := asError(t, err)
			if got.text != "one two three" {
				t.Fatalf("text %q", got.text)
			}
			if e.BeforeFirstByte || e.Retryable || e.Code != CodeConnection {
				t.Fatalf("error %+v, want a non-retryable mid-stream connection error", e)
			}
			if n := len(r.fake.Requests()); n != 1 {
				t.Fatalf("%d requests, want 1", n)
			}
		})
	}
}

func TestDropBeforeFirstTokenIsRetried(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, v, fakes.ScriptOptions{}, Config{})
			r.fake.DropNext(1, 0)
			// Without retries: a retryable error before the first byte.
			_, err := run(t, r.client, userSays("hi"))
			if e := asError(t, err); !e.Retryable || !e.BeforeFirstByte {
				t.Fatalf("error %+v", e)
			}
			r.fake.DropNext(1, 0)
			got, err := run(t, WithRetry(r.client, RetryPolicy{BaseDelay: time.Millisecond}), userSays("again"))
			if err != nil {
				t.Fatal(err)
			}
			if got.text != "You said: again" {
				t.Fatalf("text %q", got.text)
			}
			if n := len(r.fake.Requests()); n != 3 {
				t.Fatalf("%d requests, want 3", n)
			}
		})
	}
}

func TestCancelStopsPromptly(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, v, fakes.ScriptOptions{Script: fakes.NewScript(fakes.ScriptTurn{Text: "one two three"})}, Config{})
			// Warm a connection so that the baseline counts the server's listener goroutines.
			if _, err := run(t, r.client, userSays("warm")); err != nil {
				t.Fatal(err)
			}
			r.client.CloseIdleConnections()
			base := runtime.NumGoroutine()

			r.fake.StallNext(1, 1)
			ctx, cancel := context.WithCancel(context.Background())
			s, err := r.client.Stream(ctx, userSays("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if ev, err := s.Recv(); err != nil || ev.Text != "You" {
				t.Fatalf("first event %+v %v", ev, err)
			}
			var stopped atomic.Int64
			timer := time.AfterFunc(50*time.Millisecond, func() {
				stopped.Store(time.Now().UnixNano())
				cancel()
			})
			defer timer.Stop()
			_, err = s.Recv()
			returned := time.Now()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want context.Canceled", err)
			}
			if d := returned.Sub(time.Unix(0, stopped.Load())); d > time.Second {
				t.Fatalf("Recv returned %v after cancel", d)
			}
			if _, err := s.Recv(); !errors.Is(err, context.Canceled) {
				t.Fatalf("error not sticky: %v", err)
			}
			_ = s.Close()
			_ = s.Close()
			r.client.CloseIdleConnections()
			waitGoroutines(t, base)
		})
	}
}

func TestCloseUnblocksRecv(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, v, fakes.ScriptOptions{Script: fakes.NewScript(fakes.ScriptTurn{Text: "one two three"})}, Config{})
			for _, retry := range []bool{false, true} {
				r.fake.StallNext(1, 0)
				var c Client = r.client
				if retry {
					c = WithRetry(c, RetryPolicy{})
				}
				s, err := c.Stream(context.Background(), userSays("hi"))
				if err != nil {
					t.Fatal(err)
				}
				timer := time.AfterFunc(50*time.Millisecond, func() { _ = s.Close() })
				start := time.Now()
				_, err = s.Recv()
				timer.Stop()
				if !errors.Is(err, ErrStreamClosed) {
					t.Fatalf("retry=%v: err %v, want ErrStreamClosed", retry, err)
				}
				if d := time.Since(start); d > 2*time.Second {
					t.Fatalf("Recv took %v", d)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	for _, v := range vendors {
		c, err := v.client(Config{BaseURL: "http://" + addr, Model: "m", ConnectTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Stream(context.Background(), userSays("hi"))
		e := asError(t, err)
		if e.Code != CodeConnection || !e.Retryable || !e.BeforeFirstByte || e.Provider != v.name {
			t.Fatalf("%s: %+v", v.name, e)
		}
	}
}

// TestKeepAlive checks that finished streams give their connection back for the next turn.
func TestKeepAlive(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			f := v.fake(fakes.ScriptOptions{})
			var conns atomic.Int32
			srv := httptest.NewUnstartedServer(f)
			srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
				if st == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			c, err := v.client(Config{BaseURL: srv.URL, Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseIdleConnections()
			for i := range 5 {
				got, err := run(t, c, userSays("turn"))
				if err != nil || got.text != "You said: turn" {
					t.Fatalf("turn %d: %q %v", i, got.text, err)
				}
			}
			if n := conns.Load(); n != 1 {
				t.Fatalf("%d connections for 5 sequential turns, want 1", n)
			}
		})
	}
}

// TestStreamNotSSE: a server that ignores "stream": true and answers JSON.
func TestStreamNotSSE(t *testing.T) {
	srv := cannedServer(t, "application/json", `{"id":"x","choices":[]}`, 1<<20)
	c, _ := NewOpenAI(Config{BaseURL: srv.URL, Model: "m"})
	_, err := c.Stream(context.Background(), userSays("hi"))
	if e := asError(t, err); e.Code != CodeBadStream || e.Retryable {
		t.Fatalf("%+v", e)
	}
	srv = cannedServer(t, "application/json", `{"error":{"message":"model is loading","type":"server_error","code":null}}`, 1<<20)
	c, _ = NewOpenAI(Config{BaseURL: srv.URL, Model: "m"})
	_, err = c.Stream(context.Background(), userSays("hi"))
	if e := asError(t, err); e.Code != "server_error" || e.Message != "model is loading" {
		t.Fatalf("%+v", e)
	}
}

func TestStreamEOFAfterDoneIsSticky(t *testing.T) {
	r := newRig(t, vendors[0], fakes.ScriptOptions{}, Config{})
	s, err := r.client.Stream(context.Background(), userSays("x"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		_ = ev
	}
	for range 3 {
		if _, err := s.Recv(); err != io.EOF {
			t.Fatalf("after EOF: %v", err)
		}
	}
	_ = s.Close()
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("after EOF and Close: %v", err)
	}
}

// BenchmarkStreamTurn measures Parley's side of one short turn over loopback against the fakes
// (no latency set): request encoding, the HTTP exchange on a kept-alive connection, SSE parsing
// and decoding of a 3-token reply. The fake's own work is included, so this is an upper bound.
func BenchmarkStreamTurn(b *testing.B) {
	for _, v := range vendors {
		b.Run(v.name, func(b *testing.B) {
			f := v.fake(fakes.ScriptOptions{})
			f.Script().SetFallback(func(string) fakes.ScriptTurn { return fakes.ScriptTurn{Text: "one two three"} })
			srv := httptest.NewServer(f)
			defer srv.Close()
			c, err := v.client(Config{BaseURL: srv.URL, Model: "m"})
			if err != nil {
				b.Fatal(err)
			}
			defer c.CloseIdleConnections()
			req := userSays("hello")
			b.ReportAllocs()
			for b.Loop() {
				s, err := c.Stream(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				for {
					_, err := s.Recv()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				_ = s.Close()
			}
		})
	}
}

// TestFirstTokenTimeoutBeforeHeaders: a server that never answers at all.
func TestFirstTokenTimeoutBeforeHeaders(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	for _, v := range vendors {
		c, _ := v.client(Config{BaseURL: srv.URL, Model: "m", FirstTokenTimeout: 100 * time.Millisecond})
		start := time.Now()
		_, err := c.Stream(context.Background(), userSays("hi"))
		e := asError(t, err)
		if e.Code != CodeFirstTokenTimeout || !e.Retryable || !e.BeforeFirstByte || !errors.Is(err, ErrFirstTokenTimeout) {
			t.Fatalf("%s: %+v", v.name, e)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("%s: took %v", v.name, d)
		}
	}
}
