package agentdef

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/jsoncheck"
)

// minimal is the smallest valid definition.
const minimal = `{"format":"service.agent/1","agent":{"name":"Support","kind":"custom","direction":"inbound","channels":["chat"],"system_prompt":"Help."}}`

func mustParse(t *testing.T, doc string) *Definition {
	t.Helper()
	d, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return d
}

func TestParseFillsDefaults(t *testing.T) {
	d := mustParse(t, minimal)
	want := Defaults()
	want.Agent.Name, want.Agent.Kind, want.Agent.Direction = "Support", KindCustom, Inbound
	want.Agent.Channels, want.Agent.SystemPrompt = []Channel{ChannelChat}, "Help."
	if !reflect.DeepEqual(*d, want) {
		t.Fatalf("Parse(minimal) =\n%+v\nwant\n%+v", *d, want)
	}
}

// TestDefaultsMatchSchema checks that every "default" the schema documents is what Parse
// fills in, and that every member of the Go types is in the schema.
func TestDefaultsMatchSchema(t *testing.T) {
	schema := SchemaValue()
	defs := schema["$defs"].(map[string]any)
	resolve := func(s map[string]any) map[string]any {
		for {
			if ref, ok := s["$ref"].(string); ok {
				s = defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
				continue
			}
			if all, ok := s["allOf"].([]any); ok && s["properties"] == nil && len(all) == 1 {
				merged := map[string]any{}
				for k, v := range all[0].(map[string]any) {
					merged[k] = v
				}
				for k, v := range s {
					if k != "allOf" {
						merged[k] = v
					}
				}
				s = merged
				continue
			}
			return s
		}
	}
	d := mustParse(t, minimal)
	raw, _ := json.Marshal(d)
	var got map[string]any
	json.Unmarshal(raw, &got)
	checked := 0
	var walk func(ptr string, s map[string]any, v any)
	walk = func(ptr string, s map[string]any, v any) {
		s = resolve(s)
		if def, ok := s["default"]; ok {
			wantJSON, _ := json.Marshal(def)
			gotJSON, _ := json.Marshal(v)
			var a, b any
			json.Unmarshal(wantJSON, &a)
			json.Unmarshal(gotJSON, &b)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s: schema default %s, Parse fills %s", ptr, wantJSON, gotJSON)
			}
			checked++
		}
		props, _ := s["properties"].(map[string]any)
		obj, isObj := v.(map[string]any)
		if !isObj || props == nil {
			return
		}
		for k := range obj {
			if _, ok := props[k]; !ok {
				t.Errorf("%s/%s: in the Go types but not in the schema", ptr, k)
			}
		}
		for k, ps := range props {
			if val, ok := obj[k]; ok {
				walk(ptr+"/"+k, ps.(map[string]any), val)
			}
		}
	}
	walk("", map[string]any{"properties": map[string]any{"agent": map[string]any{"$ref": "#/$defs/Agent"}, "references": map[string]any{"$ref": "#/$defs/References"}}}, got)
	if checked < 30 {
		t.Fatalf("only %d defaults checked", checked)
	}
}

func TestRoundTrip(t *testing.T) {
	for name, doc := range docExamples(t) {
		t.Run(name, func(t *testing.T) {
			d := mustParse(t, doc)
			first, _ := json.Marshal(d.Export(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)))
			d2 := mustParse(t, string(first))
			second, _ := json.Marshal(d2.Export(time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)))
			a := strings.Replace(string(first), "2030-01-02T03:04:05.000000Z", "X", 1)
			b := strings.Replace(string(second), "2031-01-02T03:04:05.000000Z", "X", 1)
			if a != b {
				t.Fatalf("export → parse → export differs:\n%s\n%s", a, b)
			}
			if !reflect.DeepEqual(d, d.Clone()) {
				t.Fatal("Clone differs")
			}
		})
	}
}

