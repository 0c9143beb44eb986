package api

import (
	"net/http"
	"sync"

	"github.com/parley-voice/parley/control/app/agents"
	"github.com/parley-voice/parley/control/fault"
)

// operations returns every operation of the interface that this version implements, in the
// order of the specification's index. It is built once.
var operations = sync.OnceValue(func() []*operation {
	ops := append(keyOperations(), agentOperations()...)
	ops = append(ops, evaluationOperations()...) // issue 18
	ops = append(ops, numberOperations()...)
	ops = append(ops, billingOperations()...)
	ops = append(ops, knowledgeOperations()...) // issue 16
	ops = append(ops, vaultOperations()...)     // issue 17
	ops = append(ops, toolOperations()...)      // issue 17
	ops = append(ops, whatsappOperations()...)  // issue 19
	ops = append(ops, conversationOperations()...)
	ops = append(ops, webhookOperations()...)   // issue 14
	return append(ops, campaignOperations()...) // issue 15
})

// agentOperations are the operations of agents.
func agentOperations() []*operation {
	return []*operation{
		typed(operation{
			ID: "listAgents", Method: http.MethodGet, Path: "/agents", Tag: "Agents",
			Summary:    "List the agents the key reaches, oldest first",
			Permission: "agents:read",
			Codes:      []string{fault.CodeProjectNotFound},
			Status:     http.StatusOK,
		}, (*API).listAgents),
		typed(operation{
			ID: "createAgent", Method: http.MethodPost, Path: "/agents", Tag: "Agents",
			Summary:     "Create a draft agent from a definition",
			Description: "The definition is validated (422 invalid_definition names every place that does not fit). Without name, the definition's name is used, made unique in the project (Support, Support (2), …); with name, that name is taken as it is (409 agent_name_taken when the project has it). Takes an optional Idempotency-Key.",
			Permission:  "agents:write", Changes: true, Idempotency: idemOptional, MaxBody: definitionMaxBody,
			Codes:  []string{fault.CodeProjectNotFound, fault.CodeProjectFrozen, fault.CodeAgentNameTaken, fault.CodeInvalidDefinition, fault.CodeUnknownToolReference},
			Status: http.StatusCreated, Location: true,
			Locate: func(v any) string { return "/v1/agents/" + v.(agents.AgentDetail).ID },
		}, (*API).createAgent),
		typed(operation{
			ID: "getAgent", Method: http.MethodGet, Path: "/agents/{agent_id}", Tag: "Agents",
			Summary:    "Get an agent with its languages, schemas and phone numbers",
			Permission: "agents:read",
			Codes:      []string{fault.CodeAgentNotFound},
			Status:     http.StatusOK,
		}, (*API).getAgent),
		typed(operation{
			ID: "deleteAgent", Method: http.MethodDelete, Path: "/agents/{agent_id}", Tag: "Agents",
			Summary:     "Delete an agent (restorable for 30 days)",
			Description: "The agent is archived at once: the API no longer serves it (404) and its phone numbers are released. It is purged for good at purges_at, 30 days later; until then the operator can restore it with parley admin agents restore.",
			Permission:  "agents:write", Changes: true,
			Codes:  []string{fault.CodeAgentNotFound, fault.CodeProjectFrozen},
			Status: http.StatusOK,
		}, (*API).deleteAgent),
		typed(operation{
			ID: "getAgentDefinition", Method: http.MethodGet, Path: "/agents/{agent_id}/definition", Tag: "Agents",
			Summary:     "Export the agent's current definition",
			Description: "Every setting is shown, defaults included. The document carries no id of another object, no credential, no phone number and no domain: references are by name. Creating an agent from it and exporting again gives the same document apart from exported_at.",
			Permission:  "agents:read",
			Codes:       []string{fault.CodeAgentNotFound},
			Status:      http.StatusOK,
		}, (*API).getAgentDefinition),
		typed(operation{
			ID: "replaceAgentDefinition", Method: http.MethodPut, Path: "/agents/{agent_id}/definition", Tag: "Agents",
			Summary:     "Replace the agent's definition",
			Description: "Needs a live key. The definition's kind and direction must equal the agent's own (422). On a published agent the new definition is live at once; the next publish freezes it as a version.",
			Permission:  "agents:write", LiveOnly: true, Changes: true, MaxBody: definitionMaxBody,
			Codes:  []string{fault.CodeAgentNotFound, fault.CodeProjectFrozen, fault.CodeAgentNameTaken, fault.CodeInvalidDefinition, fault.CodeKindMismatch, fault.CodeDirectionMismatch, fault.CodeUnknownToolReference},
			Status: http.StatusOK,
		}, (*API).replaceAgentDefinition),
		typed(operation{
			ID: "publishAgent", Method: http.MethodPost, Path: "/agents/{agent_id}/publish", Tag: "Agents",
			Summary:     "Publish the current definition as the next version",
			Description: "Freezes the current definition as version N+1 with the note, and sets the agent's status to published and its published_at. The body may be empty. Takes an optional Idempotency-Key.",
			Permission:  "agents:write", Changes: true, Idempotency: idemOptional,
			Codes:  []string{fault.CodeAgentNotFound, fault.CodeProjectFrozen},
			Status: http.StatusCreated,
		}, (*API).publishAgent),
		typed(operation{
			ID: "listAgentVersions", Method: http.MethodGet, Path: "/agents/{agent_id}/versions", Tag: "Agents",
			Summary:    "List the agent's published versions, newest first",
			Permission: "agents:read",
			Codes:      []string{fault.CodeAgentNotFound},
			Status:     http.StatusOK,
		}, (*API).listAgentVersions),
		typed(operation{
			ID: "getAgentVersionDefinition", Method: http.MethodGet, Path: "/agents/{agent_id}/versions/{version}/definition", Tag: "Agents",
			Summary:    "Export the definition frozen as a published version",
			Permission: "agents:read",
			Codes:      []string{fault.CodeAgentNotFound, fault.CodeVersionNotFound},
			Status:     http.StatusOK,
		}, (*API).getAgentVersionDefinition),
	}
}

