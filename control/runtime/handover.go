package runtime

import (
	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/session"
)

// specialistsFor gives a desk agent's engine its specialists and the built-in hand-over tool
// (session.ToolHandOver) its model calls to route the conversation to one of them. Other kinds
// of agent have no specialists (the definition's schema allows them only on a desk). Their
// prompts are rendered with the conversation's variables, as the agent's are.
func specialistsFor(def *agentdef.Definition, vars map[string]any, a *session.Agent) error {
	if def.Agent.Kind != agentdef.KindDesk || len(def.Agent.Specialists) == 0 {
		return nil
	}
	specs := make([]session.Specialist, len(def.Agent.Specialists))
	for i, s := range def.Agent.Specialists {
		prompt, err := agentdef.Render(s.SystemPrompt, vars)
		if err != nil {
			return err
		}
		specs[i] = session.Specialist{Name: s.Name, Description: s.Description, SystemPrompt: prompt}
		if s.Voice != nil {
			specs[i].Voice = s.Voice.Name
		}
	}
	a.Specialists = specs
	a.Tools = append(a.Tools, session.HandOverSchema(specs))
	return nil
}
