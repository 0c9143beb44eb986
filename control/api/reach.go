package api

import (
	"errors"
	"net/http"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

// Loaders of the operations not yet moved onto the typed shape (calls, chats, conversations,
// scheduled calls, steering). They compare organizations and reach by hand; the typed
// operations load through the store's Scope in the domain layer instead (app.NotFound,
// app.Project, app.WritableProject). Delete each one with its last caller.

// errAgentNotFound is the 404 of an agent the key does not reach, the same whether the agent
// is missing, deleted or in a project outside the key's reach.
func errAgentNotFound(id string) error {
	return fault.E(fault.CodeAgentNotFound, "No agent %s is reachable with this key.", quoteID(id))
}

func quoteID(id string) string { return app.QuoteID(id) }

// reachableProject returns the project id if the key reaches it (404 otherwise).
func reachableProject(r *http.Request, q *store.Queries, raw string) (store.Project, error) {
	p := PrincipalFrom(r.Context())
	id, err := store.ParseID[store.ProjectID](raw)
	notFound := fault.E(fault.CodeProjectNotFound, "No project %s is reachable with this key.", quoteID(raw))
	if err != nil {
		return store.Project{}, notFound
	}
	pr, err := q.GetProject(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || err == nil && (pr.OrgID != p.Org.ID || !p.Key.Reaches(pr.ID)) {
		return store.Project{}, notFound
	}
	return pr, err
}

// writableProject refuses changes in a frozen project.
func writableProject(r *http.Request, q *store.Queries, id store.ProjectID) error {
	pr, err := q.GetProject(r.Context(), id)
	if err != nil {
		return err
	}
	if pr.Frozen {
		return fault.E(fault.CodeProjectFrozen, "The project %s is frozen: its objects cannot be changed.", pr.Name)
	}
	return nil
}

// reach is the project filter of a key for lists: nil reaches every project.
func reach(p *Principal) []store.ProjectID {
	if p.Key.AllProjects {
		return nil
	}
	out := make([]store.ProjectID, len(p.Key.ProjectIDs))
	copy(out, p.Key.ProjectIDs)
	return out
}
