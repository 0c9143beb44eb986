package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/agents"
	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
)

// numbersCommand is `parley admin numbers`: phone numbers come from the operator; the API
// assigns them to agents.
func numbersCommand() *command {
	return &command{name: "numbers", short: "phone numbers", subs: []*command{
		{name: "add", short: "add a number to a project (--project, --number +E164, [--trunk, --agent, --label])", run: adminLeaf(numbersAdd)},
		{name: "list", short: "list numbers (--org or --project)", run: adminLeaf(numbersList)},
	}}
}

// agentsCommand is `parley admin agents`.
func agentsCommand() *command {
	return &command{name: "agents", short: "agents", subs: []*command{
		{name: "create", short: "create an agent from a definition file (--project, --file, [--name], [--publish])", run: adminLeaf(agentsCreate)},
		{name: "restore", short: "restore a deleted agent before it is purged (ID [--name])", run: adminLeaf(agentsRestore)},
	}}
}

// numberJSON is the admin view of a phone number.
type numberJSON struct {
	ID        string    `json:"id"`
	OrgID     string    `json:"organization_id"`
	ProjectID string    `json:"project_id"`
	Number    string    `json:"number"`
	Trunk     *string   `json:"trunk"`
	AgentID   *string   `json:"agent_id"`
	Label     string    `json:"label"`
	CreatedAt time.Time `json:"created_at"`
}

func toNumberJSON(n store.PhoneNumber) numberJSON {
	j := numberJSON{ID: string(n.ID), OrgID: string(n.OrgID), ProjectID: string(n.ProjectID), Number: n.Number, Label: n.Label, CreatedAt: n.CreatedAt.UTC()}
	if n.Trunk != "" {
		s := n.Trunk
		j.Trunk = &s
	}
	if n.AgentID != "" {
		s := string(n.AgentID)
		j.AgentID = &s
	}
	return j
}

func dash(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// operatorEvent is an audit event done by the operator from the command line, with the fields
// it set or changed (never a secret's value).
func operatorEvent(org store.OrgID, project store.ProjectID, action, objectType, objectID string, data map[string]any) store.AuditEvent {
	raw, _ := json.Marshal(data) // maps of plain values always marshal
	if data == nil {
		raw = nil
	}
	return store.AuditEvent{OrgID: org, ProjectID: project, ActorType: store.ActorOperator, ActorID: operatorName,
		Action: action, ObjectType: objectType, ObjectID: objectID, Data: raw}
}

// operatorName names the operator in the audit log.
const operatorName = "parley admin"

func numbersAdd(fs *flag.FlagSet) func(a *adminCtx) error {
	project := fs.String("project", "", "project id (required)")
	number := fs.String("number", "", "the number in E.164 form, such as +14155550100 (required)")
	trunk := fs.String("trunk", "", "the SIP trunk the number is reached through, by name")
	agent := fs.String("agent", "", "an agent of the project to assign it to")
	label := fs.String("label", "", "a label for the number")
	return func(a *adminCtx) error {
		if *project == "" || *number == "" {
			return usageError{"--project and --number are required"}
		}
		if !store.ValidE164(*number) {
			return usageError{fmt.Sprintf("--number %q is not in E.164 form (+, country code, number; at most 15 digits)", *number)}
		}
		pid, err := store.ParseID[store.ProjectID](*project)
		if err != nil {
			return usageError{"--project: " + err.Error()}
		}
		var aid store.AgentID
		if *agent != "" {
			if aid, err = store.ParseID[store.AgentID](*agent); err != nil {
				return usageError{"--agent: " + err.Error()}
			}
		}
		var n store.PhoneNumber
		err = a.st.Tx(a.ctx, func(tx *store.Tx) error {
			p, err := tx.GetProject(a.ctx, pid)
			if err != nil {
				return fmt.Errorf("project %s: %w", pid, err)
			}
			if n, err = tx.CreatePhoneNumber(a.ctx, store.NewPhoneNumber{OrgID: p.OrgID, ProjectID: p.ID, Number: *number, Trunk: *trunk, AgentID: aid, Label: *label}); err != nil {
				return err
			}
			return tx.InsertAudit(a.ctx, operatorEvent(p.OrgID, p.ID, "phone_number.created", "phone_number", string(n.ID),
				map[string]any{"number": n.Number, "trunk": n.Trunk, "agent_id": string(n.AgentID), "label": n.Label}))
		})
		switch {
		case errors.Is(err, store.ErrConflict):
			return fmt.Errorf("number %s is already added", *number)
		case errors.Is(err, store.ErrOtherProject):
			return fmt.Errorf("agent %s is in another project", aid)
		case err != nil:
			return err
		}
		j := toNumberJSON(n)
		return a.print(j, func(w io.Writer) { fmt.Fprintf(w, "added %s (%s) to project %s\n", j.Number, j.ID, j.ProjectID) })
	}
}

func numbersList(fs *flag.FlagSet) func(a *adminCtx) error {
	org := fs.String("org", "", "organization id")
	project := fs.String("project", "", "project id")
	return func(a *adminCtx) error {
		if (*org == "") == (*project == "") {
			return usageError{"give --org or --project"}
		}
		sc := store.OrgScope(store.OrgID(*org))
		var f store.PhoneNumberFilter
		if *project != "" {
			p, err := a.st.GetProject(a.ctx, store.ProjectID(*project))
			if err != nil {
				return fmt.Errorf("project %s: %w", *project, err)
			}
			sc, f.ProjectID = store.OrgScope(p.OrgID), p.ID
		}
		out := []numberJSON{}
		pg := store.Page{Limit: 1000}
		for {
			ns, err := a.st.Numbers().List(a.ctx, sc, f, pg)
			if err != nil {
				return err
			}
			more := len(ns) > pg.Limit
			if more {
				ns = ns[:pg.Limit]
			}
			for _, n := range ns {
				out = append(out, toNumberJSON(n))
			}
			if !more {
				break
			}
			pg.After = string(ns[len(ns)-1].ID)
		}
		return a.print(out, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tNUMBER\tPROJECT\tAGENT\tTRUNK\tLABEL")
			for _, n := range out {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.Number, n.ProjectID, dash(n.AgentID), dash(n.Trunk), n.Label)
			}
		})
	}
}

