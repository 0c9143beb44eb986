package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
)

// trunksCommand is `parley admin trunks add|list|remove`: the SIP trunks (carriers, PBXs) the
// deployment exchanges calls with. A trunk's digest password is sealed with the master key;
// nothing prints it back.
func trunksCommand() *command {
	return &command{name: "trunks", short: "SIP trunks", subs: []*command{
		{name: "add", short: "add a trunk (--name, --uri sip:host:port, --transport, --username, --password|--password-env, --allow CIDR…, --inbound-auth, --srtp, --tls-ca, --tls-client-cert/--tls-client-key)", run: adminLeaf(trunksAdd)},
		{name: "list", short: "list the trunks", run: adminLeaf(trunksList)},
		{name: "remove", short: "remove a trunk by name or id", run: adminLeaf(trunksRemove)},
		{name: "networks", short: "show or set a trunk's transfer allow-list and media networks (NAME --transfer-allow CIDR… --media CIDR… | --clear)", run: adminLeaf(trunksNetworks)},
	}}
}

// trunkJSON is the admin view of a trunk: never the password, only whether one is set.
type trunkJSON struct {
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	URI            string   `json:"uri"`
	Transport      string   `json:"transport"`
	Username       string   `json:"username"`
	PasswordSet    bool     `json:"password_set"`
	AllowedSources []string `json:"allowed_sources"`
	InboundAuth    bool     `json:"inbound_auth"`
	FromDomain     string   `json:"from_domain,omitempty"`
	// issue 21: encryption (the client key is never shown, only whether one is set).
	SRTP          string `json:"srtp"`
	SRTPOverClear bool   `json:"srtp_over_clear,omitempty"`
	TLSCA         bool   `json:"tls_ca_set"`
	ClientCert    bool   `json:"tls_client_cert_set"`
	// issue 21: registration settings and each node's state.
	Registration *registrationJSON `json:"registration,omitempty"`
	RegStates    []regStateJSON    `json:"registration_states,omitempty"`
	CreatedAt    time.Time         `json:"created_at"`
}

func toTrunkJSON(t store.Trunk) trunkJSON {
	src := t.AllowedSources
	if src == nil {
		src = []string{}
	}
	return trunkJSON{ID: string(t.ID), Name: t.Name, URI: t.URI, Transport: t.Transport, Username: t.Username,
		PasswordSet: t.HasPassword(), AllowedSources: src, InboundAuth: t.InboundAuth, FromDomain: t.FromDomain,
		SRTP: t.SRTP, SRTPOverClear: t.SRTPOverClear, TLSCA: t.TLSCA != "", ClientCert: t.HasClientCert(),
		Registration: toRegistrationJSON(t),
		CreatedAt:    t.CreatedAt.UTC()}
}

// masterBox opens the master key the server uses (configured, or the key file of the data
// directory, created on first use like the server does).
func (a *adminCtx) masterBox() (*secrets.Box, error) {
	key, previous, _, err := secrets.LoadKeys(a.config.MasterKey, a.config.MasterKeyPrevious, a.config.DataDir)
	if err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
	return secrets.NewKeyring(key, previous...)
}