// numberOperations are the operations of phone numbers.
func numberOperations() []*operation {
	return []*operation{
		typed(operation{
			ID: "listPhoneNumbers", Method: http.MethodGet, Path: "/phone-numbers", Tag: "Phone numbers",
			Summary:    "List the phone numbers of the projects the key reaches, oldest first",
			Permission: "numbers:read",
			Codes:      []string{fault.CodeProjectNotFound},
			Status:     http.StatusOK,
		}, (*API).listPhoneNumbers),
		typed(operation{
			ID: "updatePhoneNumber", Method: http.MethodPatch, Path: "/phone-numbers/{phone_number_id}", Tag: "Phone numbers",
			Summary:     "Assign or clear the number's agent, or set its label",
			Description: "Needs a live key: the agent a number is assigned to answers real callers. Members left out are left as they are; agent_id null clears the assignment. The agent must be in the number's project. Numbers themselves are added by the operator (parley admin numbers add).",
			Permission:  "numbers:write", LiveOnly: true, Changes: true,
			Codes:  []string{fault.CodePhoneNumberNotFound, fault.CodeAgentNotFound, fault.CodeAgentOtherProject, fault.CodeProjectFrozen},
			Status: http.StatusOK,
		}, (*API).updatePhoneNumber),
	}
}

// keyOperations are the operations of the calling key and its projects.
func keyOperations() []*operation {
	return []*operation{
		typed(operation{
			ID: "getMe", Method: http.MethodGet, Path: "/me", Tag: "Keys",
			Summary:     "The calling key: its organization, kind, permissions and project reach",
			Description: "Any valid key reads itself, whatever its permissions, so that a narrowly scoped key can see what it may do. It reveals nothing beyond the key itself and its organization.",
			Status:      http.StatusOK,
		}, (*API).getMe),
		typed(operation{
			ID: "listProjects", Method: http.MethodGet, Path: "/projects", Tag: "Projects",
			Summary:    "List the projects the key reaches, oldest first",
			Permission: "projects:read",
			Status:     http.StatusOK,
		}, (*API).listProjects),
	}
}
