package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/session/llm"
)

type respKind int

const (
	respSent respKind = iota + 1
	respFirstToken
	respDelta
	respToolsStarted
	respToolsDone
	respEndCall
	respTransferred
	respDone
	respError
	respKnowledge // the turn's knowledge was retrieved (start in at, done in done)
)

// respEvent is what the LLM worker reports to the loop (or to a text caller).
type respEvent struct {
	kind      respKind
	gen       int
	at        time.Time
	text      string
	usage     llm.Usage
	err       error
	midStream bool
	done      time.Time // respKnowledge: when retrieval ended
}

// maxToolRounds bounds LLM → tool → LLM rounds in one reply.
const maxToolRounds = 6

// respond runs one reply: it streams the LLM, dispatches tool calls (in parallel) and asks again
// with their results, until the model answers without tools. It appends the model's messages to
// the history unless ctx was cancelled (barge-in), in which case the loop records what was heard.
func (c *Conversation) respond(ctx context.Context, gen int, emit func(respEvent)) {
	var total llm.Usage
	knowledge := c.retrieveForTurn(ctx, emit)
	for round := 0; round < maxToolRounds; round++ {
		req := c.buildRequest(knowledge)
		emit(respEvent{kind: respSent, at: c.now()})
		s, err := c.llm.Stream(ctx, req)
		if err != nil {
			if ctx.Err() == nil {
				emit(respEvent{kind: respError, err: err, usage: total})
			}
			return
		}
		var text strings.Builder
		var calls []llm.ToolCall
		first := true
		failed := false
		for {
			ev, err := s.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				s.Close()
				if ctx.Err() == nil {
					emit(respEvent{kind: respError, err: err, midStream: text.Len() > 0, usage: total})
				}
				failed = true
				break
			}
			switch ev.Kind {
			case llm.TextDelta:
				if first {
					first = false
					emit(respEvent{kind: respFirstToken, at: c.now()})
				}
				text.WriteString(ev.Text)
				emit(respEvent{kind: respDelta, text: ev.Text})
			case llm.ToolCallEvent:
				if first {
					first = false
					emit(respEvent{kind: respFirstToken, at: c.now()})
				}
				calls = append(calls, ev.ToolCall)
			case llm.Done:
				total.InputTokens += ev.Usage.InputTokens
				total.OutputTokens += ev.Usage.OutputTokens
			}
		}
		s.Close()
		if failed || ctx.Err() != nil {
			return
		}
		c.appendHistory(llm.Message{Role: llm.RoleAssistant, Content: text.String(), ToolCalls: calls}, gen)
		if len(calls) == 0 {
			emit(respEvent{kind: respDone, usage: total})
			return
		}
		spec := c.Specialist()
		ended, say := c.runTools(ctx, gen, calls, emit)
		knowledge = c.knowledgeAfterTools(ctx, spec, knowledge) // issue 16: a hand-over
		if ended || ctx.Err() != nil {
			if ctx.Err() == nil {
				if say != "" {
					emit(respEvent{kind: respDelta, text: say})
					c.appendHistory(llm.Message{Role: llm.RoleAssistant, Content: say}, gen)
				}
				emit(respEvent{kind: respDone, usage: total})
			}
			return
		}
	}
	emit(respEvent{kind: respError, err: errors.New("too many tool-call rounds in one reply"), usage: total})
}

// buildRequest assembles the LLM request from the system prompt (with the turn's retrieved
// knowledge, when there is some), the history and the tools.
func (c *Conversation) buildRequest(knowledge string) llm.Request {
	c.histMu.Lock()
	msgs := make([]llm.Message, 0, len(c.history))
	for _, h := range c.history {
		msgs = append(msgs, h.msg)
	}
	c.histMu.Unlock()
	system := c.systemPrompt()
	if knowledge != "" {
		system += "\n\n" + knowledge
	}
	return llm.Request{Model: c.agent.LLMModel, System: system, Messages: msgs, Tools: c.llmTools()}
}

