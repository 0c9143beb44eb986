package agentdef

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/parley-voice/parley/control/jsoncheck"
)

// Problem is one thing wrong with a definition, by JSON pointer from the document root.
type Problem = jsoncheck.Problem

// Problem codes of definitions beyond the schema's (see jsoncheck for those).
const (
	CodeInvalidPlaceholder = "invalid_placeholder" // a malformed {{marker}}
	CodeUnknownReference   = "unknown_reference"   // a name that is not where it must be listed
	CodeNotAllowedForKind  = "not_allowed_for_kind"
	CodeNotUnique          = jsoncheck.CodeNotUnique
	CodeNotAllowed         = "not_allowed"
)

// ValidationError lists the problems of a definition that was read but does not fit.
type ValidationError = jsoncheck.ProblemsError

//go:embed schema.json
var schemaJSON []byte

// SchemaID is the $id of the definition's JSON Schema.
const SchemaID = "https://parley.dev/schemas/service.agent-1.json"

// SchemaJSON returns the JSON Schema (draft 2020-12) of a definition as accepted on input.
func SchemaJSON() []byte { return bytes.Clone(schemaJSON) }

// SchemaValue returns the schema decoded (numbers as json.Number), a fresh copy per call.
func SchemaValue() map[string]any {
	v, err := jsoncheck.Decode(schemaJSON)
	if err != nil {
		panic("agentdef: embedded schema.json: " + err.Error()) // caught by the package tests
	}
	return v.(map[string]any)
}

var validator = sync.OnceValues(func() (*jsoncheck.Validator, error) {
	return jsoncheck.Compile(map[string]any{SchemaID: SchemaValue()}, SchemaID)
})

// Parse reads a definition document (the whole document with format, as exported, or as a
// client writes it). It returns the definition with every default filled in, or an error:
// *jsoncheck.SyntaxError or *jsoncheck.DuplicateError for JSON that cannot be read, and
// *ValidationError for a document that does not fit, listing every problem by place.
func Parse(data []byte) (*Definition, error) {
	v, err := jsoncheck.Decode(data)
	if err != nil {
		return nil, err
	}
	return ParseValue(v)
}

// ParseValue is Parse for a value already decoded by jsoncheck.Decode.
func ParseValue(v any) (*Definition, error) {
	val, err := validator()
	if err != nil {
		return nil, err
	}
	if ps := val.Validate(v); len(ps) > 0 {
		return nil, &ValidationError{Problems: ps}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("agentdef: re-encode: %w", err)
	}
	def := Defaults()
	if err := json.Unmarshal(raw, &def); err != nil {
		// The schema admits only what these types hold; reaching here is a schema/type drift.
		return nil, &ValidationError{Problems: []Problem{{Pointer: "", Code: jsoncheck.CodeInvalidValue, Detail: "The definition does not fit: " + err.Error()}}}
	}
	def.normalize()
	if ps := def.check(); len(ps) > 0 {
		return nil, &ValidationError{Problems: ps}
	}
	return &def, nil
}

// normalize fills what decoding over Defaults cannot: defaults inside array elements, and
// empty lists where a document gave none.
func (d *Definition) normalize() {
	a := &d.Agent
	if len(a.Channels) == 0 {
		a.Channels = DefaultChannels(a.Direction)
	}
	for i := range a.Languages {
		fixVoice(a.Languages[i].Voice)
	}
	for i := range a.Specialists {
		fixVoice(a.Specialists[i].Voice)
	}
	for i := range a.Steps {
		if a.Steps[i].Tools == nil {
			a.Steps[i].Tools = []string{}
		}
	}
	r := &d.References
	if r.SpecialistKnowledge == nil {
		r.SpecialistKnowledge = map[string][]string{}
	}
	if r.LanguageKnowledge == nil {
		r.LanguageKnowledge = map[string][]string{}
	}
}

func fixVoice(v *Voice) {
	if v != nil && v.Speed == 0 {
		v.Speed = defaultVoice().Speed
	}
}

// text is one string of a definition and how it is treated.
type text struct {
	ptr      string
	s        string
	template bool // may hold {{placeholders}}
	vendorID bool // a vendor's identifier: may be UUID-shaped
}

