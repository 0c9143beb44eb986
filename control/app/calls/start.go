package calls

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/billing"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/jsoncheck"
	"github.com/parley-voice/parley/control/store"
)

// The start rules: what every conversation's start checks (calls now and later, browser calls,
// chats, test calls), in one place that HTTP, the scheduler and the admin CLI share.

// StartOptions are the members every start takes besides its agent.
type StartOptions struct {
	AgentVersion *int      `json:"agent_version,omitempty" doc:"Run with this published version for every turn; the live definition when null." jsonschema:"minimum=1,nullable"`
	ExternalID   *string   `json:"external_id,omitempty" jsonschema:"maxLength=255,nullable"`
	Language     *string   `json:"language,omitempty" doc:"One of the agent's language versions; its own when null." jsonschema:"minLength=2,maxLength=16,nullable"`
	Metadata     Metadata  `json:"metadata,omitempty"`
	Variables    Variables `json:"variables,omitempty"`
}

// Metadata is the customer's own data on a conversation. Numbers are kept as they were written.
type Metadata map[string]any

// SchemaDoc describes the object in the document.
func (Metadata) SchemaDoc() string {
	return "Your own data, returned on every read and event; the agent never sees it."
}

// SchemaExtras adds what the Go type cannot say.
func (Metadata) SchemaExtras() map[string]any { return map[string]any{"maxProperties": 50} }

// UnmarshalJSON decodes the object keeping its numbers as written (json.Number).
func (m *Metadata) UnmarshalJSON(b []byte) error { return decodeNumbers(b, (*map[string]any)(m)) }

// Variables are the values of an agent's {{placeholders}}. Numbers are kept as they were written.
type Variables map[string]any

// SchemaDoc describes the object in the document.
func (Variables) SchemaDoc() string {
	return "Values for the agent's {{placeholders}}: text, numbers or true/false; see the agent's variables_schema. A value cannot hold \"{{\"."
}

// SchemaExtras adds what the Go type cannot say: the values' types and how many there may be.
func (Variables) SchemaExtras() map[string]any {
	return map[string]any{"maxProperties": 100, "additionalProperties": map[string]any{"type": []any{"string", "number", "boolean"}}}
}

// UnmarshalJSON decodes the object keeping its numbers as written (json.Number).
func (v *Variables) UnmarshalJSON(b []byte) error { return decodeNumbers(b, (*map[string]any)(v)) }

func decodeNumbers(b []byte, dst *map[string]any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(dst)
}

// Need is what a start asks of its agent: a direction ("" any) and a channel it takes.
type Need struct {
	Direction string
	Channel   agentdef.Channel
}

// Start is what the checks of a start found: the agent, the definition it runs and the values
// the conversation is stored with.
type Start struct {
	Agent     store.Agent
	Def       *agentdef.Definition
	Version   int
	Language  string
	Variables json.RawMessage
	Metadata  json.RawMessage
	External  string
	From      store.PhoneNumber // phone calls: the number it is made from
	Window    *Window           // phone calls: when it may start (nil: any time)
}

// Rules checks starts. Calls, web calls, chats and test calls share it.
type Rules struct {
	Store       *store.Store
	Definitions Definitions
}

// Check runs the checks every start shares, for act in mode: the agent (in act's scope,
// published, of the direction, taking the channel), its project (not frozen), the pinned
// version, the language and the variables, and the credit of a live conversation.
func (r Rules) Check(ctx context.Context, q *store.Queries, act app.Actor, mode store.Mode, agentID string, o StartOptions, need Need) (Start, error) {
	var st Start
	ag, err := q.AgentInScope(ctx, act.Scope, store.AgentID(agentID))
	if err != nil {
		return st, app.NotFound(err, fault.CodeAgentNotFound, "agent", agentID)
	}
	st.Agent = ag
	switch {
	case need.Direction == "outbound" && ag.Direction != "outbound":
		return st, fault.E(fault.CodeAgentNotOutbound, "Agent %s answers calls; it does not place them. Use an outbound agent.", ag.Name)
	case need.Direction == "inbound" && ag.Direction != "inbound":
		return st, fault.E(fault.CodeAgentNotInbound, "Agent %s places calls; it does not answer them. Use an inbound agent.", ag.Name)
	case ag.Status != store.AgentPublished:
		return st, fault.E(fault.CodeAgentNotPublished, "Agent %s is not published: publish it (POST /v1/agents/%s/publish) before it takes part in conversations.", ag.Name, ag.ID)
	case !slices.Contains(ag.Channels, string(need.Channel)):
		return st, fault.E(fault.CodeChannelDisabled, "Agent %s does not take the %s channel; add it to the definition's channels.", ag.Name, need.Channel)
	}
	pr, err := q.Projects().Get(ctx, act.Scope, ag.ProjectID)
	if err != nil {
		return st, err
	}
	if pr.Frozen {
		return st, fault.E(fault.CodeProjectFrozen, "The project %s is frozen: it starts no conversation.", pr.Name)
	}
	if o.AgentVersion != nil {
		st.Version = *o.AgentVersion
	}
	def, langs, err := r.Definitions.Definition(ctx, q, ag, st.Version)
	if errors.Is(err, ErrNoVersion) {
		return st, app.Invalid(jsoncheck.Problem{Pointer: "/agent_version", Code: "invalid_value",
			Detail: fmt.Sprintf("Agent %s has no published version %d.", ag.Name, st.Version)})
	}
	if err != nil {
		return st, err
	}
	st.Def, st.Language = def, langs[0]
	var ps []jsoncheck.Problem
	if o.Language != nil {
		if !slices.Contains(langs, *o.Language) {
			ps = append(ps, jsoncheck.Problem{Pointer: "/language", Code: "invalid_value",
				Detail: fmt.Sprintf("The agent speaks %s, not %q.", strings.Join(langs, ", "), *o.Language)})
		}
		st.Language = *o.Language
	}
	vars := map[string]any(o.Variables)
	if vars == nil {
		vars = map[string]any{}
	}
	for _, p := range def.CheckVariables(vars) {
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
		return st, app.Invalid(ps...)
	}
	if st.Variables, err = json.Marshal(vars); err != nil {
		return st, err
	}
	meta := map[string]any(o.Metadata)
	if meta == nil {
		meta = map[string]any{}
	}
	if st.Metadata, err = json.Marshal(meta); err != nil {
		return st, err
	}
	if o.ExternalID != nil {
		st.External = *o.ExternalID
	}
	if mode == store.ModeLive {
		// What can still be spent: the balance less what calls in progress have reserved.
		if err := billing.CheckCanSpend(ctx, q, act.Org.ID, time.Now()); err != nil {
			return st, err
		}
	}
	return st, nil
}

