package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session"
)

// Knowledge retrieves from the knowledge bases an agent names (issue 16; package
// control/app/knowledge implements it).
type Knowledge interface {
	// Bases resolves base names in a project; names with no base are left out.
	Bases(ctx context.Context, org store.OrgID, project store.ProjectID, names []string) ([]store.KnowledgeBaseID, error)
	// Retrieve returns the best chunks for query, best first, Score relative to the best (1).
	Retrieve(ctx context.Context, org store.OrgID, bases []store.KnowledgeBaseID, query string, limit int) ([]store.KnowledgeHit, error)
}

// DefaultKnowledgeTokens is the budget of retrieved text put into one LLM request.
const DefaultKnowledgeTokens = 1500

// knowledgeFor gives the engine the conversation's knowledge when its agent names knowledge
// bases, narrowed as the definition says (references.language_knowledge for the conversation's
// language; references.specialist_knowledge once a desk hands over to a specialist, see
// turnKnowledge.UseSpecialist): the knowledge_lookup tool always, and a lookup before every
// answer when the definition's knowledge mode is auto.
func (rt *Runtime) knowledgeFor(ctx context.Context, c store.Conversation, def *agentdef.Definition, a *session.Agent) (session.Knowledge, error) {
	if len(def.References.KnowledgeBases) == 0 || rt.o.Knowledge == nil {
		return nil, nil
	}
	k := def.Agent.Knowledge
	tk := &turnKnowledge{src: rt.o.Knowledge, org: c.OrgID, max: k.MaxResults, minScore: k.MinScore, budget: rt.o.KnowledgeTokens}
	language, project, src := a.Language, c.ProjectID, rt.o.Knowledge
	tk.resolve = func(ctx context.Context, specialist string) ([]store.KnowledgeBaseID, error) {
		names := def.References.KnowledgeFor(specialist, language)
		if len(names) == 0 {
			return nil, nil
		}
		bases, err := src.Bases(ctx, c.OrgID, project, names)
		if err != nil {
			return nil, fmt.Errorf("runtime: the agent's knowledge bases: %w", err)
		}
		return bases, nil
	}
	bases, err := tk.resolve(ctx, "")
	if err != nil {
		return nil, err
	}
	tk.bases = bases
	if tk.max <= 0 {
		tk.max = 4
	}
	if tk.budget <= 0 {
		tk.budget = DefaultKnowledgeTokens
	}
	a.KnowledgeAuto = k.Mode == agentdef.KnowledgeAuto
	a.Tools = append(a.Tools, session.ToolSpec{Name: session.ToolKnowledge})
	return tk, nil
}

// turnKnowledge is one conversation's view of its knowledge bases.
type turnKnowledge struct {
	src      Knowledge
	org      store.OrgID
	resolve  func(ctx context.Context, specialist string) ([]store.KnowledgeBaseID, error)
	mu       sync.Mutex
	bases    []store.KnowledgeBaseID // the bases searched now (a hand-over changes them)
	max      int
	minScore float64
	budget   int // tokens
}

// UseSpecialist narrows the knowledge to the bases of the specialist a desk handed over to
// (references.specialist_knowledge; without an entry for it, the language's or all).
func (k *turnKnowledge) UseSpecialist(ctx context.Context, name string) error {
	bases, err := k.resolve(ctx, name)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.bases = bases
	k.mu.Unlock()
	return nil
}

// pick retrieves and keeps the chunks scoring at least minScore, within the token budget.
func (k *turnKnowledge) pick(ctx context.Context, query string) ([]store.KnowledgeHit, error) {
	k.mu.Lock()
	bases := k.bases
	k.mu.Unlock()
	if len(bases) == 0 {
		return nil, nil
	}
	hits, err := k.src.Retrieve(ctx, k.org, bases, query, k.max)
	if err != nil {
		return nil, err
	}
	out := hits[:0]
	used := 0
	for _, h := range hits {
		if h.Score < k.minScore {
			continue
		}
		if used+h.Chunk.Tokens > k.budget && len(out) > 0 {
			break
		}
		used += h.Chunk.Tokens
		out = append(out, h)
	}
	return out, nil
}

func source(h store.KnowledgeHit) string {
	s := h.DocumentName
	if h.SourceURL != "" {
		s = h.SourceURL
	}
	if h.Chunk.Page > 0 {
		s += fmt.Sprintf(", page %d", h.Chunk.Page)
	}
	if h.Chunk.Heading != "" {
		s += " — " + h.Chunk.Heading
	}
	return s
}

// Retrieve is the lookup of a turn (knowledge mode auto): the chunks as context for the model.
func (k *turnKnowledge) Retrieve(ctx context.Context, query string) (session.Retrieval, error) {
	hits, err := k.pick(ctx, query)
	if err != nil {
		return session.Retrieval{}, err
	}
	r := session.Retrieval{Chunks: make([]session.RetrievedChunk, len(hits))}
	var sb strings.Builder
	if len(hits) > 0 {
		sb.WriteString("Knowledge retrieved for the caller's last words (answer from it when it helps; say so when it does not hold the answer):\n")
	}
	for i, h := range hits {
		r.Chunks[i] = session.RetrievedChunk{ID: string(h.Chunk.ID), DocumentID: string(h.Chunk.DocumentID), Source: source(h), Score: h.Score}
		fmt.Fprintf(&sb, "\n[%d] %s\n%s\n", i+1, source(h), h.Chunk.Body)
	}
	r.Context = sb.String()
	return r, nil
}

// Lookup is the knowledge_lookup tool: the chunks as JSON.
func (k *turnKnowledge) Lookup(ctx context.Context, query string) (string, error) {
	hits, err := k.pick(ctx, query)
	if err != nil {
		return "", err
	}
	type result struct {
		Source string  `json:"source"`
		Text   string  `json:"text"`
		Score  float64 `json:"score"`
		ID     string  `json:"chunk_id"`
	}
	out := struct {
		Results []result `json:"results"`
	}{Results: make([]result, len(hits))}
	for i, h := range hits {
		out.Results[i] = result{Source: source(h), Text: h.Chunk.Body, Score: h.Score, ID: string(h.Chunk.ID)}
	}
	b, err := json.Marshal(out)
	return string(b), err
}
