package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/app/knowledge"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
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
