package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
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

// MaxNote is the longest publish note, in characters.
const MaxNote = 500

const versionCols = `agent_id, version, note, definition, published_by, published_at`

func scanVersion(r rowScanner) (AgentVersion, error) {
	var v AgentVersion
	err := r.Scan(&v.AgentID, &v.Version, &v.Note, jsonCol{&v.Definition}, &v.PublishedBy, timeCol{&v.PublishedAt})
	return v, err
}

// Publish freezes the current definition of the scope's agent as its next version with note,
// marks the agent published and returns the version and the agent as changed. Concurrent
// publishes of one agent take turns: each gets its own number. An agent outside the scope,
// deleted or unknown is ErrNotFound.
func (r Agents) Publish(ctx context.Context, sc Scope, id AgentID, note, by string) (AgentVersion, Agent, error) {
	if !utf8.ValidString(note) || utf8.RuneCountInString(note) > MaxNote {
		return AgentVersion{}, Agent{}, fmt.Errorf("store: %w: a publish note is UTF-8 of at most %d characters", ErrInvalid, MaxNote)
	}
	var v AgentVersion
	var a Agent
	err := r.q.atomic(ctx, func(q *Queries) error {
		if _, err := q.Agents().Get(ctx, sc, id); err != nil {
			return err
		}
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

// Version returns one published version of the scope's agent, or ErrNotFound (also when the
// agent is outside the scope or deleted).
func (r Agents) Version(ctx context.Context, sc Scope, id AgentID, version int) (AgentVersion, error) {
	if _, err := r.Get(ctx, sc, id); err != nil {
		return AgentVersion{}, err
	}
	return r.q.SystemAgents().Version(ctx, id, version)
}

// Versions returns the published versions of the scope's agent, newest first: a page of up to
// pg.Limit below the version pg.After names ("" for the first page), and one more when another
// page follows. An agent outside the scope, deleted or unknown is ErrNotFound.
func (r Agents) Versions(ctx context.Context, sc Scope, id AgentID, pg Page) ([]AgentVersion, error) {
	if _, err := r.Get(ctx, sc, id); err != nil {
		return nil, err
	}
	before := 1<<31 - 1
	if pg.After != "" {
		n, err := strconv.Atoi(pg.After)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("store: %w: version cursor %q", ErrInvalid, pg.After)
		}
		before = n
	}
	return list(ctx, r.q, "list agent versions",
		`SELECT `+versionCols+` FROM agent_versions WHERE agent_id = $1 AND version < $2 ORDER BY version DESC LIMIT $3`,
		[]any{string(id), before, clampLimit(pg.Limit) + 1}, scanVersion)
}

// Version returns one version of an agent of any organization, even a deleted one, or
// ErrNotFound: a conversation runs the version it started with.
func (r SystemAgents) Version(ctx context.Context, id AgentID, version int) (AgentVersion, error) {
	if !validID(id) || version < 1 {
		return AgentVersion{}, fmt.Errorf("store: agent %s version %d: %w", id, version, ErrNotFound)
	}
	var v AgentVersion
	err := r.q.get(ctx, "get agent version", `SELECT `+versionCols+` FROM agent_versions WHERE agent_id = $1 AND version = $2`,
		[]any{string(id), version}, func(r rowScanner) (err error) { v, err = scanVersion(r); return err })
	return v, err
}