func agentsRestore(fs *flag.FlagSet) func(a *adminCtx) error {
	name := fs.String("name", "", "a new name, when another agent took the old one meanwhile")
	return func(a *adminCtx) error {
		raw, err := a.oneArg("agent id")
		if err != nil {
			return err
		}
		id, err := store.ParseID[store.AgentID](raw)
		if err != nil {
			return usageError{err.Error()}
		}
		ag, err := (&agents.Service{Store: a.st}).Restore(a.ctx, operatorName, id, *name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("agent %s is not deleted, or was purged already", id)
		case errors.Is(err, store.ErrConflict):
			return fmt.Errorf("another agent of the project has its name now; restore it with --name")
		case err != nil:
			return err
		}
		res := map[string]any{"id": ag.ID, "name": ag.Name, "status": ag.Status, "project_id": ag.ProjectID}
		return a.print(res, func(w io.Writer) { fmt.Fprintf(w, "restored agent %s (%s) as %s\n", ag.ID, ag.Name, ag.Status) })
	}
}

// agentsCreate makes an agent from a definition document (docs/agent-definition.md), through
// the same domain function as POST /v1/agents, and publishes it when asked.
func agentsCreate(fs *flag.FlagSet) func(a *adminCtx) error {
	project := fs.String("project", "", "the project's id (required)")
	file := fs.String("file", "", "the definition document, JSON (required; - reads standard input)")
	name := fs.String("name", "", "the agent's name (default: the definition's, made unique in the project)")
	publish := fs.Bool("publish", false, "publish it as version 1 at once")
	return func(a *adminCtx) error {
		if *project == "" || *file == "" {
			return usageError{"give --project and --file"}
		}
		var raw []byte
		var err error
		if *file == "-" {
			raw, err = io.ReadAll(os.Stdin)
		} else {
			raw, err = os.ReadFile(*file)
		}
		if err != nil {
			return fmt.Errorf("read the definition: %w", err)
		}
		p, err := a.st.GetProject(a.ctx, store.ProjectID(*project))
		if err != nil {
			return fmt.Errorf("project %s: %w", *project, err)
		}
		org, err := a.st.GetOrg(a.ctx, p.OrgID)
		if err != nil {
			return err
		}
		act := app.OperatorActor(org, operatorName)
		svc := &agents.Service{Store: a.st}
		in := agents.AgentCreate{ProjectID: string(p.ID), Definition: agents.DefinitionInput(raw)}
		if *name != "" {
			n := agents.Name(*name)
			in.Name = &n
		}
		ag, err := svc.Create(a.ctx, act, in)
		if err != nil {
			return cliError(err)
		}
		status := ag.Status
		if *publish {
			if _, err := svc.Publish(a.ctx, act, ag.ID, agents.AgentPublishRequest{Note: "published by parley admin agents create"}); err != nil {
				return cliError(err)
			}
			status = "published"
		}
		res := map[string]any{"id": ag.ID, "name": ag.Name, "project_id": ag.ProjectID, "kind": ag.Kind, "direction": ag.Direction, "status": status}
		return a.print(res, func(w io.Writer) {
			fmt.Fprintf(w, "created agent %s (%s) in project %s, %s\n", ag.ID, ag.Name, ag.ProjectID, status)
		})
	}
}

// cliError is a classified error as one line for the operator: its detail and, for a
// definition that does not fit, each place.
func cliError(err error) error {
	var fe *fault.Error
	if !errors.As(err, &fe) {
		return err
	}
	msg := fe.Detail
	for _, e := range fe.Errors {
		if !strings.Contains(msg, e.Detail) {
			msg += "; " + e.Pointer + ": " + e.Detail
		}
	}
	return errors.New(msg + " (" + fe.Code + ")")
}
