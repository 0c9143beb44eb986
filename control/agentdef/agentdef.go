// Package agentdef is the agent definition document, format service.agent/1: its Go types, its
// JSON Schema (schema.json, served inside the OpenAPI document), its validation, the defaults of
// every setting, and the {{placeholder}} markers of its prompts with their rendering.
//
// The control plane validates and stores definitions with it; the conversation engine reads
// them with it. It depends on nothing of the API or the store, and must never: carry or accept
// a credential, an id of another object, a phone number or a domain in a definition (references
// are by name, resolved in the agent's project); do I/O; or hold global mutable state.
package agentdef

import (
	"encoding/json"
	"time"

	"github.com/parley-voice/parley/control/app"
)

// Format is the value of the format member of every definition this package reads and writes.
const Format = "service.agent/1"

// ObjectType is the value of the object member of an exported definition.
const ObjectType = "agent_definition"

// Kind is what sort of agent it is.
type Kind string

// Kinds.
const (
	KindFormFilling Kind = "form_filling" // collects the fields in Agent.Collected
	KindWorkflow    Kind = "workflow"     // follows Agent.Steps
	KindFAQ         Kind = "faq"          // answers from its knowledge
	KindCustom      Kind = "custom"       // free-form
	KindDesk        Kind = "desk"         // routes between Agent.Specialists
)

// Kinds lists every kind, in the order the schema names them.
var Kinds = []Kind{KindFormFilling, KindWorkflow, KindFAQ, KindCustom, KindDesk}

// Direction says whether the agent answers or places conversations.
type Direction string

// Directions.
const (
	Inbound  Direction = "inbound"
	Outbound Direction = "outbound"
)

// Directions lists both directions.
var Directions = []Direction{Inbound, Outbound}

// Channel is where an agent talks.
type Channel string

// Channels.
const (
	ChannelVoice    Channel = "voice"    // browser voice calls
	ChannelChat     Channel = "chat"     // text chat through the API
	ChannelPhone    Channel = "phone"    // phone calls over SIP trunks
	ChannelWhatsApp Channel = "whatsapp" // the messaging-app channel
)

// Channels lists every channel.
var Channels = []Channel{ChannelVoice, ChannelChat, ChannelPhone, ChannelWhatsApp}

// Document is a whole definition as exported: the agent and what it refers to.
type Document struct {
	Object     string     `json:"object"`
	Format     string     `json:"format"`
	ExportedAt app.Time   `json:"exported_at"`
	Agent      Agent      `json:"agent"`
	References References `json:"references"`
}

// Definition is what is stored of a definition: the agent and its references, without the
// envelope (object, format, exported_at). Parse returns one with every default filled in.
type Definition struct {
	Agent      Agent      `json:"agent"`
	References References `json:"references"`
}

// Export wraps the definition in the document envelope.
func (d *Definition) Export(at time.Time) Document {
	return Document{Object: ObjectType, Format: Format, ExportedAt: app.T(at.Truncate(time.Second)), Agent: d.Agent, References: d.References}
}

// Clone returns a deep copy of d.
func (d *Definition) Clone() *Definition {
	b, err := json.Marshal(d)
	if err != nil {
		panic("agentdef: marshal a valid definition: " + err.Error()) // cannot happen: plain data
	}
	var c Definition
	if err := json.Unmarshal(b, &c); err != nil {
		panic("agentdef: unmarshal a marshalled definition: " + err.Error())
	}
	return &c
}

// Agent is everything about the agent itself.
type Agent struct {
	Name               string            `json:"name"`
	Description        string            `json:"description"`
	Kind               Kind              `json:"kind"`
	Direction          Direction         `json:"direction"`
	Channels           []Channel         `json:"channels"`
	Language           string            `json:"language"`
	SystemPrompt       string            `json:"system_prompt"`
	FirstMessage       string            `json:"first_message"`
	Languages          []LanguageVersion `json:"languages"`
	Voice              Voice             `json:"voice"`
	LLM                LLM               `json:"llm"`
	STT                STT               `json:"stt"`
	TTS                TTS               `json:"tts"`
	TurnTaking         TurnTaking        `json:"turn_taking"`
	MaxDurationSeconds int               `json:"max_duration_seconds"`
	EndCall            EndCall           `json:"end_call"`
	DoNotCallTool      bool              `json:"do_not_call_tool"` // issue 15: offer add_to_do_not_call on phone calls
	Fillers            Fillers           `json:"fillers"`
	Collected          []Field           `json:"collected"`
	Analysis           Analysis          `json:"analysis"`
	Knowledge          Knowledge         `json:"knowledge"`
	Steps              []Step            `json:"steps"`
	Specialists        []Specialist      `json:"specialists"`
}

