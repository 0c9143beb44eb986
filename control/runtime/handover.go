package runtime

import (
	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/session"
)

// specialistsFor gives a desk agent's engine its specialists and the built-in hand-over tool
// (session.ToolHandOver) its model calls to route the conversation to one of them. Other kinds
// of agent have no specialists (the definition's schema allows them only on a desk).
func specialistsFor(def *agentdef.Definition, a *session.Agent) {
	if def.Agent.Kind != agentdef.KindDesk || len(def.Agent.Specialists) == 0 {
		return
	}
	specs := make([]session.Specialist, len(def.Agent.Specialists))
	for i, s := range def.Agent.Specialists {
		specs[i] = session.Specialist{Name: s.Name, Description: s.Description, SystemPrompt: s.SystemPrompt}
		if s.Voice != nil {
			specs[i].Voice = s.Voice.Name
		}
	}
	a.Specialists = specs
	a.Tools = append(a.Tools, session.HandOverSchema(specs))
}
