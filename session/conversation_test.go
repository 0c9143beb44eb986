package session

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/session/fakes"
)

// A full voice turn through the real adapters and the fakes: greeting, caller speech, provider
// endpointing, LLM, TTS, first audio out. Parley's own share of the turn is measured and checked.
func TestVoiceTurn(t *testing.T) {
	r := newRig(t, rigOptions{
		agent:    Agent{SystemPrompt: "You are {{company}}'s booking agent.", FirstMessage: "Hello from {{company}}.", LLMModel: "gpt-test"},
		vars:     map[string]any{"company": "Acme"},
		turns:    []fakes.ScriptTurn{{Text: "Sure. For what time?"}},
		dgScript: []string{"i would like to book a table"},
		dgFinal:  30 * time.Millisecond,
	})
	waitFor(t, 5*time.Second, "greeting played", func() bool { return len(r.lines(RoleAgent)) == 1 })
	if got := r.lines(RoleAgent)[0].Text; got != "Hello from Acme." {
		t.Fatalf("greeting %q", got)
	}
	r.caller.say(speech(t, "I would like to book a table"))
	waitFor(t, 10*time.Second, "reply played", func() bool { return len(r.lines(RoleAgent)) == 2 })

	lines := r.conv.Transcript()
	var roles []string
	for i, l := range lines {
		roles = append(roles, string(l.Role))
		if l.Seq != int64(i+1) {
			t.Fatalf("seq not strictly increasing: %+v", lines)
		}
	}
	if strings.Join(roles, ",") != "agent,user,agent" {
		t.Fatalf("roles %v", roles)
	}
	if lines[1].Text != "i would like to book a table" || lines[2].Text != "Sure. For what time?" || lines[2].Interrupted {
		t.Fatalf("lines %+v", lines)
	}
	turns := r.conv.Turns()
	if len(turns) != 1 {
		t.Fatalf("turns %+v", turns)
	}
	m := turns[0]
	stages := []time.Time{m.SpeechEnd, m.EndOfTurn, m.LLMRequestSent, m.LLMFirstToken, m.TTSFirstRequest, m.TTSFirstByte, m.FirstAudioOut}
	for i := 1; i < len(stages); i++ {
		if stages[i].IsZero() || stages[i].Before(stages[i-1]) {
			t.Fatalf("stage %d out of order: %+v", i, m)
		}
	}
	if m.Endpointing != "provider" {
		t.Errorf("endpointing %q, want provider (Deepgram speech_final)", m.Endpointing)
	}
	share := m.ParleyShare()
	t.Logf("share parts: decision→request %v, first token→TTS request %v, TTS first byte→first frame out %v",
		Span(m.EndOfTurn, m.LLMRequestSent), Span(m.LLMFirstToken, m.TTSFirstRequest), Span(m.TTSFirstByte, m.FirstAudioOut))
	t.Logf("turn: endpointing %v, LLM first token %v, TTS first byte %v, total %v; Parley's share %v",
		Span(m.SpeechEnd, m.EndOfTurn), Span(m.LLMRequestSent, m.LLMFirstToken), Span(m.TTSFirstRequest, m.TTSFirstByte),
		Span(m.SpeechEnd, m.FirstAudioOut), share)
	// One frame (20 ms) at p50 is the budget; a single turn under -race must stay inside it.
	if share <= 0 || share > 20*time.Millisecond {
		t.Fatalf("Parley's share %v outside (0, 20ms]", share)
	}
	// The LLM got the rendered system prompt and the caller's words.
	reqs := r.chat.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d LLM requests", len(reqs))
	}
	raw := string(reqs[0].Raw)
	if !containsAll(raw, "You are Acme's booking agent.", "i would like to book a table", `"stream":true`) {
		t.Fatalf("LLM request %s", raw)
	}
	// The agent's audio reached the port: tone frames with energy.
	loud := 0
	for _, f := range r.port.frameTimes() {
		if f.rms > 1000 {
			loud++
		}
	}
	if loud < 20 {
		t.Fatalf("only %d loud frames reached the port", loud)
	}
}

