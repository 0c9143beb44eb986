package main

// issue 21: the encryption flags of `parley admin trunks add`.

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/store"
)

type trunkSecurityOpts struct {
	srtp, ca, cert, key *string
	overClear           *bool
}

func trunkSecurityFlags(fs *flag.FlagSet) *trunkSecurityOpts {
	return &trunkSecurityOpts{
		srtp:      fs.String("srtp", "disabled", "media encryption: disabled, allowed (accept SRTP, offer RTP) or required (SRTP only; needs --transport tls)"),
		overClear: fs.Bool("srtp-over-clear", false, "allow SRTP keys over udp/tcp signalling (they are then no secret)"),
		ca:        fs.String("tls-ca", "", "PEM file of extra CAs trusted for the trunk's TLS certificate (beside the system pool)"),
		cert:      fs.String("tls-client-cert", "", "PEM file of the client certificate for mutual TLS"),
		key:       fs.String("tls-client-key", "", "PEM file of its private key (sealed with the master key; never shown)"),
	}
}

func (o *trunkSecurityOpts) read() (store.NewTrunkSecurity, error) {
	ns := store.NewTrunkSecurity{SRTP: *o.srtp, SRTPOverClear: *o.overClear}
	for _, f := range []struct {
		path string
		dst  *string
		flag string
	}{{*o.ca, &ns.TLSCA, "--tls-ca"}, {*o.cert, &ns.TLSClientCert, "--tls-client-cert"}, {*o.key, &ns.TLSClientKey, "--tls-client-key"}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return ns, usageError{fmt.Sprintf("%s: %v", f.flag, err)}
		}
		*f.dst = string(b)
	}
	return ns, nil
}

// registrationJSON is a trunk's registration settings (the credentials are the trunk's).
type registrationJSON struct {
	Registrar string `json:"registrar"`
	Backup    string `json:"backup,omitempty"`
	AOR       string `json:"aor"`
	Proxy     string `json:"proxy,omitempty"`
	Expires   int    `json:"expires_seconds,omitempty"`
}

// regStateJSON is one node's registration state.
type regStateJSON struct {
	Node      string     `json:"node"`
	State     string     `json:"state"`
	Registrar string     `json:"registrar,omitempty"`
	Error     string     `json:"error,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	UpdatedAt time.Time  `json:"updated_at"`
}

func toRegistrationJSON(t store.Trunk) *registrationJSON {
	r := t.TrunkRegistration
	if r.Registrar == "" {
		return nil
	}
	return &registrationJSON{Registrar: r.Registrar, Backup: r.Backup, AOR: r.AOR, Proxy: r.Proxy, Expires: r.Expires}
}

func regStatesOf(id store.TrunkID, all []store.RegistrationState) []regStateJSON {
	var out []regStateJSON
	for _, st := range all {
		if st.TrunkID != id {
			continue
		}
		j := regStateJSON{Node: st.NodeID, State: st.State, Registrar: st.Registrar, Error: st.Error, UpdatedAt: st.UpdatedAt.UTC()}
		if st.ExpiresAt != nil {
			e := st.ExpiresAt.UTC()
			j.ExpiresAt = &e
		}
		out = append(out, j)
	}
	return out
}

// regSummary is the REGISTRATION column: "-" for a trunk that does not register, else each
// node's state ("registered@node-a,failed@node-b"), or "pending" before any node reported.
func regSummary(t trunkJSON) string {
	if t.Registration == nil {
		return "-"
	}
	if len(t.RegStates) == 0 {
		return "pending"
	}
	parts := make([]string, 0, len(t.RegStates))
	for _, st := range t.RegStates {
		parts = append(parts, st.State+"@"+st.Node)
	}
	return strings.Join(parts, ",")
}

type trunkRegistrationOpts struct {
	registrar, backup, aor, proxy *string
	expires                       *int
}

func trunkRegistrationFlags(fs *flag.FlagSet) *trunkRegistrationOpts {
	return &trunkRegistrationOpts{
		registrar: fs.String("register", "", "register to this registrar (sip:host[:port]) with the trunk's username and password"),
		backup:    fs.String("register-backup", "", "a second registrar, tried when the first fails"),
		aor:       fs.String("register-aor", "", "the address of record to register (sip:user@domain); its user is the trunk's number"),
		proxy:     fs.String("register-proxy", "", "outbound proxy for the REGISTERs (sip:host[:port])"),
		expires:   fs.Int("register-expires", 0, "binding lifetime asked for, in seconds (default 300)"),
	}
}

func (o *trunkRegistrationOpts) read() store.TrunkRegistration {
	return store.TrunkRegistration{Registrar: *o.registrar, Backup: *o.backup, AOR: *o.aor, Proxy: *o.proxy, Expires: *o.expires}
}
