package api

import (
	"fmt"
	"slices"
	"strings"
)

// Scopes are the named permissions an API key can carry. The first fifteen are named by the
// interface specification; the rest follow the same resource:verb style for operations the
// specification leaves open (listed per operation in the OpenAPI document).
var Scopes = []string{
	"agents:read", "agents:write", "calls:write", "campaigns:read", "campaigns:write",
	"chats:write", "conversations:read", "conversations:delete", "transcripts:read",
	"billing:read", "webhooks:read", "webhooks:write", "evaluations:run", "audit:read",
	"whatsapp:write",
	"projects:read", "numbers:read", "numbers:write", "contacts:read", "contacts:write",
	"knowledge:read", "knowledge:write", "tools:read", "tools:write", "mcp:read", "mcp:write",
	"vault:read", "vault:write", "dnc:read", "dnc:write", "attachments:write", "events:read",
	"calls:listen",
}

// ParseScopes checks a comma-separated list of scopes; empty means every scope.
func ParseScopes(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return slices.Clone(Scopes), nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(Scopes, p) {
			return nil, fmt.Errorf("unknown scope %q (known: %s)", p, strings.Join(Scopes, ", "))
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}