// CheckCall runs the checks of an outbound phone call on top of Check: the numbers (to call,
// and to call from), the do-not-call list and the call window (whether it is open at now only
// when openNow is set).
func (r Rules) CheckCall(ctx context.Context, q *store.Queries, act app.Actor, mode store.Mode, body CallCreate, now time.Time, openNow bool) (Start, error) {
	st, err := r.Check(ctx, q, act, mode, body.AgentID, body.StartOptions, Need{Direction: "outbound", Channel: agentdef.ChannelPhone})
	if err != nil {
		return st, err
	}
	var ps []jsoncheck.Problem
	if !store.ValidE164(body.ToNumber) {
		ps = append(ps, jsoncheck.Problem{Pointer: "/to_number", Code: "invalid_format",
			Detail: fmt.Sprintf("to_number must be an international number with a leading plus sign (E.164), such as +14155550100, not %q.", body.ToNumber)})
	}
	nums, err := q.AgentPhoneNumbers(ctx, st.Agent.ID)
	if err != nil {
		return st, err
	}
	pick := func(pointer, want string, match func(store.PhoneNumber) bool) {
		i := slices.IndexFunc(nums, match)
		if i < 0 {
			ps = append(ps, jsoncheck.Problem{Pointer: pointer, Code: "invalid_value", Detail: fmt.Sprintf("%q is not one of the agent's numbers.", want)})
			return
		}
		st.From = nums[i]
	}
	switch {
	case body.FromNumber != nil && body.PhoneNumberID != nil:
		ps = append(ps, jsoncheck.Problem{Pointer: "/phone_number_id", Code: "not_allowed", Detail: "Give from_number or phone_number_id, not both."})
	case body.FromNumber != nil:
		pick("/from_number", *body.FromNumber, func(n store.PhoneNumber) bool { return n.Number == *body.FromNumber })
	case body.PhoneNumberID != nil:
		pick("/phone_number_id", *body.PhoneNumberID, func(n store.PhoneNumber) bool { return string(n.ID) == *body.PhoneNumberID })
	case len(nums) == 0:
		return st, fault.E(fault.CodeNoNumberToCallFrom, "Agent %s has no phone number to call from; assign one (PATCH /v1/phone-numbers/{id}).", st.Agent.Name)
	default:
		st.From = nums[0]
	}
	if body.CallWindow != nil {
		w, wps := body.CallWindow.Parse(act.Org.Timezone)
		for _, p := range wps {
			ps = append(ps, jsoncheck.Problem{Pointer: "/call_window" + p.Pointer, Code: p.Code, Detail: p.Detail})
		}
		st.Window = w
	}
	if len(ps) > 0 {
		return st, app.Invalid(ps...)
	}
	if on, err := q.OnDoNotCall(ctx, act.Org.ID, body.ToNumber); err != nil {
		return st, err
	} else if on {
		return st, fault.E(fault.CodeDoNotCall, "%s is on the organization's do-not-call list.", body.ToNumber)
	}
	if openNow && st.Window != nil {
		if opens, ok := st.Window.NextOpening(now); ok && !opens.Equal(now) {
			return st, outsideWindow(opens)
		}
	}
	return st, nil
}

// outsideWindow is the 422 of a call outside its window, naming when it opens.
func outsideWindow(opens time.Time) error {
	e := fault.E(fault.CodeOutsideCallWindow, "The call is outside its call_window, which opens at %s (%s).", opens.Format(time.RFC3339), opens.UTC().Format(time.RFC3339))
	e.Extra = map[string]any{"opens_at": app.Time{Time: opens}}
	return e
}

// NewConversation is the conversation a start makes, in act's organization and mode.
func NewConversation(act app.Actor, mode store.Mode, st Start, channel, direction, status string) store.Conversation {
	c := store.Conversation{ID: store.NewConversationID(), OrgID: act.Org.ID, ProjectID: st.Agent.ProjectID, AgentID: st.Agent.ID,
		AgentVersion: st.Version, Channel: channel, Direction: direction, Mode: mode, Status: status, Language: st.Language,
		ExternalID: st.External, Metadata: st.Metadata, Variables: st.Variables}
	if st.From.ID != "" {
		c.FromNumber, c.PhoneNumberID = st.From.Number, st.From.ID
	}
	return c
}
