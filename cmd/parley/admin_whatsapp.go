package main

// issue 19: `parley admin whatsapp`: the operator connects, lists, changes and disconnects the
// messaging-app numbers of projects. The access token and the app secret are vault secrets of
// the project, named by id (parley admin cannot create them: use POST /v1/vault/secrets); the
// verify token is read from an environment variable, never a flag (flags
// show in process lists), and never printed.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/vault"
	"github.com/parley-voice/parley/control/app/whatsapp"
	"github.com/parley-voice/parley/control/store"
)

func whatsappCommand() *command {
	return &command{name: "whatsapp", short: "messaging-app (WhatsApp Cloud API) numbers", subs: []*command{
		{name: "add", short: "connect a number (--project, --phone-number-id, [--agent, --business-account, --display, --token-secret, --app-secret-secret, --verify-token-env])", run: adminLeaf(whatsappAdd)},
		{name: "list", short: "list numbers (--org or --project)", run: adminLeaf(whatsappList)},
		{name: "update", short: "change a number (ID [--agent, --business-account, --display, --token-secret, --app-secret-secret, --verify-token-env]; \"\" clears)", run: adminLeaf(whatsappUpdate)},
		{name: "remove", short: "disconnect a number (ID)", run: adminLeaf(whatsappRemove)},
	}}
}

// senderFlags are the flags add and update share; set reports which were given.
type senderFlags struct {
	agent, waba, display, token, app, verifyEnv *string
	fs                                          *flag.FlagSet
}

func newSenderFlags(fs *flag.FlagSet) senderFlags {
	return senderFlags{fs: fs,
		agent:     fs.String("agent", "", "the agent that answers (an agent of the project)"),
		waba:      fs.String("business-account", "", "the WhatsApp Business Account id"),
		display:   fs.String("display", "", "the number as people see it"),
		token:     fs.String("token-secret", "", "the vault secret id holding the access token"),
		app:       fs.String("app-secret-secret", "", "the vault secret id holding the app secret"),
		verifyEnv: fs.String("verify-token-env", "", "the environment variable holding the webhook verify token"),
	}
}

func (f senderFlags) set(name string) bool {
	found := false
	f.fs.Visit(func(fl *flag.Flag) { found = found || fl.Name == name })
	return found
}

func (f senderFlags) verifyToken() (string, error) {
	if *f.verifyEnv == "" {
		return "", nil
	}
	v, ok := os.LookupEnv(*f.verifyEnv)
	if !ok {
		return "", usageError{"--verify-token-env: " + *f.verifyEnv + " is not set"}
	}
	return v, nil
}

func senderError(err error, agent string) error {
	if f := cliError(err); f != err {
		return f // a secret the project's vault does not hold
	}
	switch {
	case errors.Is(err, store.ErrConflict):
		return errors.New("this phone-number id is connected already")
	case errors.Is(err, store.ErrOtherProject):
		return fmt.Errorf("agent %s is in another project", agent)
	case errors.Is(err, store.ErrInvalid):
		return usageError{err.Error()}
	}
	return err
}

// linkSecrets records in tx which vault secrets the sender uses (none once deleted).
func linkSecrets(a *adminCtx, tx *store.Tx, s store.WhatsAppSender) error {
	org, err := tx.GetOrg(a.ctx, s.OrgID)
	if err != nil {
		return err
	}
	name := s.DisplayNumber
	if name == "" {
		name = s.PhoneNumberID
	}
	return vault.Link(a.ctx, tx, app.OperatorActor(org, operatorName), s.ProjectID, store.SecretUse{Type: "whatsapp_sender", ID: string(s.ID), Name: name},
		s.AccessTokenSecretID, s.AppSecretSecretID)
}

func printSender(a *adminCtx, verb string, s store.WhatsAppSender) error {
	v := whatsapp.ViewSender(s)
	return a.print(v, func(w io.Writer) {
		fmt.Fprintf(w, "%s %s (phone-number id %s) in project %s, agent %s, connected %v\n", verb, v.ID, v.PhoneNumberID, v.ProjectID, dash(v.AgentID), v.Connected)
	})
}

func whatsappAdd(fs *flag.FlagSet) func(a *adminCtx) error {
	project := fs.String("project", "", "project id (required)")
	phoneID := fs.String("phone-number-id", "", "Meta's phone-number id (required)")
	f := newSenderFlags(fs)
	return func(a *adminCtx) error {
		if *project == "" || *phoneID == "" {
			return usageError{"--project and --phone-number-id are required"}
		}
		verify, err := f.verifyToken()
		if err != nil {
			return err
		}
		p, err := a.st.GetProject(a.ctx, store.ProjectID(*project))
		if err != nil {
			return fmt.Errorf("project %s: %w", *project, err)
		}
		var s store.WhatsAppSender
		err = a.st.Tx(a.ctx, func(tx *store.Tx) error {
			s, err = tx.WhatsAppSenders().Create(a.ctx, store.OrgScope(p.OrgID), store.NewWhatsAppSender{OrgID: p.OrgID, ProjectID: p.ID,
				AgentID: store.AgentID(*f.agent), PhoneNumberID: *phoneID, BusinessAccountID: *f.waba, DisplayNumber: *f.display,
				AccessTokenSecretID: *f.token, AppSecretSecretID: *f.app, VerifyToken: verify})
			if err != nil {
				return err
			}
			if err := linkSecrets(a, tx, s); err != nil {
				return err
			}
			return tx.InsertAudit(a.ctx, operatorEvent(p.OrgID, p.ID, "whatsapp_sender.created", "whatsapp_sender", string(s.ID),
				map[string]any{"phone_number_id": s.PhoneNumberID, "agent_id": string(s.AgentID), "business_account_id": s.BusinessAccountID,
					"access_token_secret_id": s.AccessTokenSecretID, "app_secret_secret_id": s.AppSecretSecretID, "verify_token_set": s.VerifyToken != ""}))
		})
		if err != nil {
			return senderError(err, *f.agent)
		}
		return printSender(a, "connected", s)
	}
}

