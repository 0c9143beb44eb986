package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/app/knowledge"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/session/fakes"
)

// TestKnowledgeNarrowing: a desk agent's knowledge is narrowed to the conversation's language
// (references.language_knowledge) and, once the desk hands over, to the specialist's bases
// (references.specialist_knowledge), on a real store with real full-text search.
func TestKnowledgeNarrowing(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sc := store.OrgScope(r.org.ID)
	for name, body := range map[string]string{
		"General":     "Opening hours: the shop opens at nine and invoices questions go to billing.",
		"Billing FAQ": "Invoices are sent on the first day of every month.",
		"French FAQ":  "Les factures sont envoyées le premier jour du mois.",
	} {
		kb, err := r.st.Knowledge().CreateBase(ctx, sc, store.KnowledgeBase{ProjectID: r.proj.ID, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		d, err := r.st.Knowledge().CreateDocument(ctx, sc, kb.ID, name+".txt", store.KnowledgeUpload{Data: []byte(body), ContentType: "text/plain"})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.st.Knowledge().FinishIndex(ctx, d.ID, store.Indexed{Text: body, Chunks: []store.KnowledgeChunk{{Body: body, Tokens: 20}}}); err != nil {
			t.Fatal(err)
		}
	}
	def, err := ParseStored(json.RawMessage(`{"agent": {"name": "Desk", "kind": "desk", "direction": "inbound", "channels": ["phone", "chat"],
		"language": "en", "languages": [{"code": "fr", "system_prompt": "Vous êtes l'accueil."}],
		"system_prompt": "You are the desk.", "knowledge": {"mode": "auto", "min_score": 0},
		"specialists": [{"name": "Billing", "description": "invoices", "system_prompt": "You are Billing.", "voice": {"name": "v-billing"}},
			{"name": "Tech", "system_prompt": "You are Tech."}]},
		"references": {"knowledge_bases": ["General", "Billing FAQ", "French FAQ"],
			"specialist_knowledge": {"Billing": ["Billing FAQ"]}, "language_knowledge": {"en": ["General"], "fr": ["French FAQ"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	rt := &Runtime{o: Options{Knowledge: &knowledge.Service{Store: r.st}}}
	found := func(k session.Knowledge, q string) string {
		t.Helper()
		res, err := k.Lookup(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Results []struct{ Source string } `json:"results"`
		}
		json.Unmarshal([]byte(res), &out)
		var s []string
		for _, x := range out.Results {
			s = append(s, x.Source)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct{ lang, query, want, afterBilling string }{
		{"en", "invoices", "General.txt", "Billing FAQ.txt"},
		{"fr", "factures", "French FAQ.txt", ""}, // Billing's bases hold nothing in French
	} {
		a, err := AgentFor(def, tc.lang, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Specialists) != 2 || a.Specialists[0].Voice != "v-billing" {
			t.Fatalf("specialists %+v", a.Specialists)
		}
		var handOver bool
		for _, tool := range a.Tools {
			handOver = handOver || tool.Name == session.ToolHandOver
		}
		if !handOver {
			t.Fatalf("a desk without the hand-over tool: %+v", a.Tools)
		}
		c := store.Conversation{OrgID: r.org.ID, ProjectID: r.proj.ID, Language: tc.lang}
		k, err := rt.knowledgeFor(ctx, c, def, &a)
		if err != nil {
			t.Fatal(err)
		}
		if got := found(k, tc.query); got != tc.want {
			t.Fatalf("%s: %q found %q, want %q", tc.lang, tc.query, got, tc.want)
		}
		sk, ok := k.(session.SpecialistKnowledge)
		if !ok {
			t.Fatal("the knowledge cannot be narrowed to a specialist")
		}
		if err := sk.UseSpecialist(ctx, "Billing"); err != nil {
			t.Fatal(err)
		}
		if got := found(k, tc.query); got != tc.afterBilling {
			t.Fatalf("%s, Billing: %q found %q, want %q", tc.lang, tc.query, got, tc.afterBilling)
		}
		// Tech has no bases of its own: the language's.
		if err := sk.UseSpecialist(ctx, "Tech"); err != nil {
			t.Fatal(err)
		}
		if got := found(k, tc.query); got != tc.want {
			t.Fatalf("%s, Tech: %q found %q, want %q", tc.lang, tc.query, got, tc.want)
		}
	}
}

// TestDeskChatHandOver: a desk agent's chat through the fake LLM, on a real store with real
// full-text search. The model hands over to Billing; the same reply's next request carries
// Billing's prompt and the Billing FAQ (not the general base); the next message, answered by
// another node that rebuilds the engine from the stored chat, is still Billing's.
func TestDeskChatHandOver(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sc := store.OrgScope(r.org.ID)
	for name, body := range map[string]string{
		"General":     "Opening hours: the shop opens at nine. Invoices questions go to billing.",
		"Billing FAQ": "Invoices are sent on the first day of every month by email.",
	} {
		kb, err := r.st.Knowledge().CreateBase(ctx, sc, store.KnowledgeBase{ProjectID: r.proj.ID, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		d, _ := r.st.Knowledge().CreateDocument(ctx, sc, kb.ID, name+".txt", store.KnowledgeUpload{Data: []byte(body), ContentType: "text/plain"})
		if err := r.st.Knowledge().FinishIndex(ctx, d.ID, store.Indexed{Text: body, Chunks: []store.KnowledgeChunk{{Body: body, Tokens: 20}}}); err != nil {
			t.Fatal(err)
		}
	}
	def := `{"agent": {"name": "Desk", "kind": "desk", "direction": "outbound", "channels": ["phone", "chat"],
		"system_prompt": "You are the desk of {{customer}}'s shop.", "knowledge": {"mode": "auto", "min_score": 0},
		"specialists": [{"name": "Billing", "description": "invoices", "system_prompt": "You are Billing, helping {{customer}}."}]},
		"references": {"knowledge_bases": ["General", "Billing FAQ"], "specialist_knowledge": {"Billing": ["Billing FAQ"]}, "language_knowledge": {"en": ["General"]}}}`
	parsed, err := ParseStored(json.RawMessage(def))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(parsed)
	ag, err := r.st.Agents().Create(ctx, sc, store.NewAgent{ProjectID: r.proj.ID, Name: "Desk", Kind: "desk", Direction: "outbound", Channels: []string{"phone", "chat"}, Definition: raw})
	if err != nil {
		t.Fatal(err)
	}
	if _, r.agent, err = r.st.Agents().Publish(ctx, sc, ag.ID, "", "test"); err != nil {
		t.Fatal(err)
	}
	withKnowledge := func(o *Options) { o.Knowledge = &knowledge.Service{Store: r.st} }
	a, tpA := r.nodeOn("a", r.st, r.bus, withKnowledge)
	b, tpB := r.nodeOn("b", r.st, r.bus, withKnowledge)
	tpA.Fakes.Chat.Script().Add(
		fakes.ScriptTurn{ToolCalls: []fakes.ScriptToolCall{{ID: "call_1", Name: session.ToolHandOver, Args: []byte(`{"specialist": "Billing"}`)}}},
		fakes.ScriptTurn{Text: "Billing here: invoices go out on the first."})
	c := r.conversation(store.ChannelChat, store.ModeTest, store.ConvInProgress)
	if _, err := a.StartChat(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	turn, err := a.Send(ctx, c.ID, "When do invoices arrive?", nil, nil)
	if err != nil || turn.Agent.Text != "Billing here: invoices go out on the first." {
		t.Fatalf("turn %+v, %v", turn, err)
	}
	system := func(tp *TestProviders, i int) string {
		reqs := tp.Fakes.Chat.Requests()
		if i < 0 {
			i += len(reqs)
		}
		m := reqs[i].Body["messages"].([]any)[0].(map[string]any)
		if m["role"] != "system" {
			t.Fatalf("request %d starts with %v", i, m)
		}
		return m["content"].(string)
	}
	if s := system(tpA, 0); !strings.HasPrefix(s, "You are the desk of Ada's shop.") || !strings.Contains(s, "shop opens at nine") || strings.Contains(s, "by email") {
		t.Fatalf("the desk's request: %q", s)
	}
	if s := system(tpA, 1); !strings.HasPrefix(s, "You are Billing, helping Ada.") || !strings.Contains(s, "first day of every month by email") || strings.Contains(s, "opens at nine") {
		t.Fatalf("the request after the hand-over: %q", s)
	}
	var handed bool
	for _, l := range r.lines(c.ID) {
		handed = handed || l.Role == "tool" && strings.Contains(l.Text, session.ToolHandOver) && strings.Contains(l.Text, `"specialist":"Billing"`)
	}
	if !handed {
		t.Fatalf("no hand-over in the transcript: %q", texts(r.lines(c.ID)))
	}
	// Node b answers the next message (the fake echoes): still Billing, with Billing's knowledge.
	if _, err := b.Send(ctx, c.ID, "And by email?", nil, nil); err != nil {
		t.Fatal(err)
	}
	if s := system(tpB, -1); !strings.HasPrefix(s, "You are Billing, helping Ada.") || !strings.Contains(s, "by email") {
		t.Fatalf("the next message on another node: %q", s)
	}
}
