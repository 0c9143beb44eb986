package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/session/fakes"
)

const (
	testKey   = "sk-test-0123456789abcdef"
	testModel = "test-model"
)

// fakeServer is what both LLM fakes offer.
type fakeServer interface {
	http.Handler
	FailNext(n, status int, retryAfter time.Duration)
	DropNext(n, afterTokens int)
	StallNext(n, afterTokens int)
	SetLatency(first time.Duration, tokensPerSecond float64)
	Requests() []fakes.ScriptRequest
	Script() *fakes.Script
	Close()
}

type adapter interface {
	Client
	CloseIdleConnections()
}

type vendor struct {
	name   string
	fake   func(fakes.ScriptOptions) fakeServer
	client func(Config) (adapter, error)
}

var vendors = []vendor{
	{
		name:   "openai",
		fake:   func(o fakes.ScriptOptions) fakeServer { return fakes.NewOpenAIChatFake(o) },
		client: func(c Config) (adapter, error) { return NewOpenAI(c) },
	},
	{
		name:   "anthropic",
		fake:   func(o fakes.ScriptOptions) fakeServer { return fakes.NewAnthropicFake(o) },
		client: func(c Config) (adapter, error) { return NewAnthropic(c) },
	},
}

// rig is a fake vendor on a local port and an adapter pointed at it.
type rig struct {
	fake   fakeServer
	srv    *httptest.Server
	client adapter
}

func newRig(t *testing.T, v vendor, o fakes.ScriptOptions, cfg Config) *rig {
	t.Helper()
	if o.APIKey == "" {
		o.APIKey = testKey
	}
	f := v.fake(o)
	srv := httptest.NewServer(f)
	if cfg.APIKey == "" {
		cfg.APIKey = testKey
	}
	if cfg.Model == "" {
		cfg.Model = testModel
	}
	cfg.BaseURL = srv.URL
	c, err := v.client(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		c.CloseIdleConnections()
		srv.Close()
	})
	return &rig{fake: f, srv: srv, client: c}
}

// reply is a collected stream.
type reply struct {
	text   string
	calls  []ToolCall
	done   Event
	events []Event
}

// collect reads s to its end, closing it. It fails the test if it takes longer than 10 s.
func collect(t *testing.T, s Stream) (reply, error) {
	t.Helper()
	defer s.Close()
	var r reply
	var sb strings.Builder
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ev, err := s.Recv()
		if err == io.EOF {
			r.text = sb.String()
			return r, nil
		}
		if err != nil {
			r.text = sb.String()
			return r, err
		}
		r.events = append(r.events, ev)
		switch ev.Kind {
		case TextDelta:
			sb.WriteString(ev.Text)
		case ToolCallEvent:
			r.calls = append(r.calls, ev.ToolCall)
		case Done:
			r.done = ev
		default:
			t.Fatalf("unknown event kind %v", ev.Kind)
		}
	}
	t.Fatal("stream did not end within 10 s")
	return r, nil
}

// run sends r and collects the reply.
func run(t *testing.T, c Client, req Request) (reply, error) {
	t.Helper()
	s, err := c.Stream(context.Background(), req)
	if err != nil {
		return reply{}, err
	}
	return collect(t, s)
}

func userSays(text string) Request {
	return Request{System: "You are terse.", Messages: []Message{{Role: RoleUser, Content: text}}}
}

// asError extracts an *Error or fails.
func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
	}
	return e
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(t *testing.T, got, want []byte) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("bad JSON %q: %v", got, err)
	}
	if err := json.Unmarshal(want, &b); err != nil {
		t.Fatalf("bad JSON %q: %v", want, err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// waitGoroutines polls, with a deadline, until the number of goroutines is back to at most n.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("goroutine leak: %d > %d\n%s", runtime.NumGoroutine(), n, buf)
		}
		<-tick.C
	}
}

// cannedServer answers every request with status 200, the given content type and body, written
// in pieces of split bytes, each flushed on its own.
func cannedServer(t *testing.T, contentType, body string, split int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		fl.Flush()
		b := []byte(body)
		for len(b) > 0 {
			n := min(split, len(b))
			if _, err := w.Write(b[:n]); err != nil {
				return
			}
			fl.Flush()
			b = b[n:]
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}