// HasChannel reports whether the agent talks on c.
func (a *Agent) HasChannel(c Channel) bool {
	for _, x := range a.Channels {
		if x == c {
			return true
		}
	}
	return false
}

// LanguageVersion is the agent in one more language.
type LanguageVersion struct {
	Code         string `json:"code"`
	SystemPrompt string `json:"system_prompt"`
	FirstMessage string `json:"first_message"`
	Voice        *Voice `json:"voice,omitempty"` // nil: the agent's voice
}

// Voice is how the agent sounds.
type Voice struct {
	Name  string  `json:"name"`  // the TTS provider's voice; "" is its default
	Speed float64 `json:"speed"` // 0.5–2, 1 normal
}

// LLM is the language model that writes the agent's turns.
type LLM struct {
	Provider    string  `json:"provider"`
	Model       string  `json:"model"`
	Temperature float64 `json:"temperature"`
	MaxTokens   int     `json:"max_tokens"`
}

// STT is the speech-to-text engine.
type STT struct {
	Provider string   `json:"provider"`
	Model    string   `json:"model"`
	Keywords []string `json:"keywords"`
}

// TTS is the text-to-speech engine.
type TTS struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// TurnTaking says when a turn ends and who may interrupt.
type TurnTaking struct {
	EndpointingMS int     `json:"endpointing_ms"`
	BargeIn       BargeIn `json:"barge_in"`
	Silence       Silence `json:"silence"`
	DTMF          DTMF    `json:"dtmf"`
}

// DTMF says when keypad digits end the caller's turn: at the terminator key, or after the
// inter-digit timeout without a new digit.
type DTMF struct {
	Terminator          string `json:"terminator"`
	InterDigitTimeoutMS int    `json:"inter_digit_timeout_ms"`
}

// Endpointing is the silence that ends the other side's turn.
func (t TurnTaking) Endpointing() time.Duration {
	return time.Duration(t.EndpointingMS) * time.Millisecond
}

// BargeIn says when the other side can interrupt the agent.
type BargeIn struct {
	Enabled     bool `json:"enabled"`
	MinSpeechMS int  `json:"min_speech_ms"`
	MinWords    int  `json:"min_words"`
}

// Silence says what the agent does when nobody speaks.
type Silence struct {
	TimeoutMS       int    `json:"timeout_ms"`
	Reprompts       int    `json:"reprompts"`
	RepromptMessage string `json:"reprompt_message"`
}

// EndCall is how a conversation is ended.
type EndCall struct {
	Message string   `json:"message"`
	Phrases []string `json:"phrases"`
}

// Fillers are spoken while a tool is slow.
type Fillers struct {
	AfterMS int      `json:"after_ms"`
	Lines   []string `json:"lines"`
}

// FieldType is the type of a collected or analysed value.
type FieldType string

// Field types.
const (
	FieldString      FieldType = "string"
	FieldNumber      FieldType = "number"
	FieldInteger     FieldType = "integer"
	FieldBoolean     FieldType = "boolean"
	FieldDate        FieldType = "date"
	FieldTime        FieldType = "time"
	FieldDateTime    FieldType = "date_time"
	FieldEmail       FieldType = "email"
	FieldPhoneNumber FieldType = "phone_number"
	FieldChoice      FieldType = "choice"
)

// Field is one value the agent collects or the analysis extracts.
type Field struct {
	Name        string    `json:"name"`
	Type        FieldType `json:"type"`
	Description string    `json:"description"`
	Required    bool      `json:"required"`
	Options     []string  `json:"options,omitempty"` // choice only
}

