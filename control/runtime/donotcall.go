package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// ToolDoNotCall is the built-in tool a phone call's model calls when the person asks not to be
// called again (issue 15): the person's number goes on the organization's do-not-call list.
const ToolDoNotCall = "add_to_do_not_call"

const doNotCallParams = `{"type":"object","properties":{"reason":{"type":"string","maxLength":300,"description":"the person's words, briefly"}},"additionalProperties":false}`

// doNotCallFor offers the tool on a phone call whose definition leaves do_not_call_tool on and
// whose other side has an E.164 number (the callee of an outbound call, the caller of an inbound
// one). It wraps next, the runner of the agent's own tools (nil when it has none).
func doNotCallFor(st *store.Store, log *slog.Logger, c store.Conversation, def *agentdef.Definition, a *session.Agent, next session.ToolRunner) session.ToolRunner {
	if c.Channel != store.ChannelPhone || !def.Agent.DoNotCallTool {
		return next
	}
	number := c.FromNumber
	if c.Direction == "outbound" {
		number = c.ToNumber
	}
	if !store.ValidE164(number) {
		return next // an anonymous caller: there is nothing to put on the list
	}
	a.Tools = append(a.Tools, session.ToolSpec{Name: ToolDoNotCall, Parameters: json.RawMessage(doNotCallParams),
		Description: "Put the person you are talking to on the do-not-call list, so that they are never called again. " +
			"Call it when they ask not to be called any more (stop calling me, take me off your list); then tell them so and say goodbye."})
	return &doNotCallTool{st: st, log: log, conv: c, number: number, next: next}
}

// doNotCallTool runs add_to_do_not_call and hands every other tool to next.
type doNotCallTool struct {
	st     *store.Store
	log    *slog.Logger
	conv   store.Conversation
	number string
	next   session.ToolRunner
}

func (d *doNotCallTool) Call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	if name != ToolDoNotCall {
		if d.next == nil {
			return "", errors.New("unknown tool " + name)
		}
		return d.next.Call(ctx, name, args)
	}
	var in struct {
		Reason string `json:"reason"`
	}
	if len(args) > 0 {
		_ = json.Unmarshal(args, &in) // the reason is optional; a bad one is left out
	}
	if d.conv.Mode == store.ModeTest {
		// A test conversation rings nobody; the organization's live list is not its to change.
		return `{"ok":true,"test":true,"note":"a test conversation does not change the do-not-call list"}`, nil
	}
	reason := "asked during conversation " + string(d.conv.ID)
	if r := strings.TrimSpace(in.Reason); r != "" {
		reason += ": " + r
	}
	if len(reason) > 500 {
		reason = strings.ToValidUTF8(reason[:500], "")
	}
	_, added, err := d.st.DoNotCallList().Add(ctx, store.OrgScope(d.conv.OrgID),
		store.DoNotCall{Number: d.number, Reason: reason, Source: store.DNCSourceCaller})
	if err != nil {
		d.log.Error("conversation: add_to_do_not_call could not write the list", "conversation", d.conv.ID, "err", err)
		return "", errors.New("the do-not-call list could not be written; tell the person it will be done and say goodbye")
	}
	out, _ := json.Marshal(map[string]any{"ok": true, "number": d.number, "added": added,
		"note": "the number is on the do-not-call list: it will not be called again"})
	return string(out), nil
}
