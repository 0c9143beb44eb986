package knowledge

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/store"
)

// Embedder turns texts into vectors (an OpenAI-compatible /v1/embeddings endpoint, or the fake).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// embedBatch is how many chunks one embeddings request carries.
const embedBatch = 64

func (s *Service) embedChunks(ctx context.Context, cs []store.KnowledgeChunk) error {
	for start := 0; start < len(cs); start += embedBatch {
		part := cs[start:min(start+embedBatch, len(cs))]
		texts := make([]string, len(part))
		for i, c := range part {
			texts[i] = c.Heading + "\n" + c.Body
		}
		vs, err := s.Embedder.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("knowledge: embed chunks: %w", err)
		}
		if len(vs) != len(part) {
			return fmt.Errorf("knowledge: embed chunks: %d vectors for %d texts", len(vs), len(part))
		}
		for i := range part {
			part[i].Embedding = normalize(vs[i])
		}
	}
	return nil
}

func normalize(v []float32) []float32 {
	var n float64
	for _, f := range v {
		n += float64(f) * float64(f)
	}
	if n == 0 {
		return v
	}
	inv := float32(1 / math.Sqrt(n))
	out := make([]float32, len(v))
	for i, f := range v {
		out[i] = f * inv
	}
	return out
}

// KnowledgeSearch is the body of a search.
type KnowledgeSearch struct {
	Query string `json:"query" doc:"What to look for, as a caller would say it." jsonschema:"minLength=1,maxLength=2000"`
	Limit int    `json:"limit,omitempty" doc:"How many chunks to answer, 1 to 20; default 5." jsonschema:"minimum=1,maximum=20"`
}

// KnowledgeChunk is one retrieved chunk.
type KnowledgeChunk struct {
	Object          string  `json:"object" jsonschema:"enum=knowledge_chunk"`
	ID              string  `json:"id" jsonschema:"format=uuid"`
	KnowledgeBaseID string  `json:"knowledge_base_id" jsonschema:"format=uuid"`
	DocumentID      string  `json:"document_id" jsonschema:"format=uuid"`
	DocumentName    string  `json:"document_name"`
	URL             *string `json:"url" jsonschema:"nullable" doc:"The page a crawled chunk comes from."`
	Heading         string  `json:"heading" doc:"The headings above the chunk, \" > \" between levels."`
	Page            *int    `json:"page" jsonschema:"nullable" doc:"The page of a PDF the chunk starts on."`
	Text            string  `json:"text"`
	Score           float64 `json:"score" doc:"Relevance relative to the best chunk of this search (1); an agent's knowledge.min_score compares with it."`
	RawScore        float64 `json:"raw_score" doc:"The engine's own score: BM25 (SQLite), ts_rank_cd (PostgreSQL), or the reciprocal-rank fusion with embeddings."`
}

// KnowledgeSearchResult is the answer of a search: the chunks an agent would get for the query.
type KnowledgeSearchResult struct {
	Object string           `json:"object" jsonschema:"enum=knowledge_search"`
	Query  string           `json:"query"`
	Method string           `json:"method" jsonschema:"enum=full_text,enum=hybrid" doc:"full_text, or hybrid when embeddings are on (fused by reciprocal rank)."`
	TookMS float64          `json:"took_ms"`
	Data   []KnowledgeChunk `json:"data"`
}

// ChunkView is the interface's form of a hit.
func ChunkView(h store.KnowledgeHit) KnowledgeChunk {
	c := KnowledgeChunk{Object: "knowledge_chunk", ID: string(h.Chunk.ID), KnowledgeBaseID: string(h.Chunk.KBID), DocumentID: string(h.Chunk.DocumentID),
		DocumentName: h.DocumentName, Heading: h.Chunk.Heading, Text: h.Chunk.Body, Score: h.Score, RawScore: h.RawScore}
	if h.SourceURL != "" {
		u := h.SourceURL
		c.URL = &u
	}
	if h.Chunk.Page > 0 {
		p := h.Chunk.Page
		c.Page = &p
	}
	return c
}

// Search runs a query over the actor's knowledge base, as an agent's turn would.
func (s *Service) Search(ctx context.Context, act app.Actor, kbID string, r KnowledgeSearch) (KnowledgeSearchResult, error) {
	k, err := base(ctx, s.Store.Queries, act, kbID)
	if err != nil {
		return KnowledgeSearchResult{}, err
	}
	if r.Limit == 0 {
		r.Limit = 5
	}
	start := time.Now()
	hits, err := s.Retrieve(ctx, k.OrgID, []store.KnowledgeBaseID{k.ID}, r.Query, r.Limit)
	if err != nil {
		return KnowledgeSearchResult{}, err
	}
	out := KnowledgeSearchResult{Object: "knowledge_search", Query: r.Query, Method: "full_text", Data: make([]KnowledgeChunk, len(hits)),
		TookMS: float64(time.Since(start).Microseconds()) / 1000}
	if s.Embedder != nil {
		out.Method = "hybrid"
	}
	for i, h := range hits {
		out.Data[i] = ChunkView(h)
	}
	return out, nil
}

