package tools

import (
	"context"
	"time"

	apptools "github.com/parley-voice/parley/control/app/tools"
	"github.com/parley-voice/parley/control/app/vault"
	"github.com/parley-voice/parley/control/store"
)

// Refresh lists one server's tools again and stores them (the system's: any organization),
// unless the server changed meanwhile. Called on tools/list_changed and when its ttl passed;
// never inside a turn.
func (s *Source) Refresh(ctx context.Context, id store.MCPServerID) error {
	ms, err := s.Store.MCPServersByID(ctx, id)
	if err != nil {
		return err
	}
	return s.refresh(ctx, ms)
}

func (s *Source) refresh(ctx context.Context, m store.MCPServer) error {
	sp, _, err := apptools.ParseServerSpec(m)
	if err != nil {
		return err
	}
	var cred *vault.Credential
	if m.SecretID != "" && s.Vault != nil {
		c, err := s.Vault.Resolve(ctx, store.OrgScope(m.OrgID), m.SecretID)
		if err != nil {
			return s.Store.SetDiscovery(ctx, m.ID, m.UpdatedAt, store.Discovery{Tools: m.Discovered, ProtocolVersion: m.ProtocolVersion,
				LastError: "the server's vault secret cannot be opened", At: time.Now()})
		}
		cred = &c
	}
	d := s.MCP.Discover(ctx, sp.URL, time.Duration(sp.TimeoutMS)*time.Millisecond, cred)
	if d.LastError != "" {
		d.Tools = m.Discovered // keep the last good list; say what went wrong
		if d.ProtocolVersion == "" {
			d.ProtocolVersion = m.ProtocolVersion
		}
	}
	return s.Store.SetDiscovery(ctx, m.ID, m.UpdatedAt, d)
}

// RunRefresher refreshes, every period, the servers whose ttl_ms has passed since their last
// refresh, until ctx ends.
func (s *Source) RunRefresher(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.refreshDue(ctx)
	}
}

// refreshDue refreshes the servers due now.
func (s *Source) refreshDue(ctx context.Context) {
	now := time.Now()
	ms, err := s.Store.MCPServersRefreshedBefore(ctx, now.Add(-time.Minute), 100)
	if err != nil {
		s.log().Warn("tools: list MCP servers to refresh", "err", err)
		return
	}
	for _, m := range ms {
		sp, _, err := apptools.ParseServerSpec(m)
		if err != nil || (m.RefreshedAt != nil && m.RefreshedAt.Add(time.Duration(sp.TTLMS)*time.Millisecond).After(now)) {
			continue
		}
		if err := s.refresh(ctx, m); err != nil {
			s.log().Warn("tools: refresh an MCP server", "server", m.ID, "err", err)
		}
	}
}