// retrieveForTurn looks the caller's last words up in the agent's knowledge bases when the
// agent's knowledge mode is auto (issue 16). It runs on the reply's goroutine, never on a media
// goroutine; the time it takes is in the turn's metrics (and so in Parley's share), and what it
// found is a tool line of the transcript. A lookup that fails leaves the reply without knowledge.
func (c *Conversation) retrieveForTurn(ctx context.Context, emit func(respEvent)) string {
	tk, ok := c.know.(TurnKnowledge)
	if !ok || !c.agent.KnowledgeAuto {
		return ""
	}
	query := ""
	c.histMu.Lock()
	for i := len(c.history) - 1; i >= 0; i-- {
		if c.history[i].msg.Role == llm.RoleUser {
			query = c.history[i].msg.Content
			break
		}
	}
	c.histMu.Unlock()
	if strings.TrimSpace(query) == "" {
		return ""
	}
	start := c.now()
	r, err := tk.Retrieve(ctx, query)
	done := c.now()
	if ctx.Err() != nil {
		return ""
	}
	emit(respEvent{kind: respKnowledge, at: start, done: done})
	meta := map[string]any{"tool": ToolKnowledge, "mode": "auto", "query": query, "took_ms": float64(done.Sub(start).Microseconds()) / 1000, "chunks": r.Chunks}
	text := fmt.Sprintf("%s(auto) → %d chunks in %.1f ms", ToolKnowledge, len(r.Chunks), float64(done.Sub(start).Microseconds())/1000)
	if err != nil {
		meta["error"] = err.Error()
		text = ToolKnowledge + "(auto) failed: " + err.Error()
		c.log.Warn("session: knowledge retrieval failed", "err", err)
	}
	c.addLineSafe(Line{Role: RoleTool, Text: text, Start: start, End: done, Meta: meta})
	if err != nil {
		return ""
	}
	return r.Context
}

// Built-in tool names.
const (
	ToolEndCall   = "end_call"
	ToolTransfer  = "transfer_call"
	ToolSendDTMF  = "send_dtmf"
	ToolKnowledge = "knowledge_lookup"
	// ToolHandOver (handover.go) is "hand_over".
)

var builtinSchemas = map[string]struct {
	desc   string
	params string
}{
	ToolEndCall:   {"End the conversation after your current sentence. Say goodbye first.", `{"type":"object","properties":{"reason":{"type":"string"}},"additionalProperties":false}`},
	ToolTransfer:  {"Transfer the caller to a human or another number.", `{"type":"object","properties":{"destination":{"type":"string","description":"E.164 number or SIP URI"},"mode":{"type":"string","enum":["cold","warm"]},"summary":{"type":"string","description":"what to tell the human before connecting (warm)"}},"required":["destination"],"additionalProperties":false}`},
	ToolSendDTMF:  {"Press keys on the phone keypad (for menus).", `{"type":"object","properties":{"digits":{"type":"string","pattern":"^[0-9*#A-D]+$"}},"required":["digits"],"additionalProperties":false}`},
	ToolKnowledge: {"Look up facts in the agent's knowledge bases.", `{"type":"object","properties":{"query":{"type":"string"}},"required":["query"],"additionalProperties":false}`},
	ToolHandOver:  {"Hand the conversation over to a specialist.", `{"type":"object","properties":{"specialist":{"type":"string"},"reason":{"type":"string"}},"required":["specialist"],"additionalProperties":false}`},
}

func (c *Conversation) llmTools() []llm.Tool {
	var out []llm.Tool
	for _, t := range c.agent.Tools {
		lt := llm.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
		if b, ok := builtinSchemas[t.Name]; ok {
			if lt.Description == "" {
				lt.Description = b.desc
			}
			if len(lt.Parameters) == 0 {
				lt.Parameters = json.RawMessage(b.params)
			}
		}
		out = append(out, lt)
	}
	return out
}

