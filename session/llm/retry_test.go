package llm

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/parley-voice/parley/session/fakes"
)

func TestRetry500BeforeFirstToken(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, v, fakes.ScriptOptions{Script: fakes.NewScript(fakes.ScriptTurn{Text: "made it"})}, Config{})
			r.fake.FailNext(2, http.StatusInternalServerError, 0)
			var retries []int
			c := WithRetry(r.client, RetryPolicy{Attempts: 3, BaseDelay: time.Millisecond, Jitter: 0.5,
				OnRetry: func(attempt int, err error, wait time.Duration) { retries = append(retries, attempt) }})
			got, err := run(t, c, userSays("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if got.text != "made it" {
				t.Fatalf("text %q", got.text)
			}
			reqs := r.fake.Requests()
			if len(reqs) != 3 || reqs[0].Status != 500 || reqs[1].Status != 500 || reqs[2].Status != 200 {
				t.Fatalf("requests %d", len(reqs))
			}
			if len(retries) != 2 || retries[0] != 1 || retries[1] != 2 {
				t.Fatalf("OnRetry calls %v", retries)
			}
			// Out of attempts: the last error comes back.
			r.fake.FailNext(2, http.StatusInternalServerError, 0)
			_, err = run(t, WithRetry(r.client, RetryPolicy{Attempts: 2, BaseDelay: time.Millisecond}), userSays("hi"))
			e := asError(t, err)
			if e.Status != 500 || !e.Retryable || !e.BeforeFirstByte {
				t.Fatalf("%+v", e)
			}
		})
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, v, fakes.ScriptOptions{}, Config{})
			r.fake.FailNext(1, http.StatusTooManyRequests, 120*time.Millisecond)
			var waited time.Duration
			c := WithRetry(r.client, RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: time.Second,
				OnRetry: func(_ int, _ error, d time.Duration) { waited = d }})
			start := time.Now()
			if _, err := run(t, c, userSays("hi")); err != nil {
				t.Fatal(err)
			}
			if waited != 120*time.Millisecond || time.Since(start) < 120*time.Millisecond {
				t.Fatalf("waited %v (elapsed %v), want the server's 120ms", waited, time.Since(start))
			}
			// A server asking for more than MaxDelay is not waited for.
			r.fake.FailNext(1, 529, 30*time.Second)
			start = time.Now()
			_, err := run(t, c, userSays("hi"))
			e := asError(t, err)
			if e.RetryAfter != 30*time.Second || time.Since(start) > 5*time.Second {
				t.Fatalf("%+v after %v", e, time.Since(start))
			}
		})
	}
}

func TestRetryNotForClientErrors(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, v, fakes.ScriptOptions{}, Config{})
			bad, _ := v.client(Config{BaseURL: r.srv.URL, APIKey: "sk-bad-key-123456789", Model: "m"})
			_, err := run(t, WithRetry(bad, RetryPolicy{BaseDelay: time.Millisecond}), userSays("hi"))
			if e := asError(t, err); e.Status != 401 {
				t.Fatalf("%+v", e)
			}
			if n := len(r.fake.Requests()); n != 1 {
				t.Fatalf("%d requests, want 1", n)
			}
		})
	}
}

// TestStatusClassification: each HTTP failure, as each fake sends it, classified by the adapter.
func TestStatusClassification(t *testing.T) {
	cases := []struct {
		status    int
		retryable bool
		anCode    string
	}{
		{400, false, "invalid_request_error"},
		{401, false, "authentication_error"},
		{403, false, "permission_error"},
		{404, false, "not_found_error"},
		{408, true, "invalid_request_error"},
		{413, false, "request_too_large"},
		{429, true, "rate_limit_error"},
		{500, true, "api_error"},
		{502, true, "api_error"},
		{503, true, "api_error"},
		{529, true, "overloaded_error"},
	}
	for _, v := range vendors {
		r := newRig(t, v, fakes.ScriptOptions{}, Config{})
		for _, c := range cases {
			r.fake.FailNext(1, c.status, 0)
			_, err := r.client.Stream(context.Background(), userSays("hi"))
			e := asError(t, err)
			if e.Status != c.status || e.Retryable != c.retryable || !e.BeforeFirstByte || e.Message == "" {
				t.Fatalf("%s %d: %+v", v.name, c.status, e)
			}
			if v.name == "anthropic" && e.Code != c.anCode {
				t.Fatalf("%s %d: code %q, want %q", v.name, c.status, e.Code, c.anCode)
			}
		}
	}
}

func TestRetryCancelDuringWait(t *testing.T) {
	r := newRig(t, vendors[0], fakes.ScriptOptions{}, Config{})
	r.fake.FailNext(1, 503, 0)
	ctx, cancel := context.WithCancel(context.Background())
	c := WithRetry(r.client, RetryPolicy{BaseDelay: time.Minute, MaxDelay: time.Minute,
		OnRetry: func(int, error, time.Duration) { cancel() }})
	start := time.Now()
	_, err := c.Stream(ctx, userSays("hi"))
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

func TestBackoff(t *testing.T) {
	p := RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}.withDefaults()
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 50: time.Second} {
		if got := p.backoff(attempt); got != want {
			t.Fatalf("attempt %d: %v, want %v", attempt, got, want)
		}
	}
	p.Jitter = 0.5
	for range 100 {
		if d := p.backoff(2); d < 100*time.Millisecond || d > 200*time.Millisecond {
			t.Fatalf("jittered %v outside [100ms, 200ms]", d)
		}
	}
	d := RetryPolicy{}.withDefaults()
	if d.Attempts != 3 || d.BaseDelay != 100*time.Millisecond || d.MaxDelay != 2*time.Second {
		t.Fatalf("defaults %+v", d)
	}
	if n := (RetryPolicy{Attempts: -4, Jitter: 7}).withDefaults(); n.Attempts != 1 || n.Jitter != 1 {
		t.Fatalf("clamped %+v", n)
	}
}
