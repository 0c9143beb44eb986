package bench

import (
	"strings"
	"testing"
	"time"
)

// fakeAgent is a scripted far end on a virtual clock: it speaks a greeting, then answers each
// of the caller's utterances after a known delay.
type fakeAgent struct {
	rate      int
	talks     []talk // when the agent sounds
	delays    []time.Duration
	replyLen  time.Duration
	turnsSeen int
}

type talk struct{ from, to time.Time }

// frame returns the agent's audio for [at, at+20ms).
func (a *fakeAgent) frame(at time.Time) []int16 {
	n := a.rate / 50
	out := make([]int16, n)
	loud := tone(n*100, a.rate, 440, 0.3)
	for i := range out {
		t := at.Add(time.Duration(i) * time.Second / time.Duration(a.rate))
		for _, tk := range a.talks {
			if !t.Before(tk.from) && t.Before(tk.to) {
				out[i] = loud[int(t.Sub(tk.from)/(time.Second/time.Duration(a.rate)))%len(loud)]
			}
		}
	}
	return out
}

// run drives a script for at most limit of virtual time and returns its result and the caller's
// speech ends as the test saw them in the frames.
func runScript(t *testing.T, o ScriptOptions, a *fakeAgent, limit time.Duration) (ScriptResult, *CallScript) {
	t.Helper()
	t0 := time.Unix(1_000_000, 0)
	s := NewCallScript(o, t0)
	dst := make([]int16, a.rate/50)
	for at := t0; at.Sub(t0) < limit && !s.Done(); at = at.Add(20 * time.Millisecond) {
		s.Hear(at, a.frame(at), a.rate)
		before := len(s.res.Turns) + boolInt(s.state == stWaitReply)
		s.Fill(at, dst)
		if s.state == stWaitReply && before == len(s.res.Turns) {
			// The caller's speech just ended at 'at': schedule the reply.
			d := a.delays[a.turnsSeen%len(a.delays)]
			a.turnsSeen++
			a.talks = append(a.talks, talk{at.Add(d), at.Add(d + a.replyLen)})
		}
	}
	return s.Result(), s
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestCallScriptMeasuresKnownDelays(t *testing.T) {
	for _, rate := range []int{8000, 16000} {
		us := []Utterance{mustUtterance(t, "one", tone(rate*3/10, rate, 300, 0.3), rate), mustUtterance(t, "two", tone(rate/2, rate, 250, 0.2), rate)}
		t0 := time.Unix(1_000_000, 0)
		a := &fakeAgent{rate: rate, replyLen: 400 * time.Millisecond,
			talks:  []talk{{t0.Add(333 * time.Millisecond), t0.Add(833 * time.Millisecond)}},
			delays: []time.Duration{437 * time.Millisecond, 1203 * time.Millisecond, 61 * time.Millisecond}}
		res, s := runScript(t, ScriptOptions{Utterances: us, Turns: 3, Greeting: true, Hangover: 300 * time.Millisecond,
			Pause: 100 * time.Millisecond}, a, time.Minute)
		if res.Failure != "" || !s.Done() {
			t.Fatalf("rate %d: failure %q, state %s", rate, res.Failure, s.State())
		}
		near := func(what string, got, want time.Duration) {
			if d := got - want; d < -energyBlock || d > energyBlock {
				t.Errorf("rate %d: %s = %v, want %v ± 5 ms", rate, what, got, want)
			}
		}
		near("greeting", res.Greeting, 333*time.Millisecond)
		if len(res.Turns) != 3 {
			t.Fatalf("rate %d: %d turns", rate, len(res.Turns))
		}
		for i, tu := range res.Turns {
			near("turn latency", tu.Latency, a.delays[i])
			near("agent talk", tu.AgentTalk, 400*time.Millisecond)
			if tu.Index != i+1 || tu.Text != []string{"one", "two", "one"}[i] {
				t.Errorf("turn %d: %+v", i, tu)
			}
		}
		if res.TalkOver != 0 {
			t.Errorf("talk-over %d", res.TalkOver)
		}
	}
}

func mustUtterance(t *testing.T, text string, pcm []int16, rate int) Utterance {
	t.Helper()
	u, err := NewUtterance(text, pcm, rate)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestCallScriptFailures(t *testing.T) {
	rate := 8000
	us := []Utterance{mustUtterance(t, "one", tone(rate/5, rate, 300, 0.3), rate)}
	cases := []struct {
		name string
		o    ScriptOptions
		a    *fakeAgent
		want string
	}{
		{"no greeting", ScriptOptions{Utterances: us, Turns: 1, Greeting: true, ReplyTimeout: time.Second}, &fakeAgent{rate: rate}, "no greeting within 1s"},
		{"no reply", ScriptOptions{Utterances: us, Turns: 1, ReplyTimeout: 2 * time.Second}, &fakeAgent{rate: rate, delays: []time.Duration{time.Hour}}, "no reply to turn 1 within 2s"},
		{"endless agent", ScriptOptions{Utterances: us, Turns: 1, AgentMaxTalk: 3 * time.Second}, &fakeAgent{rate: rate, delays: []time.Duration{time.Millisecond}, replyLen: time.Hour}, "the agent talked for more than 3s"},
		{"no utterances", ScriptOptions{Turns: 1}, &fakeAgent{rate: rate}, "no utterances to say"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, s := runScript(t, c.o, c.a, time.Minute)
			if !s.Done() || !strings.Contains(res.Failure, c.want) {
				t.Fatalf("failure %q (state %s), want %q", res.Failure, s.State(), c.want)
			}
		})
	}
}

func TestCallScriptShortCall(t *testing.T) {
	rate := 8000
	t0 := time.Unix(1_000_000, 0)
	a := &fakeAgent{rate: rate, talks: []talk{{t0.Add(150 * time.Millisecond), t0.Add(600 * time.Millisecond)}}}
	res, s := runScript(t, ScriptOptions{Hold: 2 * time.Second}, a, time.Minute)
	if !s.Done() || res.Failure != "" || len(res.Turns) != 0 {
		t.Fatalf("short call: %+v", res)
	}
	if d := res.Greeting - 150*time.Millisecond; d < -energyBlock || d > energyBlock {
		t.Errorf("greeting %v", res.Greeting)
	}
	s.Fail(t0, "late") // over already: ignored
	if s.Result().Failure != "" {
		t.Error("Fail changed a finished script")
	}
}

func TestCallScriptCountsTalkOver(t *testing.T) {
	rate := 8000
	us := []Utterance{mustUtterance(t, "long", tone(rate*2, rate, 300, 0.3), rate)}
	t0 := time.Unix(1_000_000, 0)
	// The agent speaks up in the middle of the caller's speech, then replies normally.
	a := &fakeAgent{rate: rate, replyLen: 200 * time.Millisecond, delays: []time.Duration{300 * time.Millisecond},
		talks: []talk{{t0.Add(time.Second), t0.Add(1200 * time.Millisecond)}}}
	res, _ := runScript(t, ScriptOptions{Utterances: us, Turns: 1, Hangover: 300 * time.Millisecond}, a, time.Minute)
	if res.TalkOver != 1 || res.Failure != "" || len(res.Turns) != 1 {
		t.Fatalf("%+v", res)
	}
}

func BenchmarkCallScriptFrame(b *testing.B) {
	rate := 8000
	u, _ := NewUtterance("x", tone(rate, rate, 300, 0.3), rate)
	s := NewCallScript(ScriptOptions{Utterances: []Utterance{u}, Turns: 1 << 30}, time.Unix(0, 0))
	in := tone(160, rate, 440, 0.2)
	dst := make([]int16, 160)
	at := time.Unix(0, 0)
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(20 * time.Millisecond)
		s.Hear(at, in, rate)
		s.Fill(at, dst)
	}
}