// ToolRunner runs HTTP and MCP tools (implemented by the control plane).
type ToolRunner interface {
	Call(ctx context.Context, name string, args json.RawMessage) (string, error)
}

// Knowledge answers knowledge-base lookups (implemented by the control plane).
type Knowledge interface {
	Lookup(ctx context.Context, query string) (string, error)
}

// TurnKnowledge is a Knowledge that also retrieves for every turn, before the model answers
// (the agent's knowledge mode auto).
type TurnKnowledge interface {
	Knowledge
	Retrieve(ctx context.Context, query string) (Retrieval, error)
}

// Retrieval is what one turn retrieved: the text that goes into the LLM request (within the
// token budget) and the chunks it came from.
type Retrieval struct {
	Context string
	Chunks  []RetrievedChunk
}

// RetrievedChunk names one retrieved chunk in the transcript.
type RetrievedChunk struct {
	ID         string  `json:"id"`
	DocumentID string  `json:"document_id"`
	Source     string  `json:"source"` // document name or page URL, with the heading
	Score      float64 `json:"score"`
}

// toolSpec returns the declaration of the tool called name (nil for an undeclared one).
func (c *Conversation) toolSpec(name string) *ToolSpec {
	for i := range c.agent.Tools {
		if c.agent.Tools[i].Name == name {
			return &c.agent.Tools[i]
		}
	}
	return nil
}

// builtin reports whether name is a tool the engine runs itself.
func builtin(name string) bool {
	_, ok := builtinSchemas[name]
	return ok
}

// maxToolLine bounds the text of a tool's transcript line.
const maxToolLine = 2000

// toolOutcome is how one call went.
type toolOutcome struct {
	result string
	kind   respKind
	status string // ok, error, timeout, cancelled
	dur    time.Duration
}

// runTools runs the calls in parallel, each within its tool's timeout, records them in the
// transcript and the history, and reports whether the reply is over: a call ended the
// conversation, or say is what the caller hears instead of another LLM round (the results of
// speak-mode tools, or the apology when every call failed). A filler is spoken when the calls
// run past the agent's filler delay. On barge-in (ctx cancelled) the calls are cancelled and
// their late results dropped, with a note in the transcript.
func (c *Conversation) runTools(ctx context.Context, gen int, calls []llm.ToolCall, emit func(respEvent)) (ended bool, say string) {
	filler := ""
	for _, call := range calls {
		if sp := c.toolSpec(call.Name); sp != nil && sp.Filler != "" {
			filler = sp.Filler
			break
		}
	}
	emit(respEvent{kind: respToolsStarted, text: filler})
	out := make([]toolOutcome, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx := ctx
			if sp := c.toolSpec(call.Name); sp != nil && sp.Timeout > 0 {
				var cancel context.CancelFunc
				cctx, cancel = context.WithTimeout(ctx, sp.Timeout)
				defer cancel()
			}
			start := c.now()
			res, kind, err := c.runTool(cctx, call)
			o := toolOutcome{result: res, kind: kind, status: "ok", dur: c.now().Sub(start)}
			switch {
			case ctx.Err() != nil:
				o.status = "cancelled"
				o.result = `{"error":"cancelled: the caller interrupted before the result arrived"}`
			case err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded):
				o.status = "timeout"
				o.result = jsonError("the tool " + call.Name + " failed: it did not answer in time")
			case err != nil:
				o.status = "error"
				o.result = jsonError("the tool " + call.Name + " failed: " + err.Error())
			}
			out[i] = o
		}()
	}
	wg.Wait()
	emit(respEvent{kind: respToolsDone})
	cancelled := ctx.Err() != nil
	var endCall, transferred bool
	allFailed, allSpoken := true, true
	var spoken []string
	apology := ""
	for i, call := range calls {
		o := out[i]
		c.appendHistory(llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Content: o.result}, gen)
		now := c.now()
		text := call.Name + "(" + string(call.Arguments) + ") → " + o.result
		if cancelled {
			text = call.Name + "(" + string(call.Arguments) + ") cancelled: the caller interrupted; a late result is dropped"
		}
		if len(text) > maxToolLine {
			text = strings.ToValidUTF8(text[:maxToolLine], "") + "…"
		}
		c.addLineSafe(Line{Role: RoleTool, Text: text, Start: now.Add(-o.dur), End: now,
			Meta: map[string]any{"tool": call.Name, "call_id": call.ID, "status": o.status, "duration_ms": o.dur.Milliseconds(), "result_bytes": len(o.result)}})
		switch o.kind {
		case respEndCall:
			endCall = true
		case respTransferred:
			transferred = true
		}
		sp := c.toolSpec(call.Name)
		if o.status == "ok" || builtin(call.Name) || sp == nil {
			// A name the agent does not declare is the LLM's slip, not a failing tool: it is
			// told so (the history holds it) and asked again.
			allFailed = false
		} else if sp != nil && sp.Apology != "" && apology == "" {
			apology = sp.Apology
		}
		if sp == nil || !sp.SpeakResult || o.status != "ok" {
			allSpoken = false
		} else {
			spoken = append(spoken, o.result)
		}
	}
	if cancelled {
		return true, ""
	}
	if transferred {
		emit(respEvent{kind: respTransferred})
		return true, ""
	}
	if endCall {
		emit(respEvent{kind: respEndCall})
		return true, ""
	}
	if allFailed {
		// The LLM has been told (the history holds the failures); the caller hears the apology
		// now rather than silence while another round is asked for.
		if apology == "" {
			apology = c.agent.ApologyText
		}
		return true, apology
	}
	if allSpoken {
		return true, strings.Join(spoken, " ")
	}
	return false, ""
}

