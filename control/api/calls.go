package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/problem"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// callBody is the body of POST /v1/calls (and, with dial_at, of a scheduled call).
type callBody struct {
	AgentID       string              `json:"agent_id"`
	ToNumber      string              `json:"to_number"`
	AgentVersion  *int                `json:"agent_version"`
	CallWindow    *runtime.CallWindow `json:"call_window"`
	ExternalID    *string             `json:"external_id"`
	FromNumber    *string             `json:"from_number"`
	PhoneNumberID *string             `json:"phone_number_id"`
	Language      *string             `json:"language"`
	DialAt        *time.Time          `json:"dial_at"`
}

// caller is who a conversation is started for: the organization, the key's mode, and the
// projects the key reaches (a scheduled call being dialled has no key: it reaches the project
// it was made in).
type caller struct {
	org     store.Org
	mode    store.Mode
	reaches func(store.ProjectID) bool
}

func callerOf(p *Principal) caller {
	return caller{org: p.Org, mode: p.Key.Mode, reaches: p.Key.Reaches}
}

// conversationStart is what the checks of a conversation's start found.
type conversationStart struct {
	agent     store.Agent
	def       *agentdef.Definition
	version   int
	language  string
	variables json.RawMessage
	metadata  json.RawMessage
	external  string
	from      store.PhoneNumber // phone calls: the number it is made from
	window    *runtime.Window
}

// startChecks are the checks every conversation start shares: the agent (reachable,
// published, of a direction, taking a channel), its project (not frozen), the pinned version,
// the language and the variables, and the credit of a live conversation.
type startChecks struct {
	direction string           // "" any
	channel   agentdef.Channel // the channel the agent must take
}