// docExamples returns the JSON blocks of docs/agent-definition.md by the heading above them.
func docExamples(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/agent-definition.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)### ([a-z_]+)\n\n```json\n(.*?)\n```")
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestDocsExamples checks that docs/agent-definition.md has a valid example of every kind.
func TestDocsExamples(t *testing.T) {
	ex := docExamples(t)
	for _, k := range Kinds {
		doc, ok := ex[string(k)]
		if !ok {
			t.Errorf("docs/agent-definition.md has no example for kind %s", k)
			continue
		}
		d := mustParse(t, doc)
		if d.Agent.Kind != k {
			t.Errorf("example %s is of kind %s", k, d.Agent.Kind)
		}
	}
	if len(ex) != len(Kinds) {
		t.Errorf("%d examples, want %d", len(ex), len(Kinds))
	}
}

// withAgent returns minimal with members of agent replaced (JSON values).
func withAgent(t *testing.T, set map[string]string) string {
	t.Helper()
	var doc map[string]any
	json.Unmarshal([]byte(minimal), &doc)
	agent := doc["agent"].(map[string]any)
	for k, v := range set {
		if k == "references" {
			var r any
			if err := json.Unmarshal([]byte(v), &r); err != nil {
				t.Fatalf("%s: %v", v, err)
			}
			doc["references"] = r
			continue
		}
		if v == "" {
			delete(agent, k)
			continue
		}
		var x any
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		agent[k] = x
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

func TestParseProblems(t *testing.T) {
	cases := []struct {
		name    string
		set     map[string]string
		raw     string
		pointer string
		code    string
	}{
		{"unknown agent field", map[string]string{"colour": `"red"`}, "", "/agent/colour", jsoncheck.CodeUnknownField},
		{"unknown top field", nil, `{"format":"service.agent/1","agent":{"name":"a","kind":"faq","direction":"inbound","channels":["chat"],"system_prompt":"x"},"extra":1}`, "/extra", jsoncheck.CodeUnknownField},
		{"wrong format", nil, `{"format":"service.agent/2","agent":{"name":"a","kind":"faq","direction":"inbound","channels":["chat"],"system_prompt":"x"}}`, "/format", jsoncheck.CodeInvalidValue},
		{"no name", map[string]string{"name": ""}, "", "/agent/name", jsoncheck.CodeRequired},
		{"long name", map[string]string{"name": `"` + strings.Repeat("n", 121) + `"`}, "", "/agent/name", jsoncheck.CodeTooLong},
		{"padded name", map[string]string{"name": `" Support"`}, "", "/agent/name", jsoncheck.CodeInvalidValue},
		{"bad kind", map[string]string{"kind": `"robot"`}, "", "/agent/kind", jsoncheck.CodeInvalidValue},
		{"no channels", map[string]string{"channels": `[]`}, "", "/agent/channels", jsoncheck.CodeTooShort},
		{"channel twice", map[string]string{"channels": `["chat","chat"]`}, "", "/agent/channels/1", jsoncheck.CodeNotUnique},
		{"temperature", map[string]string{"llm": `{"temperature": 3}`}, "", "/agent/llm/temperature", jsoncheck.CodeOutOfRange},
		{"max tokens type", map[string]string{"llm": `{"max_tokens": 1.5}`}, "", "/agent/llm/max_tokens", jsoncheck.CodeInvalidType},
		{"calendar type", map[string]string{"references": `{"calendar": 5}`}, "", "/references/calendar", jsoncheck.CodeInvalidType},
		{"calendar empty", map[string]string{"references": `{"calendar": ""}`}, "", "/references/calendar", jsoncheck.CodeTooShort},
		{"form without fields", map[string]string{"kind": `"form_filling"`}, "", "/agent/collected", jsoncheck.CodeRequired},
		{"workflow without steps", map[string]string{"kind": `"workflow"`, "steps": `[]`}, "", "/agent/steps", jsoncheck.CodeTooShort},
		{"choice without options", map[string]string{"collected": `[{"name":"c","type":"choice"}]`}, "", "/agent/collected/0/options", jsoncheck.CodeRequired},
		{"options on a string", map[string]string{"collected": `[{"name":"c","type":"string","options":["a"]}]`}, "", "/agent/collected/0/options", CodeNotAllowed},
		{"field twice", map[string]string{"collected": `[{"name":"c","type":"string"},{"name":"c","type":"date"}]`}, "", "/agent/collected/1/name", CodeNotUnique},
		{"reserved analysis field", map[string]string{"analysis": `{"fields":[{"name":"summary","type":"string"}]}`}, "", "/agent/analysis/fields/0/name", CodeNotAllowed},
		{"steps on custom", map[string]string{"steps": `[{"name":"a","instructions":"b"}]`}, "", "/agent/steps", CodeNotAllowedForKind},
		{"specialists on faq", map[string]string{"kind": `"faq"`, "specialists": `[{"name":"a","system_prompt":"b"}]`}, "", "/agent/specialists", CodeNotAllowedForKind},
		{"step tool not referenced", map[string]string{"kind": `"workflow"`, "steps": `[{"name":"a","instructions":"b","tools":["Ghost"]}]`}, "", "/agent/steps/0/tools/0", CodeUnknownReference},
		{"language is the default", map[string]string{"languages": `[{"code":"en","system_prompt":"x"}]`}, "", "/agent/languages/0/code", CodeNotUnique},
		{"language code", map[string]string{"languages": `[{"code":"english","system_prompt":"x"}]`}, "", "/agent/languages/0/code", jsoncheck.CodeInvalidValue},
		{"narrowing unknown language", map[string]string{"references": `{"knowledge_bases":["A"],"language_knowledge":{"fr":["A"]}}`}, "", "/references/language_knowledge/fr", CodeUnknownReference},
		{"narrowing unknown base", map[string]string{"references": `{"knowledge_bases":["A"],"language_knowledge":{"en":["B"]}}`}, "", "/references/language_knowledge/en/0", CodeUnknownReference},
		{"narrowing unknown specialist", map[string]string{"kind": `"desk"`, "specialists": `[{"name":"Billing","system_prompt":"x"}]`, "references": `{"knowledge_bases":["A"],"specialist_knowledge":{"Sales":["A"]}}`}, "", "/references/specialist_knowledge/Sales", CodeUnknownReference},
		{"unclosed placeholder", map[string]string{"system_prompt": `"Hello {{name"`}, "", "/agent/system_prompt", CodeInvalidPlaceholder},
		{"bad placeholder name", map[string]string{"first_message": `"Hi {{first-name}}"`}, "", "/agent/first_message", CodeInvalidPlaceholder},
		{"phone in prompt", map[string]string{"system_prompt": `"Transfer to +1 415 555 0100 when asked."`}, "", "/agent/system_prompt", CodePhoneNumber},
		{"phone NANP", map[string]string{"first_message": `"Call (415) 555-0100."`}, "", "/agent/first_message", CodePhoneNumber},
		{"phone in reference", map[string]string{"references": `{"tools":["Call 14155550100"]}`}, "", "/references/tools/0", CodePhoneNumber},
		{"URL", map[string]string{"system_prompt": `"See https://docs.acme.test/faq"`}, "", "/agent/system_prompt", CodeDomain},
		{"domain", map[string]string{"description": `"Support for acme.com customers"`}, "", "/agent/description", CodeDomain},
		{"email", map[string]string{"end_call": `{"message":"Write to help@acme.example"}`}, "", "/agent/end_call/message", CodeDomain},
		{"credential", map[string]string{"system_prompt": `"Use key sk_live_abcdefghijklmnop to call"`}, "", "/agent/system_prompt", CodeCredential},
		{"openai key", map[string]string{"llm": `{"model":"sk-proj-abcdefghijklmnopqrstuv"}`}, "", "/agent/llm/model", CodeCredential},
		{"password", map[string]string{"system_prompt": `"The admin password: hunter2!"`}, "", "/agent/system_prompt", CodeCredential},
		{"random token", map[string]string{"stt": `{"keywords":["Q2hhbmdlTWUxMjM0NTY3ODkwQWJjZGVmZ2hpams"]}`}, "", "/agent/stt/keywords/0", CodeCredential},
		{"object id", map[string]string{"references": `{"callback_agent":"0190a6f0-0000-7000-8000-0000000000aa"}`}, "", "/references/callback_agent", CodeObjectID},
		{"id in prompt", map[string]string{"system_prompt": `"Use agent 0190A6F0-0000-7000-8000-0000000000AA"`}, "", "/agent/system_prompt", CodeObjectID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := c.raw
			if doc == "" {
				doc = withAgent(t, c.set)
			}
			_, err := Parse([]byte(doc))
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse(%s) = %v, want a ValidationError", doc, err)
			}
			for _, p := range ve.Problems {
				if p.Pointer == c.pointer && p.Code == c.code {
					if p.Detail == "" {
						t.Fatal("problem without detail")
					}
					return
				}
			}
			t.Fatalf("problems %+v, want %s at %s", ve.Problems, c.code, c.pointer)
		})
	}
}

