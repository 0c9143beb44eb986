package api

import (
	"context"
	"net/http"

	"github.com/parley-voice/parley/control/app/vault"
	"github.com/parley-voice/parley/control/fault"
)

// vaultOperations are the operations of the credential vault (issue 17).
func vaultOperations() []*operation {
	return []*operation{
		typed(operation{
			ID: "listVaultSecrets", Method: http.MethodGet, Path: "/vault/secrets", Tag: "Vault",
			Summary:     "List the vault secrets of the projects the key reaches, oldest first",
			Description: "Values are never returned. Each secret names what uses it (used_by) and when it was last used.",
			Permission:  "vault:read",
			Codes:       []string{fault.CodeProjectNotFound},
			Status:      http.StatusOK,
		}, (*API).listVaultSecrets),
		typed(operation{
			ID: "createVaultSecret", Method: http.MethodPost, Path: "/vault/secrets", Tag: "Vault",
			Summary: "Keep a credential in the vault",
			Description: "The value is write-only: it is encrypted at once (AES-256-GCM under its own data key, wrapped by the master key) and never returned, logged or sent in an event. " +
				"Tools and MCP servers of the same project name the secret by id. Takes an optional Idempotency-Key.",
			Permission: "vault:write", Changes: true, Idempotency: idemOptional,
			Codes:  []string{fault.CodeProjectNotFound, fault.CodeProjectFrozen, fault.CodeSecretNameTaken},
			Status: http.StatusCreated,
		}, (*API).createVaultSecret),
		typed(operation{
			ID: "getVaultSecret", Method: http.MethodGet, Path: "/vault/secrets/{secret_id}", Tag: "Vault",
			Summary:    "Get a vault secret (never its value)",
			Permission: "vault:read",
			Codes:      []string{fault.CodeSecretNotFound},
			Status:     http.StatusOK,
		}, (*API).getVaultSecret),
		typed(operation{
			ID: "updateVaultSecret", Method: http.MethodPatch, Path: "/vault/secrets/{secret_id}", Tag: "Vault",
			Summary:     "Rename a vault secret, change how it is sent, or give it a new value",
			Description: "Members left out are left as they are. A new value is sealed under a new data key; its users send it from their next call.",
			Permission:  "vault:write", Changes: true,
			Codes:  []string{fault.CodeSecretNotFound, fault.CodeProjectFrozen, fault.CodeSecretNameTaken},
			Status: http.StatusOK,
		}, (*API).updateVaultSecret),
		typed(operation{
			ID: "deleteVaultSecret", Method: http.MethodDelete, Path: "/vault/secrets/{secret_id}", Tag: "Vault",
			Summary:     "Delete a vault secret that nothing uses",
			Description: "A secret still used by a tool, an MCP server or a sender is refused with 409 vault_secret_in_use, whose detail and used_by name them.",
			Permission:  "vault:write", Changes: true,
			Codes:  []string{fault.CodeSecretNotFound, fault.CodeProjectFrozen, fault.CodeSecretInUse},
			Status: http.StatusOK,
		}, (*API).deleteVaultSecret),
	}
}

type listVaultSecretsIn struct {
	listQuery
	ProjectID string `query:"project_id" format:"uuid" doc:"Only this project's secrets; 404 when the key reaches no such project."`
}

func (a *API) listVaultSecrets(ctx context.Context, c *call, in *listVaultSecretsIn) (*list[vault.VaultSecret], error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	ss, err := a.Vault.List(ctx, c.actor(ctx), vault.Filter{ProjectID: in.ProjectID}, pg.storePage())
	if err != nil {
		return nil, err
	}
	return listOf(pg, ss, func(s vault.VaultSecret) string { return s.ID }), nil
}

type createVaultSecretIn struct {
	Body vault.VaultSecretCreate `body:"required"`
}

func (a *API) createVaultSecret(ctx context.Context, c *call, in *createVaultSecretIn) (*vault.VaultSecret, error) {
	s, err := a.Vault.Create(ctx, c.actor(ctx), in.Body)
	return &s, err
}

type vaultSecretIn struct {
	ID string `path:"secret_id" format:"uuid" doc:"The vault secret."`
}

func (a *API) getVaultSecret(ctx context.Context, c *call, in *vaultSecretIn) (*vault.VaultSecret, error) {
	s, err := a.Vault.Get(ctx, c.actor(ctx), in.ID)
	return &s, err
}

type updateVaultSecretIn struct {
	ID   string                  `path:"secret_id" format:"uuid" doc:"The vault secret."`
	Body vault.VaultSecretUpdate `body:"required"`
}

func (a *API) updateVaultSecret(ctx context.Context, c *call, in *updateVaultSecretIn) (*vault.VaultSecret, error) {
	s, err := a.Vault.Update(ctx, c.actor(ctx), in.ID, in.Body)
	return &s, err
}

func (a *API) deleteVaultSecret(ctx context.Context, c *call, in *vaultSecretIn) (*vault.VaultSecretDeleted, error) {
	s, err := a.Vault.Delete(ctx, c.actor(ctx), in.ID)
	return &s, err
}
