package whatsapp

import (
	"context"
	"errors"
	"regexp"
	"strings"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

// Sender is the WhatsappSender object: a messaging-app number of a project and the agent that
// answers it. Secrets are named by their vault ids; the verify token is never shown.
type Sender struct {
	Object              string   `json:"object" jsonschema:"enum=whatsapp_sender"`
	ID                  string   `json:"id" jsonschema:"format=uuid"`
	ProjectID           string   `json:"project_id" jsonschema:"format=uuid"`
	AgentID             *string  `json:"agent_id" doc:"The agent that answers the number; null when none does." jsonschema:"format=uuid,nullable"`
	PhoneNumberID       string   `json:"phone_number_id" doc:"Meta's phone-number id (inbound webhooks name it in metadata.phone_number_id)."`
	BusinessAccountID   *string  `json:"business_account_id" doc:"The WhatsApp Business Account id, whose approved templates start conversations; null when not set." jsonschema:"nullable"`
	DisplayNumber       string   `json:"display_number" doc:"The number as people see it."`
	AccessTokenSecretID *string  `json:"access_token_secret_id" doc:"The vault secret holding the Graph API access token; null when not set." jsonschema:"nullable"`
	AppSecretSecretID   *string  `json:"app_secret_secret_id" doc:"The vault secret holding the Meta app secret that signs webhooks (X-Hub-Signature-256); null when not set." jsonschema:"nullable"`
	VerifyTokenSet      bool     `json:"verify_token_set" doc:"Whether a webhook verify token is set (the token itself is never shown)."`
	Connected           bool     `json:"connected" doc:"Whether the number has a business account id and an access token: templates can be listed and conversations started."`
	CreatedAt           app.Time `json:"created_at"`
	UpdatedAt           app.Time `json:"updated_at"`
}

// SchemaDoc describes the object in the document.
func (Sender) SchemaDoc() string {
	return "A WhatsApp Cloud API number of a project and the agent that answers it."
}

const (
	idPattern    = `^[0-9]{1,64}$`
	tokenPattern = `^[!-~]{8,256}$`
)

// SenderCreate is the body of a sender to connect.
type SenderCreate struct {
	ProjectID           string  `json:"project_id" jsonschema:"format=uuid"`
	AgentID             *string `json:"agent_id,omitempty" doc:"The agent that answers (an agent of the project that takes the whatsapp channel)." jsonschema:"format=uuid,nullable"`
	PhoneNumberID       string  `json:"phone_number_id" doc:"Meta's phone-number id, from WhatsApp Manager or the App Dashboard's API setup." jsonschema:"pattern=^[0-9]{1\\,64}$"`
	BusinessAccountID   *string `json:"business_account_id,omitempty" doc:"The WhatsApp Business Account id." jsonschema:"pattern=^[0-9]{1\\,64}$,nullable"`
	DisplayNumber       string  `json:"display_number,omitempty" jsonschema:"maxLength=120,pattern=^[^\\p{Cc}]*$"`
	AccessTokenSecretID *string `json:"access_token_secret_id,omitempty" doc:"A vault secret of the organization holding the access token (a system user's token)." jsonschema:"minLength=1,maxLength=64,nullable"`
	AppSecretSecretID   *string `json:"app_secret_secret_id,omitempty" doc:"A vault secret of the organization holding the app secret; webhooks are refused until it is set." jsonschema:"minLength=1,maxLength=64,nullable"`
	VerifyToken         *string `json:"verify_token,omitempty" doc:"The verify token entered in the App Dashboard's webhook settings (8 to 256 printable ASCII characters)." jsonschema:"pattern=^[!-~]{8\\,256}$,nullable"`
}

// SchemaDoc describes the body in the document.
func (SenderCreate) SchemaDoc() string { return "A WhatsApp Cloud API number to connect." }

// SenderUpdate is the body of a sender's partial update; members left out are left as they are.
type SenderUpdate struct {
	AgentID             app.Patch[string] `json:"agent_id,omitzero" doc:"null: no agent answers." jsonschema:"format=uuid,nullable"`
	BusinessAccountID   app.Patch[string] `json:"business_account_id,omitzero" jsonschema:"pattern=^[0-9]{1\\,64}$,nullable"`
	DisplayNumber       *string           `json:"display_number,omitempty" jsonschema:"maxLength=120,pattern=^[^\\p{Cc}]*$"`
	AccessTokenSecretID app.Patch[string] `json:"access_token_secret_id,omitzero" jsonschema:"minLength=1,maxLength=64,nullable"`
	AppSecretSecretID   app.Patch[string] `json:"app_secret_secret_id,omitzero" jsonschema:"minLength=1,maxLength=64,nullable"`
	VerifyToken         app.Patch[string] `json:"verify_token,omitzero" jsonschema:"pattern=^[!-~]{8\\,256}$,nullable"`
}

// SchemaExtras adds what the tags cannot say: the body names at least one member.
func (SenderUpdate) SchemaExtras() map[string]any { return map[string]any{"minProperties": 1} }

// SchemaDoc describes the body in the document.
func (SenderUpdate) SchemaDoc() string {
	return "Members left out are left as they are; null clears a member that may be empty."
}

// SenderDeleted answers a sender's deletion.
type SenderDeleted struct {
	Object  string `json:"object" jsonschema:"enum=whatsapp_sender"`
	ID      string `json:"id" jsonschema:"format=uuid"`
	Deleted bool   `json:"deleted" jsonschema:"enum=true"`
}

// SchemaDoc describes the object in the document.
func (SenderDeleted) SchemaDoc() string {
	return "A disconnected number; its conversations stay, its message records go."
}

var digits = regexp.MustCompile(idPattern)

// ViewSender is the interface's form of a stored sender.
func ViewSender(s store.WhatsAppSender) Sender {
	opt := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	return Sender{Object: "whatsapp_sender", ID: string(s.ID), ProjectID: string(s.ProjectID), AgentID: opt(string(s.AgentID)),
		PhoneNumberID: s.PhoneNumberID, BusinessAccountID: opt(s.BusinessAccountID), DisplayNumber: s.DisplayNumber,
		AccessTokenSecretID: opt(s.AccessTokenSecretID), AppSecretSecretID: opt(s.AppSecretSecretID), VerifyTokenSet: s.VerifyToken != "",
		Connected: s.BusinessAccountID != "" && s.AccessTokenSecretID != "", CreatedAt: app.T(s.CreatedAt), UpdatedAt: app.T(s.UpdatedAt)}
}

// Ready reports whether this deployment runs the channel: a vault for its credentials, the
// Graph API and the conversation engine.
func (s *Service) Ready() error {
	if s == nil || s.Secrets == nil || s.Graph == nil || s.Engine == nil {
		return fault.E(fault.CodeWhatsAppUnavailable, "This deployment does not run the messaging-app channel.")
	}
	return nil
}

// mapSenderErr turns the store's refusals of a sender's write into problems.
func mapSenderErr(err error, agent string) error {
	switch {
	case errors.Is(err, store.ErrConflict):
		return fault.E(fault.CodeWhatsAppSenderTaken, "This phone-number id is connected already.")
	case errors.Is(err, store.ErrOtherProject):
		return fault.E(fault.CodeAgentOtherProject, "The agent is in another project than the number; choose an agent of the number's project.")
	case errors.Is(err, store.ErrNotFound) && agent != "":
		return fault.E(fault.CodeAgentNotFound, "No agent %s is reachable with this key.", app.QuoteID(agent))
	}
	return err
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// CreateSender connects a number to a project (whatsapp_sender.created).
func (s *Service) CreateSender(ctx context.Context, act app.Actor, body SenderCreate) (Sender, error) {
	p, err := app.Project(ctx, s.Store.Queries, act, body.ProjectID)
	if err != nil {
		return Sender{}, err
	}
	if err := s.Ready(); err != nil {
		return Sender{}, err
	}
	ns := store.NewWhatsAppSender{OrgID: act.Org.ID, ProjectID: p.ID, AgentID: store.AgentID(strings.ToLower(deref(body.AgentID))), PhoneNumberID: body.PhoneNumberID,
		BusinessAccountID: deref(body.BusinessAccountID), DisplayNumber: body.DisplayNumber, AccessTokenSecretID: deref(body.AccessTokenSecretID),
		AppSecretSecretID: deref(body.AppSecretSecretID), VerifyToken: deref(body.VerifyToken)}
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (Sender, error) {
		if err := app.WritableProject(ctx, tx.Queries, act, p.ID); err != nil {
			return Sender{}, err
		}
		sn, err := tx.WhatsAppSenders().Create(ctx, act.Scope, ns)
		if err != nil {
			return Sender{}, mapSenderErr(err, string(ns.AgentID))
		}
		if err := s.Secrets.Link(ctx, tx, act, sn); err != nil {
			return Sender{}, err
		}
		v := ViewSender(sn)
		if err := au.Record("whatsapp_sender.created", "whatsapp_sender", v.ID, sn.ProjectID, map[string]any{
			"phone_number_id": sn.PhoneNumberID, "agent_id": v.AgentID, "business_account_id": v.BusinessAccountID,
			"access_token_secret_id": v.AccessTokenSecretID, "app_secret_secret_id": v.AppSecretSecretID, "verify_token_set": v.VerifyTokenSet}); err != nil {
			return Sender{}, err
		}
		return v, nil
	})
}

// ListSenders returns a page of the actor's senders, oldest first, with one more when another
// page follows.
func (s *Service) ListSenders(ctx context.Context, act app.Actor, pg store.Page) ([]Sender, error) {
	ss, err := s.Store.WhatsAppSenders().List(ctx, act.Scope, pg)
	if err != nil {
		return nil, err
	}
	out := make([]Sender, len(ss))
	for i, sn := range ss {
		out[i] = ViewSender(sn)
	}
	return out, nil
}

// GetSender returns the actor's sender with id.
func (s *Service) GetSender(ctx context.Context, act app.Actor, id string) (Sender, error) {
	sn, err := s.sender(ctx, act, id)
	return ViewSender(sn), err
}

func (s *Service) sender(ctx context.Context, act app.Actor, id string) (store.WhatsAppSender, error) {
	sn, err := s.Store.WhatsAppSenders().Get(ctx, act.Scope, store.WhatsAppSenderID(id))
	if err != nil {
		return sn, app.NotFound(err, fault.CodeWhatsAppSenderNotFound, "messaging-app number", id)
	}
	return sn, nil
}

func patchPtr(p app.Patch[string]) *string {
	if !p.Set {
		return nil
	}
	v := ""
	if !p.Null {
		v = p.Value
	}
	return &v
}

// UpdateSender changes a sender (whatsapp_sender.updated, naming the fields changed).
func (s *Service) UpdateSender(ctx context.Context, act app.Actor, id string, u SenderUpdate) (Sender, error) {
	if _, err := s.sender(ctx, act, id); err != nil {
		return Sender{}, err
	}
	if err := s.Ready(); err != nil {
		return Sender{}, err
	}
	ch := store.WhatsAppSenderChange{BusinessAccountID: patchPtr(u.BusinessAccountID), DisplayNumber: u.DisplayNumber,
		AccessTokenSecretID: patchPtr(u.AccessTokenSecretID), AppSecretSecretID: patchPtr(u.AppSecretSecretID), VerifyToken: patchPtr(u.VerifyToken)}
	if a := patchPtr(u.AgentID); a != nil {
		agent := store.AgentID(strings.ToLower(*a))
		ch.AgentID = &agent
	}
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (Sender, error) {
		old, err := tx.WhatsAppSenders().Get(ctx, act.Scope, store.WhatsAppSenderID(id))
		if err != nil {
			return Sender{}, app.NotFound(err, fault.CodeWhatsAppSenderNotFound, "messaging-app number", id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, old.ProjectID); err != nil {
			return Sender{}, err
		}
		sn, err := tx.WhatsAppSenders().Change(ctx, act.Scope, old.ID, ch)
		if err != nil {
			return Sender{}, mapSenderErr(err, deref((*string)(ch.AgentID)))
		}
		if err := s.Secrets.Link(ctx, tx, act, sn); err != nil {
			return Sender{}, err
		}
		was, now := ViewSender(old), ViewSender(sn)
		data := map[string]any{"phone_number_id": sn.PhoneNumberID}
		if ch.AgentID != nil {
			data["agent_id"] = app.Changed(was.AgentID, now.AgentID)
		}
		if ch.BusinessAccountID != nil {
			data["business_account_id"] = app.Changed(was.BusinessAccountID, now.BusinessAccountID)
		}
		if ch.DisplayNumber != nil {
			data["display_number"] = app.Changed(was.DisplayNumber, now.DisplayNumber)
		}
		if ch.AccessTokenSecretID != nil {
			data["access_token_secret_id"] = app.Changed(was.AccessTokenSecretID, now.AccessTokenSecretID)
		}
		if ch.AppSecretSecretID != nil {
			data["app_secret_secret_id"] = app.Changed(was.AppSecretSecretID, now.AppSecretSecretID)
		}
		if ch.VerifyToken != nil {
			data["verify_token_set"] = app.Changed(was.VerifyTokenSet, now.VerifyTokenSet)
		}
		if err := au.Record("whatsapp_sender.updated", "whatsapp_sender", now.ID, sn.ProjectID, data); err != nil {
			return Sender{}, err
		}
		s.forgetTemplates(old.ID)
		return now, nil
	})
}

// DeleteSender disconnects a number (whatsapp_sender.deleted): webhooks for it are refused
// from then on; its conversations stay.
func (s *Service) DeleteSender(ctx context.Context, act app.Actor, id string) (SenderDeleted, error) {
	return app.Change(ctx, s.Store, act, func(tx *store.Tx, au *app.Audit) (SenderDeleted, error) {
		old, err := tx.WhatsAppSenders().Get(ctx, act.Scope, store.WhatsAppSenderID(id))
		if err != nil {
			return SenderDeleted{}, app.NotFound(err, fault.CodeWhatsAppSenderNotFound, "messaging-app number", id)
		}
		if err := app.WritableProject(ctx, tx.Queries, act, old.ProjectID); err != nil {
			return SenderDeleted{}, err
		}
		if _, err := tx.WhatsAppSenders().Delete(ctx, act.Scope, old.ID); err != nil {
			return SenderDeleted{}, err
		}
		if s.Secrets != nil {
			old.AccessTokenSecretID, old.AppSecretSecretID = "", ""
			if err := s.Secrets.Link(ctx, tx, act, old); err != nil { // uses nothing any more
				return SenderDeleted{}, err
			}
		}
		if err := au.Record("whatsapp_sender.deleted", "whatsapp_sender", string(old.ID), old.ProjectID, map[string]any{"phone_number_id": old.PhoneNumberID}); err != nil {
			return SenderDeleted{}, err
		}
		return SenderDeleted{Object: "whatsapp_sender", ID: string(old.ID), Deleted: true}, nil
	})
}

// token resolves a sender's access token, or answers 409 when the connection has none.
func (s *Service) token(ctx context.Context, sn store.WhatsAppSender) (string, error) {
	if sn.AccessTokenSecretID == "" {
		return "", fault.E(fault.CodeWhatsAppNotConnected, "The number %s has no access token: set access_token_secret_id.", sn.PhoneNumberID)
	}
	t, err := s.Secrets.Resolve(ctx, sn.OrgID, sn.ProjectID, sn.AccessTokenSecretID)
	if errors.Is(err, ErrSecretNotFound) {
		return "", fault.E(fault.CodeWhatsAppNotConnected, "The access token's vault secret of number %s is gone: set access_token_secret_id again.", sn.PhoneNumberID)
	}
	return t, err
}