// Bases resolves the knowledge bases an agent names, in its project; names with no base are
// left out (the definition is checked when saved; a base deleted since finds nothing).
func (s *Service) Bases(ctx context.Context, org store.OrgID, project store.ProjectID, names []string) ([]store.KnowledgeBaseID, error) {
	ks, err := s.Store.Knowledge().BasesByName(ctx, store.OrgScope(org), project, names)
	if err != nil {
		return nil, err
	}
	ids := make([]store.KnowledgeBaseID, len(ks))
	for i, k := range ks {
		ids[i] = k.ID
	}
	return ids, nil
}

// rrfK is the constant of reciprocal-rank fusion (Cormack et al. 2009).
const rrfK = 60

// Retrieve finds the limit chunks of the bases that best answer query, best first, each with
// its score relative to the best (1) in Score and the engine's in RawScore. Full text always;
// with an embedder, the vector ranking is fused with it by reciprocal rank.
func (s *Service) Retrieve(ctx context.Context, org store.OrgID, bases []store.KnowledgeBaseID, query string, limit int) ([]store.KnowledgeHit, error) {
	if limit <= 0 {
		limit = 5
	}
	terms := Terms(query)
	pool := limit
	if s.Embedder != nil {
		pool = max(limit*4, 20)
	}
	hits, err := s.Store.Knowledge().Search(ctx, org, bases, terms, pool)
	if err != nil {
		return nil, err
	}
	if s.Embedder != nil {
		if hits, err = s.fuse(ctx, org, bases, query, hits, pool); err != nil {
			return nil, err
		}
	}
	if len(hits) > limit {
		hits = hits[:limit]
	}
	for i := range hits {
		hits[i].RawScore = hits[i].Score
	}
	if len(hits) > 0 && hits[0].Score > 0 {
		top := hits[0].Score
		for i := range hits {
			hits[i].Score = math.Round(hits[i].Score/top*1e4) / 1e4
		}
	}
	return hits, nil
}

// fuse ranks the chunks by cosine similarity to the query's embedding (brute force) and fuses
// that ranking with the full-text one by reciprocal rank.
func (s *Service) fuse(ctx context.Context, org store.OrgID, bases []store.KnowledgeBaseID, query string, ft []store.KnowledgeHit, pool int) ([]store.KnowledgeHit, error) {
	vs, err := s.Embedder.Embed(ctx, []string{query})
	if err != nil || len(vs) != 1 {
		// Full text alone still answers: a turn never fails for want of embeddings.
		s.log().WarnContext(ctx, "knowledge: the query could not be embedded; full text only", "err", err)
		return ft, nil
	}
	q := normalize(vs[0])
	all, err := s.Store.Knowledge().Embedded(ctx, org, bases)
	if err != nil {
		return nil, err
	}
	for i := range all {
		all[i].Score = dot(q, all[i].Chunk.Embedding)
	}
	slices.SortFunc(all, func(a, b store.KnowledgeHit) int { return cmp.Compare(b.Score, a.Score) })
	if len(all) > pool {
		all = all[:pool]
	}
	fused := map[store.KnowledgeChunkID]*store.KnowledgeHit{}
	var order []store.KnowledgeChunkID
	add := func(list []store.KnowledgeHit) {
		for rank, h := range list {
			f, ok := fused[h.Chunk.ID]
			if !ok {
				c := h
				c.Score = 0
				f = &c
				fused[h.Chunk.ID] = f
				order = append(order, h.Chunk.ID)
			}
			f.Score += 1 / float64(rrfK+rank+1)
		}
	}
	add(ft)
	add(all)
	out := make([]store.KnowledgeHit, len(order))
	for i, id := range order {
		out[i] = *fused[id]
		out[i].Chunk.Embedding = nil
	}
	slices.SortStableFunc(out, func(a, b store.KnowledgeHit) int { return cmp.Compare(b.Score, a.Score) })
	return out, nil
}

func dot(a, b []float32) float64 {
	n := min(len(a), len(b))
	var s float32
	for i := range n {
		s += a[i] * b[i]
	}
	return float64(s)
}
