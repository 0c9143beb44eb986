package control

import (
	"context"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/app/vault"
	"github.com/parley-voice/parley/control/config"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/control/tools"
)

// toolsRole is the node's tool runner (issue 17): the MCP client with its warm sessions, the
// source of conversations' tools, and, with the worker role, the refresher of MCP tool lists.
type toolsRole struct {
	mcp    *tools.MCP
	src    *tools.Source
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// refreshEvery is how often the worker looks for MCP servers whose tool list is past its ttl.
const refreshEvery = time.Minute

// startTools makes the node's tool runner over the outbound guard.
func (n *Node) startTools() {
	ctx, cancel := context.WithCancel(context.Background())
	t := &toolsRole{cancel: cancel}
	t.mcp = &tools.MCP{Guard: n.Outbound, Log: n.log}
	t.src = &tools.Source{Store: n.Store, Vault: &vault.Service{Store: n.Store, Box: n.Box}, Guard: n.Outbound, MCP: t.mcp, Log: n.log}
	t.mcp.OnListChanged = func(id store.MCPServerID) {
		if err := t.src.Refresh(ctx, id); err != nil && ctx.Err() == nil {
			n.log.Warn("tools: refresh an MCP server after tools/list_changed", "server", id, "err", err)
		}
	}
	if n.cfg.Roles.Has(config.RoleWorker) {
		t.wg.Go(func() { t.src.RunRefresher(ctx, refreshEvery) })
	}
	n.tools = t
}

// close stops the refresher, closes the MCP sessions and writes the queued call records.
func (t *toolsRole) close() {
	if t == nil {
		return
	}
	t.cancel()
	t.wg.Wait()
	t.mcp.Close()
	t.src.Close()
}