func whatsappList(fs *flag.FlagSet) func(a *adminCtx) error {
	org := fs.String("org", "", "organization id")
	project := fs.String("project", "", "project id")
	return func(a *adminCtx) error {
		if (*org == "") == (*project == "") {
			return usageError{"give --org or --project"}
		}
		sc := store.OrgScope(store.OrgID(*org))
		if *project != "" {
			p, err := a.st.GetProject(a.ctx, store.ProjectID(*project))
			if err != nil {
				return fmt.Errorf("project %s: %w", *project, err)
			}
			sc = store.OrgScope(p.OrgID).Narrow(p.ID)
		}
		out := []whatsapp.Sender{}
		pg := store.Page{Limit: 100}
		for {
			ss, err := a.st.WhatsAppSenders().List(a.ctx, sc, pg)
			if err != nil {
				return err
			}
			more := len(ss) > pg.Limit
			if more {
				ss = ss[:pg.Limit]
			}
			for _, s := range ss {
				out = append(out, whatsapp.ViewSender(s))
			}
			if !more {
				break
			}
			pg.After = string(ss[len(ss)-1].ID)
		}
		return a.print(out, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tPHONE NUMBER ID\tDISPLAY\tPROJECT\tAGENT\tCONNECTED")
			for _, s := range out {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%v\n", s.ID, s.PhoneNumberID, s.DisplayNumber, s.ProjectID, dash(s.AgentID), s.Connected)
			}
		})
	}
}

// findSender loads a sender by id, whatever its organization (the operator's reach).
func findSender(a *adminCtx) (store.WhatsAppSender, error) {
	raw, err := a.oneArg("sender id")
	if err != nil {
		return store.WhatsAppSender{}, err
	}
	s, err := a.st.WhatsAppSenderByID(a.ctx, store.WhatsAppSenderID(raw))
	if errors.Is(err, store.ErrNotFound) {
		return s, fmt.Errorf("no messaging-app number %s", raw)
	}
	return s, err
}

func whatsappUpdate(fs *flag.FlagSet) func(a *adminCtx) error {
	f := newSenderFlags(fs)
	return func(a *adminCtx) error {
		s, err := findSender(a)
		if err != nil {
			return err
		}
		var ch store.WhatsAppSenderChange
		data := map[string]any{"phone_number_id": s.PhoneNumberID}
		if f.set("agent") {
			agent := store.AgentID(*f.agent)
			ch.AgentID, data["agent_id"] = &agent, *f.agent
		}
		for name, dst := range map[string]**string{"business-account": &ch.BusinessAccountID, "display": &ch.DisplayNumber,
			"token-secret": &ch.AccessTokenSecretID, "app-secret-secret": &ch.AppSecretSecretID} {
			if f.set(name) {
				v := *map[string]*string{"business-account": f.waba, "display": f.display, "token-secret": f.token, "app-secret-secret": f.app}[name]
				*dst, data[name] = &v, v
			}
		}
		if f.set("verify-token-env") {
			v, err := f.verifyToken()
			if err != nil {
				return err
			}
			ch.VerifyToken, data["verify_token_set"] = &v, v != ""
		}
		err = a.st.Tx(a.ctx, func(tx *store.Tx) error {
			if s, err = tx.WhatsAppSenders().Change(a.ctx, store.OrgScope(s.OrgID), s.ID, ch); err != nil {
				return err
			}
			if err := linkSecrets(a, tx, s); err != nil {
				return err
			}
			return tx.InsertAudit(a.ctx, operatorEvent(s.OrgID, s.ProjectID, "whatsapp_sender.updated", "whatsapp_sender", string(s.ID), data))
		})
		if err != nil {
			return senderError(err, *f.agent)
		}
		return printSender(a, "updated", s)
	}
}

func whatsappRemove(fs *flag.FlagSet) func(a *adminCtx) error {
	return func(a *adminCtx) error {
		s, err := findSender(a)
		if err != nil {
			return err
		}
		err = a.st.Tx(a.ctx, func(tx *store.Tx) error {
			if _, err := tx.WhatsAppSenders().Delete(a.ctx, store.OrgScope(s.OrgID), s.ID); err != nil {
				return err
			}
			gone := s
			gone.AccessTokenSecretID, gone.AppSecretSecretID = "", ""
			if err := linkSecrets(a, tx, gone); err != nil {
				return err
			}
			return tx.InsertAudit(a.ctx, operatorEvent(s.OrgID, s.ProjectID, "whatsapp_sender.deleted", "whatsapp_sender", string(s.ID),
				map[string]any{"phone_number_id": s.PhoneNumberID}))
		})
		if err != nil {
			return err
		}
		return a.print(map[string]any{"id": s.ID, "deleted": true}, func(w io.Writer) { fmt.Fprintf(w, "disconnected %s\n", s.ID) })
	}
}