// Barge-in halfway through a sentence: output stops within one frame of the decision and the
// transcript keeps only what was played, marked interrupted.
func TestBargeIn(t *testing.T) {
	long := "Our opening hours are from nine in the morning until nine in the evening every day of the week including holidays."
	r := newRig(t, rigOptions{
		agent:    Agent{SystemPrompt: "x"},
		turns:    []fakes.ScriptTurn{{Text: long}},
		dgScript: []string{"when are you open", "stop please"},
		dgFinal:  30 * time.Millisecond,
	})
	r.caller.say(speech(t, "When are you open?"))
	waitFor(t, 10*time.Second, "agent speaking", func() bool {
		return r.conv.out.sentFrames() > 16000 // one second of the reply heard
	})
	r.caller.say(speech(t, "Stop please, I have another question"))
	waitFor(t, 5*time.Second, "agent line", func() bool { return len(r.lines(RoleAgent)) == 1 })
	bargeAt := r.sink.lastState(StateUserSpeaking)
	agent := r.lines(RoleAgent)[0]
	if !agent.Interrupted || agent.Text == "" || len(agent.Text) >= len(long) || !strings.HasPrefix(long, agent.Text) {
		t.Fatalf("interrupted line %+v", agent)
	}
	// Frames after the barge-in decision: at most the one the pacer was sending.
	time.Sleep(100 * time.Millisecond) // let any wrongly queued audio come out, to be counted
	after := 0
	for _, f := range r.port.frameTimes() {
		if f.at.After(bargeAt) && f.rms > 1000 {
			after++
		}
	}
	if after > 1 {
		t.Fatalf("%d agent frames after the barge-in, want ≤ 1", after)
	}
	t.Logf("played before barge-in: %q", agent.Text)
	// The caller's new turn is answered (the script echoes it).
	waitFor(t, 10*time.Second, "answer to the interruption", func() bool { return len(r.lines(RoleAgent)) == 2 })
	if got := r.lines(RoleUser); len(got) != 2 || got[1].Text != "stop please" {
		t.Fatalf("user lines %+v", got)
	}
	// The LLM's history shows the cut reply.
	reqs := r.chat.Requests()
	if !strings.Contains(string(reqs[len(reqs)-1].Raw), "[interrupted by the caller]") {
		t.Fatalf("second LLM request lacks the interruption: %s", reqs[len(reqs)-1].Raw)
	}
}

// A backchannel over the agent does not interrupt it.
func TestBackchannelDoesNotInterrupt(t *testing.T) {
	r := newRig(t, rigOptions{
		agent:    Agent{SystemPrompt: "x", Turn: TurnSettings{BargeInConfirmWords: true}},
		turns:    []fakes.ScriptTurn{{Text: "Let me read you the whole list of our opening hours for this week."}},
		dgScript: []string{"hours please", "mm-hm"},
		dgFinal:  20 * time.Millisecond,
	})
	r.caller.say(speech(t, "Hours please"))
	waitFor(t, 10*time.Second, "agent speaking", func() bool { return r.conv.out.sentFrames() > 8000 })
	r.caller.say(speech(t, "mm hmm"))
	waitFor(t, 15*time.Second, "reply finished", func() bool { return len(r.lines(RoleAgent)) == 1 })
	if l := r.lines(RoleAgent)[0]; l.Interrupted {
		t.Fatalf("a backchannel interrupted the agent: %+v", l)
	}
}