func trunksAdd(fs *flag.FlagSet) func(a *adminCtx) error {
	name := fs.String("name", "", "trunk name, unique (required); numbers refer to it")
	uri := fs.String("uri", "", "where outbound calls go, sip:host[:port] (required)")
	transport := fs.String("transport", "udp", "udp, tcp or tls")
	username := fs.String("username", "", "digest username")
	password := fs.String("password", "", "digest password (prefer --password-env: arguments show in ps and shell history)")
	passwordEnv := fs.String("password-env", "", "read the digest password from this environment variable")
	var allow stringList
	fs.Var(&allow, "allow", "address or CIDR allowed to send inbound calls (repeatable, or comma-separated)")
	inboundAuth := fs.Bool("inbound-auth", false, "challenge the trunk's inbound INVITEs with digest authentication")
	fromDomain := fs.String("from-domain", "", "host part of the From of outbound calls (default: Parley's address)")
	sec := trunkSecurityFlags(fs) // issue 21
	reg := trunkRegistrationFlags(fs)
	return func(a *adminCtx) error {
		if strings.TrimSpace(*name) == "" || strings.TrimSpace(*uri) == "" {
			return usageError{"--name and --uri are required"}
		}
		pw := *password
		if *passwordEnv != "" {
			if pw != "" {
				return usageError{"give --password or --password-env, not both"}
			}
			v, ok := os.LookupEnv(*passwordEnv)
			if !ok {
				return usageError{fmt.Sprintf("--password-env: %s is not set", *passwordEnv)}
			}
			pw = v
		}
		var sources []string
		for _, s := range allow {
			for _, part := range strings.Split(s, ",") {
				if part = strings.TrimSpace(part); part != "" {
					sources = append(sources, part)
				}
			}
		}
		ns, err := sec.read()
		if err != nil {
			return err
		}
		var box *secrets.Box
		if pw != "" || ns.TLSClientKey != "" {
			b, err := a.masterBox()
			if err != nil {
				return err
			}
			box = b
		}
		t, err := a.st.CreateTrunk(a.ctx, box, store.NewTrunk{Name: *name, URI: *uri, Transport: *transport, Username: *username,
			Password: pw, AllowedSources: sources, InboundAuth: *inboundAuth, FromDomain: *fromDomain, NewTrunkSecurity: ns, TrunkRegistration: reg.read()})
		switch {
		case errors.Is(err, store.ErrConflict):
			return fmt.Errorf("a trunk named %q already exists", *name)
		case errors.Is(err, store.ErrInvalid):
			return usageError{strings.TrimPrefix(err.Error(), "store: ")}
		case err != nil:
			return err
		}
		j := toTrunkJSON(t)
		return a.print(j, func(w io.Writer) {
			fmt.Fprintf(w, "added trunk %s (%s)\n", j.Name, j.ID)
			if len(j.AllowedSources) == 0 {
				fmt.Fprintln(w, "note: no --allow networks: every inbound call from it will be refused 403")
			}
		})
	}
}

func trunksList(fs *flag.FlagSet) func(a *adminCtx) error {
	return func(a *adminCtx) error {
		ts, err := a.st.ListTrunks(a.ctx)
		if err != nil {
			return err
		}
		states, err := a.st.ListRegistrationStates(a.ctx) // issue 21
		if err != nil {
			return err
		}
		out := make([]trunkJSON, 0, len(ts))
		for _, t := range ts {
			j := toTrunkJSON(t)
			j.RegStates = regStatesOf(t.ID, states)
			out = append(out, j)
		}
		return a.print(out, func(w io.Writer) {
			fmt.Fprintln(w, "NAME\tURI\tTRANSPORT\tUSERNAME\tPASSWORD\tALLOWED SOURCES\tINBOUND AUTH\tSRTP\tREGISTRATION\tID")
			for _, t := range out {
				pw := "-"
				if t.PasswordSet {
					pw = "set"
				}
				src := strings.Join(t.AllowedSources, ",")
				if src == "" {
					src = "-"
				}
				user := t.Username
				if user == "" {
					user = "-"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\t%s\n", t.Name, t.URI, t.Transport, user, pw, src, t.InboundAuth, t.SRTP, regSummary(t), t.ID)
			}
		})
	}
}

func trunksRemove(fs *flag.FlagSet) func(a *adminCtx) error {
	return func(a *adminCtx) error {
		ref, err := a.oneArg("trunk name or id")
		if err != nil {
			return err
		}
		t, err := a.st.FindTrunkByName(a.ctx, ref)
		if errors.Is(err, store.ErrNotFound) {
			if id, perr := store.ParseID[store.TrunkID](ref); perr == nil {
				t, err = a.st.GetTrunk(a.ctx, id)
			}
		}
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no trunk named or numbered %q", ref)
		}
		if err != nil {
			return err
		}
		if err := a.st.DeleteTrunk(a.ctx, t.ID); err != nil {
			return err
		}
		res := map[string]any{"id": string(t.ID), "name": t.Name, "removed": true}
		return a.print(res, func(w io.Writer) { fmt.Fprintf(w, "removed trunk %s (%s)\n", t.Name, t.ID) })
	}
}