// Analysis is what is worked out from a conversation once it ends.
type Analysis struct {
	Enabled         bool    `json:"enabled"`
	Summary         bool    `json:"summary"`
	SuccessCriteria string  `json:"success_criteria"`
	Fields          []Field `json:"fields"`
}

// KnowledgeMode says when knowledge is looked up.
type KnowledgeMode string

// Knowledge modes.
const (
	KnowledgeTool KnowledgeMode = "tool" // the model calls a lookup tool when it needs to
	KnowledgeAuto KnowledgeMode = "auto" // every turn is looked up before the model answers
)

// Knowledge says how the knowledge bases in References are used.
type Knowledge struct {
	Mode       KnowledgeMode `json:"mode"`
	MaxResults int           `json:"max_results"`
	MinScore   float64       `json:"min_score"`
}

// Step is one step of a workflow agent.
type Step struct {
	Name         string   `json:"name"`
	Instructions string   `json:"instructions"`
	Tools        []string `json:"tools"`
}

// Specialist is one of the specialists a desk agent routes between.
type Specialist struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	SystemPrompt string `json:"system_prompt"`
	Voice        *Voice `json:"voice,omitempty"` // nil: the agent's voice
}

// References names everything outside the agent. Names are resolved in the agent's project
// when a conversation starts; a definition never holds ids.
type References struct {
	Tools               []string            `json:"tools"`
	KnowledgeBases      []string            `json:"knowledge_bases"`
	Calendar            *string             `json:"calendar"`
	CallbackAgent       *string             `json:"callback_agent"`
	SpecialistKnowledge map[string][]string `json:"specialist_knowledge"`
	LanguageKnowledge   map[string][]string `json:"language_knowledge"`
}

// KnowledgeFor returns the knowledge bases a conversation uses: narrowed to the specialist's or
// the language's list when the definition narrows them, else every base of the agent. A
// specialist's narrowing wins over a language's.
func (r *References) KnowledgeFor(specialist, language string) []string {
	if kb, ok := r.SpecialistKnowledge[specialist]; ok && specialist != "" {
		return kb
	}
	if kb, ok := r.LanguageKnowledge[language]; ok && language != "" {
		return kb
	}
	return r.KnowledgeBases
}

// Defaults returns a definition holding every default of the schema and nothing else: Parse
// decodes documents over it, so a setting that is left out takes its default.
func Defaults() Definition {
	return Definition{
		Agent: Agent{
			Channels:           []Channel{},
			Language:           "en",
			Languages:          []LanguageVersion{},
			Voice:              Voice{Speed: 1},
			LLM:                LLM{Provider: "default", Model: "default", Temperature: 0.7, MaxTokens: 400},
			STT:                STT{Provider: "default", Model: "default", Keywords: []string{}},
			TTS:                TTS{Provider: "default", Model: "default"},
			TurnTaking:         TurnTaking{EndpointingMS: 600, BargeIn: BargeIn{Enabled: true, MinSpeechMS: 300}, Silence: Silence{TimeoutMS: 10000, Reprompts: 2}, DTMF: DTMF{Terminator: "#", InterDigitTimeoutMS: 2000}},
			MaxDurationSeconds: 1800,
			EndCall:            EndCall{Phrases: []string{}},
			DoNotCallTool:      true,
			Fillers:            Fillers{AfterMS: 1500, Lines: []string{}},
			Collected:          []Field{},
			Analysis:           Analysis{Summary: true, Fields: []Field{}},
			Knowledge:          Knowledge{Mode: KnowledgeTool, MaxResults: 4, MinScore: 0.5},
			Steps:              []Step{},
			Specialists:        []Specialist{},
		},
		References: References{
			Tools: []string{}, KnowledgeBases: []string{},
			SpecialistKnowledge: map[string][]string{}, LanguageKnowledge: map[string][]string{},
		},
	}
}

// defaultVoice is the voice a language version or specialist gets when its document names a
// voice object but leaves its members out.
func defaultVoice() Voice { return Voice{Speed: 1} }