// checkStart runs the shared checks on a body holding agent_id, agent_version, language,
// variables, metadata and external_id.
func (a *API) checkStart(ctx context.Context, q *store.Queries, who caller, value any, sc startChecks) (conversationStart, error) {
	obj, _ := value.(map[string]any)
	var cs conversationStart
	agentID, _ := obj["agent_id"].(string)
	ag, err := agentFor(ctx, q, who, agentID)
	if err != nil {
		return cs, err
	}
	cs.agent = ag
	switch {
	case sc.direction == "outbound" && ag.Direction != "outbound":
		return cs, fault.E(fault.CodeAgentNotOutbound, "Agent %s answers calls; it does not place them. Use an outbound agent.", ag.Name)
	case sc.direction == "inbound" && ag.Direction != "inbound":
		return cs, fault.E(fault.CodeAgentNotInbound, "Agent %s places calls; it does not answer them. Use an inbound agent.", ag.Name)
	case ag.Status != store.AgentPublished:
		return cs, fault.E(fault.CodeAgentNotPublished, "Agent %s is not published: publish it (POST /v1/agents/%s/publish) before it takes part in conversations.", ag.Name, ag.ID)
	case !slices.Contains(ag.Channels, string(sc.channel)):
		return cs, fault.E(fault.CodeChannelDisabled, "Agent %s does not take the %s channel; add it to the definition's channels.", ag.Name, sc.channel)
	}
	pr, err := q.GetProject(ctx, ag.ProjectID)
	if err != nil {
		return cs, err
	}
	if pr.Frozen {
		return cs, fault.E(fault.CodeProjectFrozen, "The project %s is frozen: it starts no conversation.", pr.Name)
	}
	var ps []jsoncheck.Problem
	if v, ok := obj["agent_version"].(json.Number); ok {
		n, _ := v.Int64()
		cs.version = int(n)
	} else if f, ok := obj["agent_version"].(float64); ok {
		cs.version = int(f)
	}
	cs.def, err = runtime.LoadDefinition(ctx, q, ag, cs.version)
	if errors.Is(err, runtime.ErrVersionNotFound) {
		return cs, invalid(fault.CodeValidationFailed, []jsoncheck.Problem{{Pointer: "/agent_version", Code: "invalid_value",
			Detail: fmt.Sprintf("Agent %s has no published version %d.", ag.Name, cs.version)}})
	}
	if err != nil {
		return cs, err
	}
	langs := runtime.Languages(cs.def)
	cs.language = langs[0]
	if l, ok := obj["language"].(string); ok {
		if !slices.Contains(langs, l) {
			ps = append(ps, jsoncheck.Problem{Pointer: "/language", Code: "invalid_value",
				Detail: fmt.Sprintf("The agent speaks %s, not %q.", strings.Join(langs, ", "), l)})
		}
		cs.language = l
	}
	vars, _ := obj["variables"].(map[string]any)
	if vars == nil {
		vars = map[string]any{}
	}
	for _, p := range cs.def.CheckVariables(vars) {
		ps = append(ps, jsoncheck.Problem{Pointer: "/variables" + p.Pointer, Code: p.Code, Detail: p.Detail})
	}
	for k, v := range vars {
		if s, ok := v.(string); ok && strings.Contains(s, "{{") {
			ps = append(ps, jsoncheck.Problem{Pointer: "/variables/" + jsoncheck.EscapePointer(k), Code: "invalid_value",
				Detail: fmt.Sprintf("Variable %q cannot hold \"{{\".", k)})
		}
	}
	if len(ps) > 0 {
		slices.SortFunc(ps, func(a, b jsoncheck.Problem) int { return strings.Compare(a.Pointer, b.Pointer) })
		return cs, invalid(fault.CodeValidationFailed, ps)
	}
	if cs.variables, err = json.Marshal(vars); err != nil {
		return cs, err
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	if cs.metadata, err = json.Marshal(meta); err != nil {
		return cs, err
	}
	cs.external, _ = obj["external_id"].(string)
	if who.mode == store.ModeLive {
		org, err := q.GetOrg(ctx, who.org.ID)
		if err != nil {
			return cs, err
		}
		if org.CreditMicros <= 0 {
			return cs, fault.E(fault.CodeCreditExhausted, "The organization's credit is used up (%s USD); add credit to start conversations.", formatUSD(org.CreditMicros))
		}
	}
	return cs, nil
}

// agentFor returns the agent of a body's agent_id when who reaches it (404 otherwise).
func agentFor(ctx context.Context, q *store.Queries, who caller, raw string) (store.Agent, error) {
	id, err := store.ParseID[store.AgentID](raw)
	if err != nil {
		return store.Agent{}, errAgentNotFound(raw)
	}
	ag, err := q.GetAgent(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && (ag.OrgID != who.org.ID || !who.reaches(ag.ProjectID)) {
		return store.Agent{}, errAgentNotFound(raw)
	}
	return ag, err
}

// checkCall runs the checks of an outbound call on top of checkStart: the numbers (to call, and
// to call from), the do-not-call list and the call window (whether it is open now only when
// openNow is set).
func (a *API) checkCall(ctx context.Context, q *store.Queries, who caller, value any, body callBody, now time.Time, openNow bool) (conversationStart, error) {
	cs, err := a.checkStart(ctx, q, who, value, startChecks{direction: "outbound", channel: agentdef.ChannelPhone})
	if err != nil {
		return cs, err
	}
	var ps []jsoncheck.Problem
	if !store.ValidE164(body.ToNumber) {
		ps = append(ps, jsoncheck.Problem{Pointer: "/to_number", Code: "invalid_format",
			Detail: fmt.Sprintf("to_number must be an international number with a leading plus sign (E.164), such as +14155550100, not %q.", body.ToNumber)})
	}
	nums, err := q.AgentPhoneNumbers(ctx, cs.agent.ID)
	if err != nil {
		return cs, err
	}
	switch {
	case body.FromNumber != nil && body.PhoneNumberID != nil:
		ps = append(ps, jsoncheck.Problem{Pointer: "/phone_number_id", Code: "not_allowed", Detail: "Give from_number or phone_number_id, not both."})
	case body.FromNumber != nil:
		i := slices.IndexFunc(nums, func(n store.PhoneNumber) bool { return n.Number == *body.FromNumber })
		if i < 0 {
			ps = append(ps, jsoncheck.Problem{Pointer: "/from_number", Code: "invalid_value", Detail: fmt.Sprintf("%q is not one of the agent's numbers.", *body.FromNumber)})
		} else {
			cs.from = nums[i]
		}
	case body.PhoneNumberID != nil:
		i := slices.IndexFunc(nums, func(n store.PhoneNumber) bool { return string(n.ID) == *body.PhoneNumberID })
		if i < 0 {
			ps = append(ps, jsoncheck.Problem{Pointer: "/phone_number_id", Code: "invalid_value", Detail: fmt.Sprintf("%q is not one of the agent's numbers.", *body.PhoneNumberID)})
		} else {
			cs.from = nums[i]
		}
	case len(nums) == 0:
		return cs, fault.E(fault.CodeNoNumberToCallFrom, "Agent %s has no phone number to call from; assign one (PATCH /v1/phone-numbers/{id}).", cs.agent.Name)
	default:
		cs.from = nums[0]
	}
	if body.CallWindow != nil {
		w, wps := body.CallWindow.Parse(who.org.Timezone)
		for _, p := range wps {
			ps = append(ps, jsoncheck.Problem{Pointer: "/call_window" + p.Pointer, Code: p.Code, Detail: p.Detail})
		}
		cs.window = w
	}
	if len(ps) > 0 {
		return cs, invalid(fault.CodeValidationFailed, ps)
	}
	if on, err := q.OnDoNotCall(ctx, who.org.ID, body.ToNumber); err != nil {
		return cs, err
	} else if on {
		return cs, fault.E(fault.CodeDoNotCall, "%s is on the organization's do-not-call list.", body.ToNumber)
	}
	if openNow && cs.window != nil {
		if opens, ok := cs.window.NextOpening(now); ok && !opens.Equal(now) {
			return cs, outsideWindow(opens)
		}
	}
	return cs, nil
}

// outsideWindow is the 422 of a call outside its window, naming when it opens.
func outsideWindow(opens time.Time) error {
	e := fault.E(fault.CodeOutsideCallWindow, "The call is outside its call_window, which opens at %s (%s).", opens.Format(time.RFC3339), opens.UTC().Format(time.RFC3339))
	e.Extra = map[string]any{"opens_at": opens.Format(time.RFC3339)}
	return e
}

// newConversation stores the conversation a start makes.
func newConversation(who caller, cs conversationStart, channel, direction, status string) store.Conversation {
	c := store.Conversation{ID: store.NewConversationID(), OrgID: who.org.ID, ProjectID: cs.agent.ProjectID, AgentID: cs.agent.ID,
		AgentVersion: cs.version, Channel: channel, Direction: direction, Mode: who.mode, Status: status, Language: cs.language,
		ExternalID: cs.external, Metadata: cs.metadata, Variables: cs.variables}
	if cs.from.ID != "" {
		c.FromNumber, c.PhoneNumberID = cs.from.Number, cs.from.ID
	}
	return c
}

func (a *API) createCall(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	var body callBody
	if err := c.bind(&body); err != nil {
		return err
	}
	who := callerOf(c.p)
	cs, err := a.checkCall(ctx, a.Store.Queries, who, c.value, body, a.now(), true)
	if err != nil {
		return err
	}
	conv := newConversation(who, cs, store.ChannelPhone, "outbound", store.ConvPending)
	conv.ToNumber = body.ToNumber
	return a.startCall(w, r, conv, runtime.PlaceRequest{ConversationID: conv.ID, Trunk: cs.from.Trunk}, "call.created")
}

// startCall stores a voice conversation, takes a call slot, has a media node run it, and
// answers 201 with the conversation (storing the answer for its Idempotency-Key). When it
// cannot be placed the conversation ends as failed and the slot is given back.
func (a *API) startCall(w http.ResponseWriter, r *http.Request, conv store.Conversation, place runtime.PlaceRequest, action string) error {
	ctx := r.Context()
	c := callFrom(ctx)
	if a.Runtime == nil {
		return mapRuntimeError(runtime.ErrNoMedia, true)
	}
	if err := a.Runtime.AcquireCallSlot(ctx, conv.OrgID, conv.ID, a.MaxCalls); err != nil {
		return mapRuntimeError(err, true)
	}
	err := a.Store.Tx(ctx, func(tx *store.Tx) error {
		created, err := tx.CreateConversation(ctx, conv)
		if err != nil {
			return err
		}
		conv = created
		au := &auditor{api: a, r: r, tx: tx}
		return au.record(action, "conversation", string(conv.ID), conv.ProjectID, map[string]any{
			"agent_id": conv.AgentID, "channel": conv.Channel, "direction": conv.Direction, "to_number": conv.ToNumber})
	})
	if err != nil {
		a.Runtime.ReleaseCallSlot(context.WithoutCancel(ctx), conv.OrgID, conv.ID)
		return err
	}
	if err := a.Runtime.Place(ctx, conv.Mode, place); err != nil {
		a.abandon(ctx, conv, session.EndFailed)
		return mapRuntimeError(err, conv.Channel == store.ChannelPhone)
	}
	return a.answerCreated(w, r, c, "/v1/conversations/"+string(conv.ID), viewConversation(conv))
}

// abandon ends a conversation that could not be started and gives its call slot back.
func (a *API) abandon(ctx context.Context, conv store.Conversation, reason session.EndReason) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := a.Runtime.End(ctx, conv.ID, reason, false); err != nil {
		a.Log.WarnContext(ctx, "a conversation that could not start was not ended", "conversation", conv.ID, "err", err, "request_id", problem.RequestID(ctx))
	}
	a.Runtime.ReleaseCallSlot(ctx, conv.OrgID, conv.ID)
}

// answerCreated answers 201 with v, storing the answer for the request's Idempotency-Key.
func (a *API) answerCreated(w http.ResponseWriter, r *http.Request, c *call, location string, v any) error {
	return a.answer(w, r, c, http.StatusCreated, location, v)
}

// answer writes v with status after storing it for the request's Idempotency-Key (when it has
// one), so that a retry gets the same answer.
func (a *API) answer(w http.ResponseWriter, r *http.Request, c *call, status int, location string, v any) error {
	ctx := r.Context()
	body, err := encodeJSON(v)
	if err != nil {
		return err
	}
	ans := &answer{status: status, header: map[string]string{"Content-Type": "application/json"}, body: body}
	if location != "" {
		ans.header["Location"] = location
	}
	if c != nil && c.idem != nil {
		sctx := context.WithoutCancel(ctx)
		if err := a.Store.Tx(sctx, func(tx *store.Tx) error { return a.saveIdempotency(sctx, tx, c, ans) }); err != nil {
			a.Log.WarnContext(ctx, "the answer of an Idempotency-Key was not stored", "err", err, "request_id", problem.RequestID(ctx))
		}
	}
	for k, v := range ans.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(ans.status)
	_, _ = w.Write(ans.body)
	return nil
}

// testInboundBody is the body of POST /v1/test/inbound-calls.
type testInboundBody struct {
	AgentID    *string  `json:"agent_id"`
	ToNumber   *string  `json:"to_number"`
	FromNumber *string  `json:"from_number"`
	Lines      []string `json:"lines"`
}

// defaultTestCaller is the caller's number of a test inbound call that names none.
const defaultTestCaller = "+15005550006"

func (a *API) createTestInboundCall(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c := callFrom(ctx)
	var body testInboundBody
	if err := c.bind(&body); err != nil {
		return err
	}
	obj, _ := c.value.(map[string]any)
	who := callerOf(c.p)
	who.mode = store.ModeTest // a test call rings nobody, whatever the key
	var number *store.PhoneNumber
	switch {
	case (body.AgentID == nil) == (body.ToNumber == nil):
		return invalid(fault.CodeValidationFailed, []jsoncheck.Problem{{Pointer: "", Code: "required", Detail: "Name the agent (agent_id) or the number called (to_number), one of them."}})
	case body.ToNumber != nil:
		n, err := a.Store.FindPhoneNumber(ctx, *body.ToNumber)
		if errors.Is(err, store.ErrNotFound) || err == nil && (n.OrgID != c.p.Org.ID || !c.p.Key.Reaches(n.ProjectID)) {
			return fault.E(fault.CodePhoneNumberNotFound, "No phone number %s is reachable with this key.", quoteID(*body.ToNumber))
		}
		if err != nil {
			return err
		}
		if n.AgentID == "" {
			return fault.E(fault.CodeAgentNotFound, "Number %s has no agent to answer it.", n.Number)
		}
		number = &n
		obj["agent_id"] = string(n.AgentID)
	}
	cs, err := a.checkStart(ctx, a.Store.Queries, who, obj, startChecks{direction: "inbound", channel: agentdef.ChannelPhone})
	if err != nil {
		return err
	}
	from := defaultTestCaller
	if body.FromNumber != nil {
		from = *body.FromNumber
	}
	conv := newConversation(who, cs, store.ChannelPhone, "inbound", store.ConvPending)
	conv.FromNumber = from
	if number == nil {
		if nums, err := a.Store.AgentPhoneNumbers(ctx, cs.agent.ID); err == nil && len(nums) > 0 {
			number = &nums[0]
		}
	}
	if number != nil {
		conv.ToNumber, conv.PhoneNumberID = number.Number, number.ID
	}
	return a.startCall(w, r, conv, runtime.PlaceRequest{ConversationID: conv.ID, Lines: body.Lines}, "test_call.created")
}
