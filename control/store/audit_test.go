package store

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidAction(t *testing.T) {
	for a, want := range map[string]bool{
		"agent.created":                     true,
		"webhook.secret_rotated":            true,
		"a.b.c":                             true,
		"v2.thing9":                         true,
		"created":                           false,
		"":                                  false,
		".created":                          false,
		"agent.":                            false,
		"agent..created":                    false,
		"Agent.created":                     false,
		"agent.créé":                        false,
		"agent created":                     false,
		"agent." + strings.Repeat("x", 100): false,
	} {
		if got := validAction(a); got != want {
			t.Errorf("validAction(%q) = %v, want %v", a, got, want)
		}
	}
}

func TestAuditEventCheck(t *testing.T) {
	const id = "0190a6f0-1234-7abc-8def-0123456789ab"
	ok := AuditEvent{ID: id, OrgID: id, ActorType: ActorSystem, Action: "agent.created", Data: json.RawMessage(`{}`)}
	if err := ok.check(); err != nil {
		t.Fatalf("valid event refused: %v", err)
	}
	key := ok
	key.ActorType, key.ActorID, key.ActorMode = ActorAPIKey, id, ModeLive
	if err := key.check(); err != nil {
		t.Fatalf("valid key event refused: %v", err)
	}
	cases := map[string]func(*AuditEvent){
		"long actor":   func(e *AuditEvent) { e.ActorID = strings.Repeat("x", 201) },
		"long request": func(e *AuditEvent) { e.RequestID = strings.Repeat("x", 201) },
		"key actor ID": func(e *AuditEvent) { e.ActorType, e.ActorID, e.ActorMode = ActorAPIKey, "k", ModeLive },
		"string data":  func(e *AuditEvent) { e.Data = json.RawMessage(`"x"`) },
		"upper org":    func(e *AuditEvent) { e.OrgID = OrgID(strings.ToUpper(id)) },
	}
	for name, mutate := range cases {
		e := ok
		mutate(&e)
		if err := e.check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestIsJSONObject: what decoding into a map accepts, and nothing else.
func TestIsJSONObject(t *testing.T) {
	for _, s := range []string{`{}`, ` {"a": 1} `, "\n\t{\"a\": {\"b\": [1, null]}}", `{"a": 1, "a": 2}`} {
		var m map[string]json.RawMessage
		if !isJSONObject([]byte(s)) || json.Unmarshal([]byte(s), &m) != nil || m == nil {
			t.Errorf("%q: want an object", s)
		}
	}
	for _, s := range []string{``, ` `, `null`, `[]`, `"{}"`, `1`, `{`, `{"a": }`, `{} {}`, `{}x`, `{"a": 1}]`} {
		if isJSONObject([]byte(s)) {
			t.Errorf("%q: not an object", s)
		}
	}
}