// texts lists every string a definition holds, in document order.
func (d *Definition) texts() []text {
	a := &d.Agent
	var out []text
	add := func(ptr, s string, template bool) {
		if s != "" {
			out = append(out, text{ptr: ptr, s: s, template: template})
		}
	}
	addList := func(ptr string, ss []string) {
		for i, s := range ss {
			add(ptr+"/"+strconv.Itoa(i), s, false)
		}
	}
	voice := func(ptr string, v *Voice) {
		if v != nil && v.Name != "" {
			out = append(out, text{ptr: ptr + "/name", s: v.Name, vendorID: true})
		}
	}
	field := func(ptr string, f Field) {
		add(ptr+"/description", f.Description, false)
		addList(ptr+"/options", f.Options)
	}
	add("/agent/name", a.Name, false)
	add("/agent/description", a.Description, false)
	add("/agent/system_prompt", a.SystemPrompt, true)
	add("/agent/first_message", a.FirstMessage, true)
	for i, l := range a.Languages {
		p := "/agent/languages/" + strconv.Itoa(i)
		add(p+"/system_prompt", l.SystemPrompt, true)
		add(p+"/first_message", l.FirstMessage, true)
		voice(p+"/voice", l.Voice)
	}
	voice("/agent/voice", &a.Voice)
	add("/agent/llm/provider", a.LLM.Provider, false)
	add("/agent/llm/model", a.LLM.Model, false)
	add("/agent/stt/provider", a.STT.Provider, false)
	add("/agent/stt/model", a.STT.Model, false)
	addList("/agent/stt/keywords", a.STT.Keywords)
	add("/agent/tts/provider", a.TTS.Provider, false)
	add("/agent/tts/model", a.TTS.Model, false)
	add("/agent/turn_taking/silence/reprompt_message", a.TurnTaking.Silence.RepromptMessage, true)
	add("/agent/end_call/message", a.EndCall.Message, true)
	addList("/agent/end_call/phrases", a.EndCall.Phrases)
	for i, s := range a.Fillers.Lines {
		add("/agent/fillers/lines/"+strconv.Itoa(i), s, true)
	}
	for i, f := range a.Collected {
		field("/agent/collected/"+strconv.Itoa(i), f)
	}
	add("/agent/analysis/success_criteria", a.Analysis.SuccessCriteria, false)
	for i, f := range a.Analysis.Fields {
		field("/agent/analysis/fields/"+strconv.Itoa(i), f)
	}
	for i, s := range a.Steps {
		p := "/agent/steps/" + strconv.Itoa(i)
		add(p+"/name", s.Name, false)
		add(p+"/instructions", s.Instructions, true)
		addList(p+"/tools", s.Tools)
	}
	for i, s := range a.Specialists {
		p := "/agent/specialists/" + strconv.Itoa(i)
		add(p+"/name", s.Name, false)
		add(p+"/description", s.Description, false)
		add(p+"/system_prompt", s.SystemPrompt, true)
		voice(p+"/voice", s.Voice)
	}
	r := &d.References
	addList("/references/tools", r.Tools)
	addList("/references/knowledge_bases", r.KnowledgeBases)
	if r.Calendar != nil {
		add("/references/calendar", *r.Calendar, false)
	}
	if r.CallbackAgent != nil {
		add("/references/callback_agent", *r.CallbackAgent, false)
	}
	for _, k := range sortedKeys(r.SpecialistKnowledge) {
		p := "/references/specialist_knowledge/" + jsoncheck.EscapePointer(k)
		add(p, k, false)
		addList(p, r.SpecialistKnowledge[k])
	}
	for _, k := range sortedKeys(r.LanguageKnowledge) {
		addList("/references/language_knowledge/"+jsoncheck.EscapePointer(k), r.LanguageKnowledge[k])
	}
	return out
}