// Say: queued after the current utterance, and interrupting it.
func TestSayQueuedAndInterrupting(t *testing.T) {
	r := newRig(t, rigOptions{agent: Agent{SystemPrompt: "x", FirstMessage: "Welcome to the line, please hold while I check your account details."}})
	waitFor(t, 5*time.Second, "greeting started", func() bool { return r.conv.out.sentFrames() > 3200 })
	queued := r.conv.Execute(Command{Kind: CommandSay, Text: "Thanks for waiting."})
	res := <-queued
	if res.Status != CommandDone {
		t.Fatalf("queued say: %+v", res)
	}
	ag := r.lines(RoleAgent)
	if len(ag) != 2 || ag[0].Interrupted || ag[1].Text != "Thanks for waiting." {
		t.Fatalf("queued say must follow the greeting whole: %+v", ag)
	}
	// Interrupting say while another says.
	s0 := r.conv.out.sentFrames()
	long := r.conv.Execute(Command{Kind: CommandSay, Text: "This is a rather long announcement that will not be finished at all."})
	waitFor(t, 5*time.Second, "announcement playing", func() bool { return r.conv.out.sentFrames() > s0+8000 })
	now := r.conv.Execute(Command{Kind: CommandSay, Text: "Urgent update.", Interrupt: true})
	if res := <-long; res.Status != CommandFailed {
		t.Fatalf("interrupted say: %+v", res)
	}
	if res := <-now; res.Status != CommandDone {
		t.Fatalf("interrupting say: %+v", res)
	}
	ag = r.lines(RoleAgent)
	if len(ag) != 4 || !ag[2].Interrupted || ag[3].Text != "Urgent update." {
		t.Fatalf("lines after interrupting say: %+v", ag)
	}
	// A note visible to the agent reaches the LLM's context; an invisible one does not.
	if res := <-r.conv.Execute(Command{Kind: CommandNote, Text: "VIP caller", VisibleToAgent: true}); res.Status != CommandDone {
		t.Fatal(res)
	}
	if res := <-r.conv.Execute(Command{Kind: CommandNote, Text: "internal only"}); res.Status != CommandDone {
		t.Fatal(res)
	}
	if n := r.lines(RoleNote); len(n) != 2 {
		t.Fatalf("notes %+v", n)
	}
	r.conv.histMu.Lock()
	var hist []string
	for _, h := range r.conv.history {
		hist = append(hist, h.msg.Content)
	}
	r.conv.histMu.Unlock()
	joined := strings.Join(hist, "|")
	if !strings.Contains(joined, "VIP caller") || strings.Contains(joined, "internal only") {
		t.Fatalf("history %q", joined)
	}
}

// The silence timeout reprompts, then ends the call and hangs up.
func TestSilenceTimeout(t *testing.T) {
	r := newRig(t, rigOptions{agent: Agent{SystemPrompt: "x", SilenceTimeout: 300 * time.Millisecond, Reprompts: 1, RepromptText: "Are you there?"}})
	select {
	case <-r.conv.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("conversation did not end on silence")
	}
	if r.conv.EndReason() != EndSilenceTimeout || r.sink.endedWith() != EndSilenceTimeout {
		t.Fatalf("end reason %q", r.conv.EndReason())
	}
	ag := r.lines(RoleAgent)
	if len(ag) != 1 || ag[0].Text != "Are you there?" {
		t.Fatalf("reprompts %+v", ag)
	}
	if len(r.port.hangups) != 1 || r.port.hangups[0] != EndSilenceTimeout {
		t.Fatalf("hangups %v", r.port.hangups)
	}
}

// An LLM failing before the first token is retried and the turn goes on.
func TestLLM500BeforeFirstTokenIsRetried(t *testing.T) {
	r := newRig(t, rigOptions{agent: Agent{SystemPrompt: "x"}, retry: true, turns: []fakes.ScriptTurn{{Text: "Recovered."}}, dgScript: []string{"hello"}})
	r.chat.FailNext(1, 500, 0)
	r.caller.say(speech(t, "Hello"))
	waitFor(t, 10*time.Second, "reply", func() bool { return len(r.lines(RoleAgent)) == 1 })
	if got := r.lines(RoleAgent)[0].Text; got != "Recovered." {
		t.Fatalf("reply %q", got)
	}
	if n := len(r.chat.Requests()); n != 2 {
		t.Fatalf("%d LLM requests, want 2 (one failed, one retried)", n)
	}
}

