package store

import (
	"context"
	"errors"
	"time"
)

// InboundRoute is what taking an inbound call reads (issue 20: in one statement): the number
// called, its agent, the agent's project and organization, and what the organization's calls
// in progress hold at the time of the call.
type InboundRoute struct {
	Number         PhoneNumber
	Agent          Agent
	Project        Project
	Org            Org
	ReservedMicros int64 // the organization's credit held by its calls in progress
}

// ErrNoAgent says a number is known but no agent answers it: it has none, or its agent is
// deleted (or, which the store never lets happen, of another organization).
var ErrNoAgent = errors.New("store: the number has no agent")

// InboundRoute returns the route of a call to number at now. An unknown number is
// ErrNotFound; a number without an agent of its own organization is ErrNoAgent (with the
// number in the route). The agent's status, channels, direction and the freezes are left to
// the caller.
func (q *Queries) InboundRoute(ctx context.Context, number string, now time.Time) (InboundRoute, error) {
	var r InboundRoute
	err := q.get(ctx, "inbound route", `SELECT `+prefixCols("n", numberCols)+`, `+prefixCols("a", agentCols)+`,
		`+prefixCols("p", projectCols)+`, `+prefixCols("o", orgCols)+`,
		(SELECT CAST(COALESCE(SUM(r.amount_micros), 0) AS BIGINT) FROM credit_reservations r WHERE r.org_id = o.id AND r.expires_at > $2)
		FROM phone_numbers n
		JOIN agents a ON a.id = n.agent_id AND a.org_id = n.org_id AND a.deleted_at IS NULL
		JOIN projects p ON p.id = a.project_id AND p.org_id = a.org_id
		JOIN organizations o ON o.id = n.org_id
		WHERE n.number = $1`, []any{number, ts(now)},
		func(rs rowScanner) error {
			dest := append(numberDest(&r.Number), agentDest(&r.Agent)...)
			dest = append(dest, projectDest(&r.Project)...)
			dest = append(dest, orgDest(&r.Org)...)
			return rs.Scan(append(dest, &r.ReservedMicros)...)
		})
	if !errors.Is(err, ErrNotFound) {
		return r, err
	}
	// Not routed: an unknown number, or one no agent answers.
	if r.Number, err = q.FindPhoneNumber(ctx, number); err != nil {
		return InboundRoute{}, err
	}
	return r, ErrNoAgent
}
