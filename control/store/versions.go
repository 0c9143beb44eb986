package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// AgentVersion is one published, frozen definition of an agent, numbered from 1.
type AgentVersion struct {
	AgentID     AgentID
	Version     int
	Note        string
	Definition  json.RawMessage
	PublishedBy string // who published it: an API key id or "operator"
	PublishedAt time.Time
}

// VersionFilter selects an agent's versions, newest first.
type VersionFilter struct {
	AgentID       AgentID
	BeforeVersion int // only versions below this one (the previous page's last); 0 means no bound
	Limit         int // 1–1000; 0 means 100
}

// MaxNote is the longest publish note, in characters.
const MaxNote = 500

const versionCols = `agent_id, version, note, definition, published_by, published_at`

func scanVersion(r rowScanner) (AgentVersion, error) {
	var v AgentVersion
	err := r.Scan(&v.AgentID, &v.Version, &v.Note, jsonCol{&v.Definition}, &v.PublishedBy, timeCol{&v.PublishedAt})
	return v, err
}

// PublishAgent freezes the agent's current definition as its next version with note, marks
// the agent published and returns the version and the agent as changed. Concurrent publishes
// of one agent take turns: each gets its own number. A deleted or unknown agent is ErrNotFound.
func (q *Queries) PublishAgent(ctx context.Context, id AgentID, note, by string) (AgentVersion, Agent, error) {
	if !utf8.ValidString(note) || utf8.RuneCountInString(note) > MaxNote {
		return AgentVersion{}, Agent{}, fmt.Errorf("store: %w: a publish note is UTF-8 of at most %d characters", ErrInvalid, MaxNote)
	}
	if !validID(id) {
		return AgentVersion{}, Agent{}, notFound("agent", id)
	}
	var v AgentVersion
	var a Agent
	err := q.atomic(ctx, func(q *Queries) error {
		now := q.s.timeNow()
		// The UPDATE takes the row lock first, so that concurrent publishers number in turn.
		err := q.get(ctx, "publish agent",
			`UPDATE agents SET current_version = current_version + 1, status = $2, published_at = $3, updated_at = $3
			WHERE id = $1 AND deleted_at IS NULL RETURNING `+agentCols,
			[]any{string(id), string(AgentPublished), ts(now)},
			func(r rowScanner) (err error) { a, err = scanAgent(r); return err })
		if err != nil {
			return err
		}
		v = AgentVersion{AgentID: id, Version: a.Version, Note: note, Definition: a.Definition, PublishedBy: by, PublishedAt: now}
		_, err = q.exec(ctx, "record agent version",
			`INSERT INTO agent_versions (`+versionCols+`) VALUES ($1, $2, $3, $4, $5, $6)`,
			string(id), v.Version, note, string(v.Definition), by, ts(now))
		return err
	})
	if err != nil {
		return AgentVersion{}, Agent{}, err
	}
	return v, a, nil
}

// GetAgentVersion returns one version of an agent, or ErrNotFound.
func (q *Queries) GetAgentVersion(ctx context.Context, id AgentID, version int) (AgentVersion, error) {
	if !validID(id) || version < 1 {
		return AgentVersion{}, fmt.Errorf("store: agent %s version %d: %w", id, version, ErrNotFound)
	}
	var v AgentVersion
	err := q.get(ctx, "get agent version", `SELECT `+versionCols+` FROM agent_versions WHERE agent_id = $1 AND version = $2`,
		[]any{string(id), version}, func(r rowScanner) (err error) { v, err = scanVersion(r); return err })
	return v, err
}

// ListAgentVersions returns an agent's versions f selects, newest first.
func (q *Queries) ListAgentVersions(ctx context.Context, f VersionFilter) ([]AgentVersion, error) {
	if !validID(f.AgentID) {
		return nil, nil
	}
	before := f.BeforeVersion
	if before <= 0 {
		before = 1<<31 - 1
	}
	return list(ctx, q, "list agent versions",
		`SELECT `+versionCols+` FROM agent_versions WHERE agent_id = $1 AND version < $2 ORDER BY version DESC LIMIT $3`,
		[]any{string(f.AgentID), before, clampLimit(f.Limit)}, scanVersion)
}