// An LLM dropping mid-stream: the agent apologizes and the call stays up; after the limit of
// failures it ends with provider_error.
func TestLLMDroppedMidStream(t *testing.T) {
	r := newRig(t, rigOptions{agent: Agent{SystemPrompt: "x", MaxLLMFailures: 2, ApologyText: "Sorry about that."},
		turns: []fakes.ScriptTurn{{Text: "This reply will be cut off somewhere in the middle."}, {Text: "Again cut off somewhere in the middle."}}, dgScript: []string{"first", "second"}})
	r.chat.DropNext(2, 3)
	r.caller.say(speech(t, "First question"))
	waitFor(t, 10*time.Second, "apology", func() bool {
		for _, l := range r.lines(RoleAgent) {
			if l.Text == "Sorry about that." {
				return true
			}
		}
		return false
	})
	if r.conv.EndReason() != "" {
		t.Fatalf("ended after one failure: %s", r.conv.EndReason())
	}
	waitFor(t, 5*time.Second, "listening again", func() bool {
		return !r.sink.lastState(StateListening).Before(r.sink.lastState(StateAgentSpeaking))
	})
	r.caller.say(speech(t, "Second question"))
	select {
	case <-r.conv.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("no end after the second failure")
	}
	if r.conv.EndReason() != EndProviderError {
		t.Fatalf("end reason %q", r.conv.EndReason())
	}
}

// The STT WebSocket closing mid-utterance: the adapter reconnects and the next utterance is
// still understood.
func TestSTTDropMidUtterance(t *testing.T) {
	r := newRig(t, rigOptions{agent: Agent{SystemPrompt: "x"}, dgScript: []string{"lost words", "after the drop"}, turns: []fakes.ScriptTurn{{Text: "Got it."}}})
	r.dg.ArmDrop()
	r.caller.say(speech(t, "These words are lost when the socket drops"))
	waitFor(t, 10*time.Second, "reconnect", func() bool { return len(r.dg.Connections()) >= 2 })
	for r.caller.speaking() {
		time.Sleep(10 * time.Millisecond)
	}
	r.caller.say(speech(t, "After the drop"))
	waitFor(t, 10*time.Second, "answer after reconnect", func() bool { return len(r.lines(RoleAgent)) >= 1 })
	if r.conv.EndReason() != "" {
		t.Fatalf("ended: %s", r.conv.EndReason())
	}
}

// TTS timing out: the utterance is skipped, the call goes on; repeated failures end it.
func TestTTSTimeout(t *testing.T) {
	r := newRig(t, rigOptions{agent: Agent{SystemPrompt: "x", FirstMessage: "Hello there. How can I help you today?", MaxTTSFailures: 2}, ttsStall: true})
	select {
	case <-r.conv.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("stalled TTS never ended the conversation (%d TTS requests, failures %d, state %v)", len(r.el.Requests()), r.conv.ttsFailures, r.sink.states)
	}
	if r.conv.EndReason() != EndProviderError {
		t.Fatalf("end reason %q", r.conv.EndReason())
	}
	if ag := r.lines(RoleAgent); len(ag) != 0 {
		t.Fatalf("text that was never heard is in the transcript: %+v", ag)
	}
	if n := len(r.el.Requests()); n != 4 {
		t.Fatalf("%d TTS requests, want 4 (two chunks, each retried once)", n)
	}
}

// A missing placeholder value is a clear error naming it.
func TestMissingPlaceholder(t *testing.T) {
	_, err := New(Options{LLM: stubLLM{}, Agent: Agent{SystemPrompt: "Hi {{name}} from {{city}}"}, Variables: map[string]any{"name": "x"}})
	var me *MissingVariablesError
	if !errors.As(err, &me) || len(me.Names) != 1 || me.Names[0] != "city" {
		t.Fatalf("err %v", err)
	}
}

