package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/control/api"
	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/billing"
	"github.com/parley-voice/parley/control/config"
	"github.com/parley-voice/parley/control/store"
)

// adminCommand is the operator's tool tree. Each leaf opens the same store a server uses
// (SQLite or PostgreSQL, from the same settings) and prints text or, with --json, JSON.
// Later issues add trunks, numbers and agents as more subtrees here.
func adminCommand() *command {
	return &command{name: "admin", short: "operator tools: orgs, projects, keys, credit", subs: []*command{
		{name: "bootstrap", short: "ensure the Default organization and project; mint a live and a test key", run: adminLeaf(adminBootstrap)},
		{name: "orgs", short: "organizations", subs: []*command{
			{name: "create", short: "create an organization (--name)", run: adminLeaf(orgsCreate)},
			{name: "list", short: "list organizations", run: adminLeaf(orgsList)},
			{name: "freeze", short: "freeze an organization: changes answer 403", run: adminLeaf(orgsFreeze(true))},
			{name: "unfreeze", short: "unfreeze an organization", run: adminLeaf(orgsFreeze(false))},
			{name: "transfer-allow", short: "show or set the non-public networks the organization's calls may be transferred to (--allow, --clear)", run: adminLeaf(orgsTransferAllow)},
		}},
		{name: "projects", short: "projects", subs: []*command{
			{name: "create", short: "create a project (--org, --name)", run: adminLeaf(projectsCreate)},
			{name: "list", short: "list the projects of an organization (--org)", run: adminLeaf(projectsList)},
			{name: "freeze", short: "freeze a project: changes answer 409", run: adminLeaf(projectsFreeze(true))},
			{name: "unfreeze", short: "unfreeze a project", run: adminLeaf(projectsFreeze(false))},
		}},
		{name: "keys", short: "API keys", subs: []*command{
			{name: "create", short: "create a key (--org, --project…|--all-projects, --test, --scopes, --expires-in)", run: adminLeaf(keysCreate)},
			{name: "list", short: "list the keys of an organization (--org)", run: adminLeaf(keysList)},
			{name: "revoke", short: "revoke a key by id; it answers 401 at once", run: adminLeaf(keysRevoke)},
		}},
		numbersCommand(),
		trunksCommand(),
		masterKeyCommand(), // issue 17
		agentsCommand(),
		whatsappCommand(), // issue 19
		jobsCommand(),
		{name: "credit", short: "organization credit", subs: []*command{
			{name: "add", short: "add credit (--org, --amount in USD, may be negative; --adjustment)", run: adminLeaf(creditAdd)},
		}},
	}}
}

// adminCtx is what every admin leaf gets: its flags parsed, the store open, and the output.
type adminCtx struct {
	ctx    context.Context
	st     *store.Store
	out    io.Writer
	json   bool
	args   []string
	flags  *flag.FlagSet
	config *config.Config
}

// leafFunc declares its own flags (on declare) and then runs with them parsed.
type leafFunc func(fs *flag.FlagSet) func(a *adminCtx) error

func adminLeaf(f leafFunc) func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		var asJSON bool
		var body func(a *adminCtx) error
		var fs *flag.FlagSet
		cfg, rest, err := config.Parse(commandPath(ctx, "parley admin"), config.ScopeStore, args, nil, stdout, func(set *flag.FlagSet) {
			fs = set
			set.BoolVar(&asJSON, "json", false, "print JSON")
			body = f(set)
		})
		if err != nil {
			return err
		}
		log := cfg.NewLogger(stderr)
		st, err := control.OpenStore(ctx, cfg, log)
		if err != nil {
			return err
		}
		defer st.Close()
		if _, err := st.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate store: %w", err)
		}
		return body(&adminCtx{ctx: ctx, st: st, out: stdout, json: asJSON, args: rest, flags: fs, config: cfg})
	}
}

