package events

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestStripValues(t *testing.T) {
	in := `{"id":"c1","metadata":{"crm":7},"variables":{"x":1},"from_number":"+1","to_number":"+2","collected":{"metadata":"kept"},
		"contact":{"to_number":"+3","name":"Ada"}}`
	out, err := StripValues(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(out, &m)
	for _, k := range Stripped {
		if _, ok := m[k]; ok {
			t.Fatalf("%s kept: %s", k, out)
		}
	}
	if m["collected"].(map[string]any)["metadata"] != "kept" || m["contact"].(map[string]any)["to_number"] != nil || m["contact"].(map[string]any)["name"] != "Ada" {
		t.Fatalf("stripped %s", out)
	}
}

func TestRegistry(t *testing.T) {
	def := DefaultNames()
	if slices.Contains(def, ConversationTranscript) || slices.Contains(def, FormAbandoned) || slices.Contains(def, WebhookTest) || !slices.Contains(def, ConversationEnded) {
		t.Fatalf("default set %v", def)
	}
	if slices.Contains(Names(), WebhookTest) || !slices.Contains(Names(), FormAbandoned) {
		t.Fatalf("names %v", Names())
	}
	if err := CheckTypes("/events", "", []string{"conversation.ended", "x.y"}, false); err == nil {
		t.Fatal("an unknown type was taken")
	}
	Register("test_only.happened", "for this test", struct{ A int }{})
	if _, ok := Lookup("test_only.happened"); !ok || !slices.Contains(DefaultNames(), "test_only.happened") {
		t.Fatal("a registered type is not in the catalogue")
	}
	for _, bad := range []func(){
		func() { Register("NoDots", "", struct{}{}) },
		func() { Register("conversation.transcript", "", TranscriptData{}) }, // opt-in disagrees with the store
		func() { Register("test_only.happened", "", struct{ B int }{}) },     // another data type
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("a bad registration did not panic")
				}
			}()
			bad()
		}()
	}
}