// Tool calls through the chat path: a parallel call with arguments streamed in pieces, results
// fed back, and the final answer.
func TestToolCallRoundTrip(t *testing.T) {
	var calls atomic.Int32
	runner := toolFunc(func(ctx context.Context, name string, args json.RawMessage) (string, error) {
		calls.Add(1)
		var a map[string]any
		json.Unmarshal(args, &a)
		switch name {
		case "order_status":
			return `{"status":"shipped","order":"` + a["order_id"].(string) + `"}`, nil
		case "weather":
			return `{"forecast":"sunny in ` + a["city"].(string) + `"}`, nil
		}
		return "", errors.New("unknown")
	})
	r := newRig(t, rigOptions{
		agent: Agent{SystemPrompt: "x", Tools: []ToolSpec{
			{Name: "order_status", Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}}}`)},
			{Name: "weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
		}},
		turns: []fakes.ScriptTurn{
			{ToolCalls: []fakes.ScriptToolCall{
				{Name: "order_status", Args: json.RawMessage(`{"order_id":"A-1234567890"}`)},
				{Name: "weather", Args: json.RawMessage(`{"city":"Lisbon, Portugal"}`)},
			}},
			{Text: "Your order shipped and Lisbon will be sunny."},
		},
		tools: runner, noStart: true,
	})
	if err := r.conv.StartText(context.Background()); err != nil {
		t.Fatal(err)
	}
	var deltas []string
	turn, err := r.conv.Send(context.Background(), "Where is my order and how is the weather?", nil, func(d string) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if turn.Agent.Text != "Your order shipped and Lisbon will be sunny." || calls.Load() != 2 || len(deltas) < 2 {
		t.Fatalf("turn %+v, %d tool calls, %d deltas", turn, calls.Load(), len(deltas))
	}
	reqs := r.chat.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d LLM requests", len(reqs))
	}
	second := reqs[1].Body
	msgs := second["messages"].([]any)
	var toolMsgs, assistantCalls int
	for _, m := range msgs {
		mm := m.(map[string]any)
		if mm["role"] == "tool" {
			toolMsgs++
			if mm["tool_call_id"] == "" {
				t.Fatalf("tool message without id: %v", mm)
			}
		}
		if tc, ok := mm["tool_calls"].([]any); ok {
			assistantCalls += len(tc)
		}
	}
	if toolMsgs != 2 || assistantCalls != 2 {
		t.Fatalf("second request: %d tool messages, %d assistant tool calls: %s", toolMsgs, assistantCalls, reqs[1].Raw)
	}
	if !containsAll(string(reqs[1].Raw), "shipped", "sunny in Lisbon, Portugal") {
		t.Fatalf("tool results not fed back: %s", reqs[1].Raw)
	}
	if tl := r.lines(RoleTool); len(tl) != 2 {
		t.Fatalf("tool lines %+v", tl)
	}
}

// The chat path: one message at a time, an end_call ends the chat.
func TestChatBusyAndEnd(t *testing.T) {
	r := newRig(t, rigOptions{agent: Agent{SystemPrompt: "x", Tools: []ToolSpec{{Name: ToolEndCall}}},
		turns: []fakes.ScriptTurn{{Text: "First."}, {Text: "Goodbye!", ToolCalls: []fakes.ScriptToolCall{{Name: ToolEndCall}}}}, noStart: true})
	r.chat.SetLatency(300*time.Millisecond, 0)
	r.conv.StartText(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := r.conv.Send(context.Background(), "one", nil, nil); errc <- err }()
	waitFor(t, 2*time.Second, "busy", func() bool { r.conv.mu.Lock(); defer r.conv.mu.Unlock(); return r.conv.chatBusy })
	if _, err := r.conv.Send(context.Background(), "two", nil, nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("second message while answering: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	r.chat.SetLatency(0, 0)
	turn, err := r.conv.Send(context.Background(), "bye", nil, nil)
	if err != nil || !turn.Ended || turn.EndReason != EndAgentEnded {
		t.Fatalf("end_call: %+v %v", turn, err)
	}
	if _, err := r.conv.Send(context.Background(), "again", nil, nil); !errors.Is(err, ErrEnded) {
		t.Fatalf("after end: %v", err)
	}
}

// Transfer through a command: the port is asked; a failure keeps the call up and fails the
// command with the reason; success ends the call as transferred.
func TestTransferCommand(t *testing.T) {
	r := newRig(t, rigOptions{agent: Agent{SystemPrompt: "x"}})
	r.port.transfer = func(tr TransferRequest) error { return errors.New("486 busy here") }
	res := <-r.conv.Execute(Command{Kind: CommandTransfer, Transfer: TransferRequest{Destination: "+15551234567"}})
	if res.Status != CommandFailed || !strings.Contains(res.Reason, "486") || r.conv.EndReason() != "" {
		t.Fatalf("failed transfer: %+v, ended %q", res, r.conv.EndReason())
	}
	r.port.mu.Lock()
	r.port.transfer = nil
	r.port.mu.Unlock()
	res = <-r.conv.Execute(Command{Kind: CommandTransfer, Transfer: TransferRequest{Destination: "+15551234567", Mode: TransferWarm, Summary: "wants a refund"}})
	if res.Status != CommandDone {
		t.Fatalf("transfer: %+v", res)
	}
	<-r.conv.Done()
	if r.conv.EndReason() != EndTransferred || len(r.port.transfers) != 2 || r.port.transfers[1].Mode != TransferWarm {
		t.Fatalf("end %q transfers %+v", r.conv.EndReason(), r.port.transfers)
	}
}

// OpenAI-compatible transcription: the VAD cuts the utterance, the adapter uploads it, the turn
// is answered.
func TestVoiceTurnWithTranscriptionAdapter(t *testing.T) {
	r := newRig(t, rigOptions{agent: Agent{SystemPrompt: "x"}, sttKind: "openai", dgScript: []string{"book a table"}, dgFinal: 50 * time.Millisecond,
		turns: []fakes.ScriptTurn{{Text: "Done."}}})
	r.caller.say(speech(t, "Book a table"))
	waitFor(t, 10*time.Second, "reply", func() bool { return len(r.lines(RoleAgent)) == 1 })
	if u := r.lines(RoleUser); len(u) != 1 || u[0].Text != "book a table" {
		t.Fatalf("user %+v", u)
	}
	m := r.conv.Turns()[0]
	t.Logf("transcription endpointing: speech end → end of turn %v (%s)", Span(m.SpeechEnd, m.EndOfTurn), m.Endpointing)
}

type toolFunc func(ctx context.Context, name string, args json.RawMessage) (string, error)

func (f toolFunc) Call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	return f(ctx, name, args)
}

// A chat message whose reply fails leaves nothing behind: retried, it makes one user line and
// one reply, and the LLM sees it once.
func TestChatFailedMessageLeavesNothing(t *testing.T) {
	r := newRig(t, rigOptions{agent: Agent{SystemPrompt: "x", MaxLLMFailures: 10}, turns: []fakes.ScriptTurn{{Text: "We open at nine."}}, noStart: true})
	if err := r.conv.StartText(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.chat.FailNext(4, 500, 0)
	var turn ChatTurn
	failed := 0
	for attempt := 0; attempt < 6; attempt++ {
		var err error
		if turn, err = r.conv.Send(context.Background(), "When do you open?", nil, nil); err == nil {
			break
		}
		failed++
		if u := r.lines(RoleUser); len(u) != 0 {
			t.Fatalf("a failed message left user lines %+v", u)
		}
	}
	if failed == 0 {
		t.Fatal("no attempt failed: the fault was not injected")
	}
	u := r.lines(RoleUser)
	if len(u) != 1 || turn.User.Seq != u[0].Seq || turn.Agent.Text != "We open at nine." || turn.Agent.Seq != turn.User.Seq+1 {
		t.Fatalf("retried turn %+v; user lines %+v", turn, u)
	}
	reqs := r.chat.Requests()
	if last := string(reqs[len(reqs)-1].Raw); strings.Count(last, "When do you open?") != 1 {
		t.Fatalf("the LLM saw the message %d times in %s", strings.Count(last, "When do you open?"), last)
	}
}