func (a *adminCtx) print(v any, text func(w io.Writer)) error {
	if a.json {
		enc := json.NewEncoder(a.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	text(tw)
	return tw.Flush()
}

func (a *adminCtx) oneArg(what string) (string, error) {
	if len(a.args) != 1 {
		return "", usageError{fmt.Sprintf("want exactly one %s", what)}
	}
	return a.args[0], nil
}

func adminBootstrap(fs *flag.FlagSet) func(a *adminCtx) error {
	return func(a *adminCtx) error {
		res, err := control.Bootstrap(a.ctx, a.st)
		if err != nil {
			return err
		}
		return a.print(res, func(w io.Writer) {
			fmt.Fprintf(w, "organization\t%s\nproject\t%s\nlive key\t%s\ntest key\t%s\n", res.OrganizationID, res.ProjectID, res.LiveKey, res.TestKey)
		})
	}
}

// orgJSON is the admin view of an organization.
type orgJSON struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Frozen       bool      `json:"frozen"`
	CreditMicros int64     `json:"credit_micros"`
	CreditUSD    string    `json:"credit_usd"`
	CreatedAt    time.Time `json:"created_at"`
}

func toOrgJSON(o store.Org) orgJSON {
	return orgJSON{ID: string(o.ID), Name: o.Name, Frozen: o.Frozen, CreditMicros: o.CreditMicros,
		CreditUSD: billing.FormatUSD(o.CreditMicros), CreatedAt: o.CreatedAt.UTC()}
}

func orgsCreate(fs *flag.FlagSet) func(a *adminCtx) error {
	name := fs.String("name", "", "organization name (required)")
	return func(a *adminCtx) error {
		if strings.TrimSpace(*name) == "" {
			return usageError{"--name is required"}
		}
		var o store.Org
		err := a.st.Tx(a.ctx, func(tx *store.Tx) (err error) {
			if o, err = tx.CreateOrg(a.ctx, *name); err != nil {
				return err
			}
			return tx.InsertAudit(a.ctx, operatorEvent(o.ID, "", "organization.created", "organization", string(o.ID), map[string]any{"name": o.Name}))
		})
		if err != nil {
			return err
		}
		j := toOrgJSON(o)
		return a.print(j, func(w io.Writer) { fmt.Fprintf(w, "created organization %s (%s)\n", j.ID, j.Name) })
	}
}

func orgsList(fs *flag.FlagSet) func(a *adminCtx) error {
	return func(a *adminCtx) error {
		orgs, err := a.st.ListOrgs(a.ctx)
		if err != nil {
			return err
		}
		out := make([]orgJSON, 0, len(orgs))
		for _, o := range orgs {
			out = append(out, toOrgJSON(o))
		}
		return a.print(out, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tNAME\tFROZEN\tCREDIT (USD)\tCREATED")
			for _, o := range out {
				fmt.Fprintf(w, "%s\t%s\t%v\t%s\t%s\n", o.ID, o.Name, o.Frozen, o.CreditUSD, o.CreatedAt.Format(time.RFC3339))
			}
		})
	}
}

func orgsFreeze(frozen bool) leafFunc {
	return func(fs *flag.FlagSet) func(a *adminCtx) error {
		return func(a *adminCtx) error {
			id, err := a.oneArg("organization id")
			if err != nil {
				return err
			}
			var o store.Org
			err = a.st.Tx(a.ctx, func(tx *store.Tx) error {
				was, err := tx.GetOrg(a.ctx, store.OrgID(id))
				if err != nil {
					return err
				}
				if err := tx.SetOrgFrozen(a.ctx, was.ID, frozen); err != nil {
					return err
				}
				if o, err = tx.GetOrg(a.ctx, was.ID); err != nil {
					return err
				}
				return tx.InsertAudit(a.ctx, operatorEvent(o.ID, "", "organization."+frozenAction(frozen), "organization", string(o.ID),
					map[string]any{"frozen": app.Changed(was.Frozen, o.Frozen)}))
			})
			if err != nil {
				return err
			}
			j := toOrgJSON(o)
			return a.print(j, func(w io.Writer) { fmt.Fprintf(w, "organization %s frozen=%v\n", j.ID, j.Frozen) })
		}
	}
}

type projectJSON struct {
	ID        string    `json:"id"`
	OrgID     string    `json:"organization_id"`
	Name      string    `json:"name"`
	Frozen    bool      `json:"frozen"`
	CreatedAt time.Time `json:"created_at"`
}

func toProjectJSON(p store.Project) projectJSON {
	return projectJSON{ID: string(p.ID), OrgID: string(p.OrgID), Name: p.Name, Frozen: p.Frozen, CreatedAt: p.CreatedAt.UTC()}
}

func projectsCreate(fs *flag.FlagSet) func(a *adminCtx) error {
	org := fs.String("org", "", "organization id (required)")
	name := fs.String("name", "", "project name (required)")
	return func(a *adminCtx) error {
		if *org == "" || strings.TrimSpace(*name) == "" {
			return usageError{"--org and --name are required"}
		}
		var p store.Project
		err := a.st.Tx(a.ctx, func(tx *store.Tx) (err error) {
			if p, err = tx.CreateProject(a.ctx, store.OrgID(*org), *name); err != nil {
				return err
			}
			return tx.InsertAudit(a.ctx, operatorEvent(p.OrgID, p.ID, "project.created", "project", string(p.ID), map[string]any{"name": p.Name}))
		})
		if err != nil {
			return err
		}
		j := toProjectJSON(p)
		return a.print(j, func(w io.Writer) { fmt.Fprintf(w, "created project %s (%s)\n", j.ID, j.Name) })
	}
}