// addLineSafe appends a line from a worker goroutine (the transcript is locked; the sink is
// called from here too, so sinks must be safe for concurrent use).
func (c *Conversation) addLineSafe(l Line) { c.addLine(l) }

func (c *Conversation) runTool(ctx context.Context, call llm.ToolCall) (string, respKind, error) {
	var args map[string]any
	if len(call.Arguments) > 0 {
		if err := json.Unmarshal(call.Arguments, &args); err != nil {
			return "", 0, errors.New("the arguments are not valid JSON")
		}
	}
	str := func(k string) string { s, _ := args[k].(string); return s }
	switch call.Name {
	case ToolEndCall:
		return `{"ok":true}`, respEndCall, nil
	case ToolTransfer:
		if c.port == nil {
			return `{"error":"transfer is not possible in this channel"}`, 0, nil
		}
		mode := TransferMode(str("mode"))
		if mode != TransferWarm {
			mode = TransferCold
		}
		err := c.port.Transfer(ctx, TransferRequest{Destination: str("destination"), Mode: mode, Summary: str("summary"), Timeout: 30 * time.Second})
		if err != nil {
			return jsonError("transfer failed: " + err.Error()), 0, nil
		}
		return `{"ok":true}`, respTransferred, nil
	case ToolSendDTMF:
		if c.port == nil {
			return `{"error":"DTMF is not possible in this channel"}`, 0, nil
		}
		if err := c.port.SendDTMF(ctx, str("digits")); err != nil {
			return jsonError(err.Error()), 0, nil
		}
		return `{"ok":true}`, 0, nil
	case ToolKnowledge:
		if c.know == nil {
			return `{"error":"no knowledge base is configured"}`, 0, nil
		}
		res, err := c.know.Lookup(ctx, str("query"))
		if err != nil {
			return jsonError(err.Error()), 0, nil
		}
		return res, 0, nil
	case ToolHandOver:
		res, err := c.handOver(ctx, str("specialist"))
		return res, 0, err
	}
	if c.tools == nil {
		return "", 0, errors.New("unknown tool " + call.Name)
	}
	res, err := c.tools.Call(ctx, call.Name, call.Arguments)
	if err != nil {
		return "", 0, err
	}
	return res, 0, nil
}

func jsonError(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}