func TestParseSyntax(t *testing.T) {
	_, err := Parse([]byte(`{"format":"service.agent/1","agent":{"name":"a",}}`))
	var se *jsoncheck.SyntaxError
	if !errors.As(err, &se) || se.Pointer != "/agent" {
		t.Fatalf("Parse of malformed JSON = %#v", err)
	}
	_, err = Parse([]byte(`{"format":"service.agent/1","format":"service.agent/1"}`))
	var de *jsoncheck.DuplicateError
	if !errors.As(err, &de) || de.Pointer != "/format" {
		t.Fatalf("Parse with a repeated member = %#v", err)
	}
}

// TestScanProse checks that ordinary prompts pass the forbidden-content detectors.
func TestScanProse(t *testing.T) {
	ok := []string{
		"You answer between 9 and 17, Monday to Friday. Prices start at 1000000 units.",
		"Say e.g. the order number; i.e. the 8-digit code such as 20240806.",
		"Use gpt-4o-2024-08-06 tone. Node.js and U.S. customers. Thanks.It works.",
		"Ask for the date of birth as 1990-01-31 and the time as 14:30.",
		"Model claude-3-5-sonnet-20241022 or llama-3.1-8b-instant.",
		"{{customer_phone}} is the number to confirm; never read it out.",
		"Offer the 3 plans: basic, plus and pro (10.99 a month).",
	}
	for _, s := range ok {
		if f := scan(s, false); len(f) > 0 {
			t.Errorf("scan(%q) = %v, want nothing", s, f)
		}
	}
	if f := scan("a0e99841-438c-4a64-b679-ae501e7d6091", true); len(f) > 0 {
		t.Errorf("voice UUID refused: %v", f)
	}
}