func projectsList(fs *flag.FlagSet) func(a *adminCtx) error {
	org := fs.String("org", "", "organization id (required)")
	return func(a *adminCtx) error {
		if *org == "" {
			return usageError{"--org is required"}
		}
		ps, err := a.st.ListProjects(a.ctx, store.OrgID(*org))
		if err != nil {
			return err
		}
		out := make([]projectJSON, 0, len(ps))
		for _, p := range ps {
			out = append(out, toProjectJSON(p))
		}
		return a.print(out, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tNAME\tFROZEN\tCREATED")
			for _, p := range out {
				fmt.Fprintf(w, "%s\t%s\t%v\t%s\n", p.ID, p.Name, p.Frozen, p.CreatedAt.Format(time.RFC3339))
			}
		})
	}
}

func projectsFreeze(frozen bool) leafFunc {
	return func(fs *flag.FlagSet) func(a *adminCtx) error {
		return func(a *adminCtx) error {
			id, err := a.oneArg("project id")
			if err != nil {
				return err
			}
			var p store.Project
			err = a.st.Tx(a.ctx, func(tx *store.Tx) error {
				was, err := tx.GetProject(a.ctx, store.ProjectID(id))
				if err != nil {
					return err
				}
				if err := tx.SetProjectFrozen(a.ctx, was.ID, frozen); err != nil {
					return err
				}
				if p, err = tx.GetProject(a.ctx, was.ID); err != nil {
					return err
				}
				return tx.InsertAudit(a.ctx, operatorEvent(p.OrgID, p.ID, "project."+frozenAction(frozen), "project", string(p.ID),
					map[string]any{"frozen": app.Changed(was.Frozen, p.Frozen)}))
			})
			if err != nil {
				return err
			}
			j := toProjectJSON(p)
			return a.print(j, func(w io.Writer) { fmt.Fprintf(w, "project %s frozen=%v\n", j.ID, j.Frozen) })
		}
	}
}