func sortedKeys(m map[string][]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// check finds what the schema cannot say: forbidden content, malformed placeholders, names
// that must be unique or listed elsewhere, and members that only some kinds may have.
func (d *Definition) check() []Problem {
	var ps []Problem
	bad := func(ptr, code, detail string, args ...any) {
		ps = append(ps, Problem{Pointer: ptr, Code: code, Detail: fmt.Sprintf(detail, args...)})
	}
	for _, t := range d.texts() {
		for _, f := range scan(t.s, t.vendorID) {
			bad(t.ptr, f.code, "%s holds %s; a definition carries no phone number, domain, credential or id of another object. Refer to other things by name.", t.ptr, f.what)
		}
		if t.template {
			if _, err := Placeholders(t.s); err != nil {
				bad(t.ptr, CodeInvalidPlaceholder, "%s: %v.", t.ptr, err)
			}
		}
	}
	a := &d.Agent
	langs := map[string]bool{a.Language: true}
	for i, l := range a.Languages {
		p := "/agent/languages/" + strconv.Itoa(i) + "/code"
		if langs[l.Code] {
			if l.Code == a.Language {
				bad(p, CodeNotUnique, "%s is %q, the agent's own language; list only further languages here.", p, l.Code)
			} else {
				bad(p, CodeNotUnique, "%s repeats language %q.", p, l.Code)
			}
		}
		langs[l.Code] = true
	}
	checkFields := func(base string, fs []Field, reserved ...string) {
		seen := map[string]bool{}
		for i, f := range fs {
			p := base + "/" + strconv.Itoa(i)
			if seen[f.Name] {
				bad(p+"/name", CodeNotUnique, "%s repeats the field name %q.", p+"/name", f.Name)
			}
			if slices.Contains(reserved, f.Name) {
				bad(p+"/name", CodeNotAllowed, "%s: %q is reserved for the analysis itself.", p+"/name", f.Name)
			}
			seen[f.Name] = true
			if f.Type != FieldChoice && f.Options != nil {
				bad(p+"/options", CodeNotAllowed, "%s: only choice fields have options.", p+"/options")
			}
		}
	}
	checkFields("/agent/collected", a.Collected)
	checkFields("/agent/analysis/fields", a.Analysis.Fields, "summary", "successful")
	if a.Kind != KindWorkflow && len(a.Steps) > 0 {
		bad("/agent/steps", CodeNotAllowedForKind, "Only workflow agents have steps; this agent is %s.", a.Kind)
	}
	if a.Kind != KindDesk && len(a.Specialists) > 0 {
		bad("/agent/specialists", CodeNotAllowedForKind, "Only desk agents have specialists; this agent is %s.", a.Kind)
	}
	r := &d.References
	tools := map[string]bool{}
	for _, t := range r.Tools {
		tools[t] = true
	}
	stepNames := map[string]bool{}
	for i, s := range a.Steps {
		p := "/agent/steps/" + strconv.Itoa(i)
		if stepNames[s.Name] {
			bad(p+"/name", CodeNotUnique, "%s repeats the step name %q.", p+"/name", s.Name)
		}
		stepNames[s.Name] = true
		for j, t := range s.Tools {
			if !tools[t] {
				tp := p + "/tools/" + strconv.Itoa(j)
				bad(tp, CodeUnknownReference, "%s names the tool %q, which is not in /references/tools.", tp, t)
			}
		}
	}
	specialists := map[string]bool{}
	for i, s := range a.Specialists {
		p := "/agent/specialists/" + strconv.Itoa(i) + "/name"
		if specialists[s.Name] {
			bad(p, CodeNotUnique, "%s repeats the specialist name %q.", p, s.Name)
		}
		specialists[s.Name] = true
	}
	kbs := map[string]bool{}
	for _, k := range r.KnowledgeBases {
		kbs[k] = true
	}
	narrow := func(base string, m map[string][]string, known map[string]bool, what string) {
		for _, k := range sortedKeys(m) {
			p := base + "/" + jsoncheck.EscapePointer(k)
			if !known[k] {
				bad(p, CodeUnknownReference, "%s: the agent has no %s %q.", p, what, k)
			}
			for j, kb := range m[k] {
				if !kbs[kb] {
					kp := p + "/" + strconv.Itoa(j)
					bad(kp, CodeUnknownReference, "%s names the knowledge base %q, which is not in /references/knowledge_bases.", kp, kb)
				}
			}
		}
	}
	narrow("/references/specialist_knowledge", r.SpecialistKnowledge, specialists, "specialist")
	narrow("/references/language_knowledge", r.LanguageKnowledge, langs, "language")
	slices.SortStableFunc(ps, func(a, b Problem) int {
		switch {
		case a.Pointer < b.Pointer:
			return -1
		case a.Pointer > b.Pointer:
			return 1
		}
		return 0
	})
	return ps
}

// escape escapes one JSON pointer token.
func escape(s string) string { return jsoncheck.EscapePointer(s) }

// DefaultChannels are the channels of an agent whose definition names none: an inbound agent
// answers phone calls, browser calls and chats; an outbound agent places phone calls.
func DefaultChannels(direction Direction) []Channel {
	if direction == Outbound {
		return []Channel{ChannelPhone}
	}
	return []Channel{ChannelPhone, ChannelVoice, ChannelChat}
}