func TestPlaceholders(t *testing.T) {
	ps, err := Placeholders("Hi {{ name }}, order {{order|none}} {{x_1|}}.")
	if err != nil {
		t.Fatal(err)
	}
	want := []Placeholder{
		{Name: "name", Start: 3, End: 13},
		{Name: "order", Fallback: "none", HasFallback: true, Start: 21, End: 35},
		{Name: "x_1", HasFallback: true, Start: 36, End: 44},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Fatalf("Placeholders = %+v\nwant %+v", ps, want)
	}
	for _, bad := range []string{"{{", "{{}}", "{{a b}}", "{{1a}}", "{{a {{b}}", "x {{ y"} {
		if _, err := Placeholders(bad); err == nil {
			t.Errorf("Placeholders(%q) accepted", bad)
		}
	}
	if ps, err := Placeholders("no markers }} here"); err != nil || len(ps) != 0 {
		t.Errorf("plain text: %v %v", ps, err)
	}
}

func TestRender(t *testing.T) {
	cases := []struct {
		text string
		vars map[string]any
		want string
		err  error
	}{
		{"Hi {{name}}!", map[string]any{"name": "Ada"}, "Hi Ada!", nil},
		{"Hi {{name|there}}!", nil, "Hi there!", nil},
		{"Hi {{name|there}}!", map[string]any{"name": nil}, "Hi there!", nil},
		{"{{n}} items, {{ok}}, {{f}}", map[string]any{"n": 3, "ok": true, "f": 2.5}, "3 items, true, 2.5", nil},
		{"{{n}}", map[string]any{"n": json.Number("12.50")}, "12.50", nil},
		{"Hi {{name}}", map[string]any{}, "", &MissingVariableError{Name: "name"}},
		{"Hi {{name}}", map[string]any{"name": []int{1}}, "", ErrVariableType},
		{"plain", nil, "plain", nil},
	}
	for _, c := range cases {
		got, err := Render(c.text, c.vars)
		if c.err != nil {
			var mv *MissingVariableError
			if errors.As(c.err, &mv) {
				if !errors.As(err, &mv) || mv.Name != "name" || !strings.Contains(err.Error(), "name") {
					t.Errorf("Render(%q) error %v, want missing name", c.text, err)
				}
			} else if !errors.Is(err, c.err) {
				t.Errorf("Render(%q) error %v, want %v", c.text, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Render(%q) = %q, %v; want %q", c.text, got, err, c.want)
		}
	}
}

func TestVariablesSchema(t *testing.T) {
	d := mustParse(t, withAgent(t, map[string]string{
		"system_prompt": `"Hello {{name}}, your order {{order|unknown}} from {{city|home}}."`,
		"first_message": `"Hi {{name}} in {{city}}"`,
	}))
	vs := d.VariablesSchema()
	if req := vs["required"].([]string); !reflect.DeepEqual(req, []string{"city", "name"}) {
		t.Fatalf("required = %v", req)
	}
	props := vs["properties"].(map[string]any)
	if props["order"].(map[string]any)["default"] != "unknown" || len(props) != 3 {
		t.Fatalf("properties = %v", props)
	}
	v1 := vs["version"]
	// The same set, in other places and now all optional: same version.
	d2 := mustParse(t, withAgent(t, map[string]string{"system_prompt": `"{{city|x}} {{order|y}} {{name|z}}"`}))
	if v2 := d2.VariablesSchema()["version"]; v2 != v1 {
		t.Fatalf("version changed with the same set of names: %v → %v", v1, v2)
	}
	// One more name: another version.
	d3 := mustParse(t, withAgent(t, map[string]string{"system_prompt": `"{{city}} {{order}} {{name}} {{extra}}"`}))
	if v3 := d3.VariablesSchema()["version"]; v3 == v1 {
		t.Fatal("version kept when a variable was added")
	}
	// No variables at all.
	if v := mustParse(t, minimal).VariablesSchema(); v["version"] != VariablesVersion(nil) || len(v["properties"].(map[string]any)) != 0 {
		t.Fatalf("no variables: %v", v)
	}
	problems := d.CheckVariables(map[string]any{"name": "Ada", "ghost": 1, "order": []any{}})
	codes := map[string]string{}
	for _, p := range problems {
		codes[p.Pointer] = p.Code
	}
	if codes["/city"] != "required" || codes["/ghost"] != "unknown_variable" || codes["/order"] != "invalid_type" || len(codes) != 3 {
		t.Fatalf("CheckVariables = %+v", problems)
	}
}

func TestDerivedSchemas(t *testing.T) {
	d := mustParse(t, docExamples(t)["form_filling"])
	cs := d.CollectedSchema()
	props := cs["properties"].(map[string]any)
	if props["date_of_birth"].(map[string]any)["format"] != "date" || props["preferred_time"].(map[string]any)["enum"] == nil || len(props) != 5 {
		t.Fatalf("collected schema = %v", cs)
	}
	as := d.AnalysisSchema()
	ap := as["properties"].(map[string]any)
	if ap["summary"] == nil || ap["successful"] == nil {
		t.Fatalf("analysis schema = %v", as)
	}
	// The derived schemas are valid JSON Schemas that accept a fitting value.
	for name, s := range map[string]map[string]any{"collected": cs, "analysis": as} {
		b, _ := json.Marshal(s)
		doc, _ := jsoncheck.Decode(b)
		v, err := jsoncheck.Compile(map[string]any{"https://x/s.json": doc}, "https://x/s.json")
		if err != nil {
			t.Fatalf("%s schema does not compile: %v", name, err)
		}
		if ps := v.Validate(map[string]any{}); len(ps) != 0 {
			t.Fatalf("%s schema refuses {}: %v", name, ps)
		}
	}
}

func TestOpenAPIComponents(t *testing.T) {
	c := OpenAPIComponents()
	b, _ := json.Marshal(c)
	if strings.Contains(string(b), "#/$defs/") {
		t.Fatal("a $defs reference was left")
	}
	for _, name := range []string{"AgentDefinition", "AgentDefinitionInput", "AgentDefinition.Agent", "AgentDefinition.References"} {
		if c[name] == nil {
			t.Errorf("component %s missing", name)
		}
	}
	// Every reference resolves to a component.
	for _, m := range regexp.MustCompile(`"#/components/schemas/([^"]+)"`).FindAllStringSubmatch(string(b), -1) {
		if c[m[1]] == nil {
			t.Errorf("dangling reference %s", m[1])
		}
	}
}

func TestKnowledgeFor(t *testing.T) {
	d := mustParse(t, docExamples(t)["desk"])
	if kb := d.References.KnowledgeFor("Billing", "en"); !reflect.DeepEqual(kb, []string{"Billing FAQ"}) {
		t.Fatalf("KnowledgeFor(Billing) = %v", kb)
	}
	if kb := d.References.KnowledgeFor("", "en"); len(kb) != 2 {
		t.Fatalf("KnowledgeFor(no specialist) = %v", kb)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte(`{"format":"service.agent/1","agent":{"name":"x","kind":"desk"}}`))
	f.Add([]byte(`{"agent":{"system_prompt":"{{a|b}} {{"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data)
		if err != nil {
			return
		}
		b, err := json.Marshal(d.Export(time.Unix(0, 0)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(b); err != nil {
			t.Fatalf("an exported definition does not parse: %v\n%s", err, b)
		}
	})
}

func FuzzRender(f *testing.F) {
	f.Add("Hi {{name|there}} {{x}}", "Ada")
	f.Fuzz(func(t *testing.T, text, value string) {
		out, err := Render(text, map[string]any{"name": value, "x": value})
		if err == nil && !strings.Contains(text, "{{") && out != text {
			t.Fatalf("text without markers changed: %q → %q", text, out)
		}
	})
}

// TestSpecSampleDefinition: the specification's sample (name, kind, direction and system_prompt
// only, no format) is taken, with channels by direction; kinds that need more say what.
func TestSpecSampleDefinition(t *testing.T) {
	for dir, want := range map[string][]Channel{"inbound": {ChannelPhone, ChannelVoice, ChannelChat}, "outbound": {ChannelPhone}} {
		d, err := Parse([]byte(`{"agent": {"name": "Support", "kind": "faq", "direction": "` + dir + `", "system_prompt": "You help callers."}}`))
		if err != nil {
			t.Fatalf("%s sample refused: %v", dir, err)
		}
		if !slices.Equal(d.Agent.Channels, want) || d.References.Tools == nil {
			t.Fatalf("%s sample: channels %v, references %+v", dir, d.Agent.Channels, d.References)
		}
		if doc := d.Export(time.Now()); doc.Format != Format {
			t.Fatalf("exported format %q", doc.Format)
		}
	}
	for kind, member := range map[string]string{"form_filling": "collected", "workflow": "steps", "desk": "specialists"} {
		_, err := Parse([]byte(`{"agent": {"name": "X", "kind": "` + kind + `", "direction": "inbound", "system_prompt": "p"}}`))
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%s without %s: %v", kind, member, err)
		}
		found := false
		for _, p := range ve.Problems {
			if p.Pointer == "/agent/"+member && p.Code == "required" && strings.Contains(p.Detail, member) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s without %s: problems %+v do not name /agent/%s as required", kind, member, ve.Problems, member)
		}
	}
}