type keyJSON struct {
	ID          string     `json:"id"`
	OrgID       string     `json:"organization_id"`
	Name        string     `json:"name"`
	Mode        string     `json:"mode"`
	Prefix      string     `json:"prefix"`
	Scopes      []string   `json:"scopes"`
	AllProjects bool       `json:"all_projects"`
	ProjectIDs  []string   `json:"project_ids"`
	ExpiresAt   *time.Time `json:"expires_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
	CreatedAt   time.Time  `json:"created_at"`
	Secret      string     `json:"secret,omitempty"`
}

func toKeyJSON(k store.Key) keyJSON {
	mode := string(k.Mode)
	pids := []string{}
	for _, p := range k.ProjectIDs {
		pids = append(pids, string(p))
	}
	return keyJSON{ID: string(k.ID), OrgID: string(k.OrgID), Name: k.Name, Mode: mode, Prefix: k.Prefix,
		Scopes: k.Scopes, AllProjects: k.AllProjects, ProjectIDs: pids, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, CreatedAt: k.CreatedAt.UTC()}
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func keysCreate(fs *flag.FlagSet) func(a *adminCtx) error {
	org := fs.String("org", "", "organization id (required)")
	var projects stringList
	fs.Var(&projects, "project", "project id the key reaches (repeatable)")
	all := fs.Bool("all-projects", false, "the key reaches every project of the organization")
	test := fs.Bool("test", false, "make a test key (sk_test_…) instead of a live key")
	scopes := fs.String("scopes", "", "comma-separated permissions (default: every permission)")
	expires := fs.Duration("expires-in", 0, "lifetime, such as 720h (default: no expiry)")
	name := fs.String("name", "admin key", "a label for the key")
	return func(a *adminCtx) error {
		if *org == "" {
			return usageError{"--org is required"}
		}
		if *all == (len(projects) > 0) {
			return usageError{"give either --all-projects or at least one --project"}
		}
		sc, err := api.ParseScopes(*scopes)
		if err != nil {
			return usageError{err.Error()}
		}
		if *expires < 0 {
			return usageError{"--expires-in must be positive"}
		}
		nk := store.NewKey{OrgID: store.OrgID(*org), Name: *name, Test: *test, Scopes: sc, AllProjects: *all}
		for _, p := range projects {
			pr, err := a.st.GetProject(a.ctx, store.ProjectID(p))
			if err != nil {
				return fmt.Errorf("project %s: %w", p, err)
			}
			if pr.OrgID != nk.OrgID {
				return fmt.Errorf("project %s belongs to another organization", p)
			}
			nk.ProjectIDs = append(nk.ProjectIDs, pr.ID)
		}
		if *expires > 0 {
			t := time.Now().Add(*expires).UTC()
			nk.ExpiresAt = &t
		}
		var (
			k      store.Key
			secret string
		)
		err = a.st.Tx(a.ctx, func(tx *store.Tx) (err error) {
			if k, secret, err = tx.CreateKey(a.ctx, nk); err != nil {
				return err
			}
			j := toKeyJSON(k) // the secret is never recorded
			return tx.InsertAudit(a.ctx, operatorEvent(k.OrgID, "", "api_key.created", "api_key", string(k.ID), map[string]any{
				"name": j.Name, "mode": j.Mode, "prefix": j.Prefix, "scopes": j.Scopes, "all_projects": j.AllProjects,
				"project_ids": j.ProjectIDs, "expires_at": j.ExpiresAt}))
		})
		if err != nil {
			return err
		}
		j := toKeyJSON(k)
		j.Secret = secret
		return a.print(j, func(w io.Writer) {
			fmt.Fprintf(w, "created %s key %s\nsecret\t%s\n(the secret is shown only now)\n", j.Mode, j.ID, secret)
		})
	}
}

func keysList(fs *flag.FlagSet) func(a *adminCtx) error {
	org := fs.String("org", "", "organization id (required)")
	return func(a *adminCtx) error {
		if *org == "" {
			return usageError{"--org is required"}
		}
		ks, err := a.st.ListKeys(a.ctx, store.OrgID(*org))
		if err != nil {
			return err
		}
		out := make([]keyJSON, 0, len(ks))
		for _, k := range ks {
			out = append(out, toKeyJSON(k))
		}
		return a.print(out, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tPREFIX\tMODE\tNAME\tREACH\tEXPIRES\tREVOKED")
			for _, k := range out {
				reach := "all projects"
				if !k.AllProjects {
					reach = strings.Join(k.ProjectIDs, ",")
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Mode, k.Name, reach, fmtTime(k.ExpiresAt), fmtTime(k.RevokedAt))
			}
		})
	}
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func keysRevoke(fs *flag.FlagSet) func(a *adminCtx) error {
	flagID := fs.String("id", "", "the key's id (or give it as the argument)")
	return func(a *adminCtx) error {
		id := *flagID
		if id == "" {
			var err error
			if id, err = a.oneArg("key id (or --id)"); err != nil {
				return err
			}
		} else if len(a.args) > 0 {
			return usageError{"give the key id once: as --id or as the argument"}
		}
		err := a.st.Tx(a.ctx, func(tx *store.Tx) error {
			k, err := tx.GetKey(a.ctx, store.KeyID(id))
			if err != nil {
				return err
			}
			if err := tx.RevokeKey(a.ctx, k.ID); err != nil {
				return err
			}
			return tx.InsertAudit(a.ctx, operatorEvent(k.OrgID, "", "api_key.revoked", "api_key", string(k.ID),
				map[string]any{"name": k.Name, "prefix": k.Prefix, "mode": k.Mode}))
		})
		if err != nil {
			return err
		}
		res := map[string]any{"id": id, "revoked": true}
		return a.print(res, func(w io.Writer) { fmt.Fprintf(w, "revoked key %s\n", id) })
	}
}

func creditAdd(fs *flag.FlagSet) func(a *adminCtx) error {
	org := fs.String("org", "", "organization id (required)")
	amount := fs.String("amount", "", "amount in USD, such as 25 or 12.50 (negative to remove)")
	reason := fs.String("reason", "operator credit", "why, kept with the transaction")
	adjust := fs.Bool("adjustment", false, "record an adjustment (a correction) rather than a top-up; a negative amount always is one")
	return func(a *adminCtx) error {
		if *org == "" || *amount == "" {
			return usageError{"--org and --amount are required"}
		}
		micros, err := config.ParseUSD(*amount)
		if err != nil {
			return usageError{"--amount: " + err.Error()}
		}
		o, err := a.st.GetOrg(a.ctx, store.OrgID(*org))
		if err != nil {
			return err
		}
		kind := store.CreditTopUp
		if *adjust || micros < 0 {
			kind = store.CreditAdjustment
		}
		svc := &billing.Service{Store: a.st}
		if o, err = svc.AddCredit(a.ctx, app.OperatorActor(o, operatorName), kind, micros, *reason); err != nil {
			return err
		}
		j := toOrgJSON(o)
		return a.print(j, func(w io.Writer) { fmt.Fprintf(w, "organization %s credit now %s USD\n", j.ID, j.CreditUSD) })
	}
}

// frozenAction is the audit action of freezing or unfreezing.
func frozenAction(frozen bool) string {
	if frozen {
		return "frozen"
	}
	return "unfrozen"
}
