package store

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/secrets"
)

// TrunkID names a SIP trunk.
type TrunkID string

// Trunk is a SIP trunk: a carrier or PBX Parley exchanges calls with. Its digest password is
// kept sealed under the master key; Password opens it. The store never holds it in clear.
type Trunk struct {
	ID   TrunkID
	Name string // unique in the deployment; phone numbers name their trunk
	// URI is where outbound INVITEs go ("sip:host[:port]"); Transport is udp, tcp or tls.
	URI       string
	Transport string
	// Username and the sealed password are the digest credentials (sent when the trunk
	// challenges, required from it with InboundAuth).
	Username       string
	PasswordSealed string // "" when the trunk has no password
	// AllowedSources are the networks (CIDRs, canonical) allowed to send inbound calls.
	AllowedSources    []string
	InboundAuth       bool
	FromDomain        string // host of the From URI of outbound calls; "" means Parley's address
	TrunkSecurity            // issue 21: SRTP and TLS (trunks_security.go)
	TrunkRegistration        // issue 21: registration (trunks_registration.go)
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// HasPassword reports whether a password is stored.
func (t Trunk) HasPassword() bool { return t.PasswordSealed != "" }

// trunkAAD binds a sealed password to its trunk, so it cannot be moved to another row.
func trunkAAD(id TrunkID) []byte { return []byte("trunk:" + string(id) + ":password") }

// Password opens the trunk's password with box ("" when it has none).
func (t Trunk) Password(box *secrets.Box) (string, error) {
	if t.PasswordSealed == "" {
		return "", nil
	}
	if box == nil {
		return "", fmt.Errorf("store: trunk %s: no master key to open its password", t.Name)
	}
	pt, err := box.Open(t.PasswordSealed, trunkAAD(t.ID))
	if err != nil {
		return "", fmt.Errorf("store: trunk %s password: %w", t.Name, err)
	}
	return string(pt), nil
}

// NewTrunk describes a trunk to create.
type NewTrunk struct {
	Name      string
	URI       string
	Transport string // udp (default), tcp or tls
	Username  string
	Password  string // sealed with the box given to CreateTrunk
	// AllowedSources are addresses or CIDRs ("203.0.113.7", "198.51.100.0/24").
	AllowedSources    []string
	InboundAuth       bool
	FromDomain        string
	NewTrunkSecurity  // issue 21
	TrunkRegistration // issue 21
}

// maxTrunkSources bounds the allowed sources of one trunk.
const maxTrunkSources = 256

const trunkCols = `id, name, uri, transport, username, password_sealed, allowed_sources, inbound_auth, from_domain, created_at, updated_at, ` + trunkSecurityCols

func scanTrunk(r rowScanner) (Trunk, error) {
	var t Trunk
	err := r.Scan(&t.ID, &t.Name, &t.URI, &t.Transport, &t.Username, nullTextCol[string]{&t.PasswordSealed},
		jsonCol{&t.AllowedSources}, &t.InboundAuth, &t.FromDomain, timeCol{&t.CreatedAt}, timeCol{&t.UpdatedAt},
		&t.SRTP, &t.SRTPOverClear, &t.TLSCA, &t.TLSClientCert, nullTextCol[string]{&t.TLSClientKeySealed},
		&t.Registrar, &t.Backup, &t.AOR, &t.Proxy, &t.Expires)
	return t, err
}

// checkTrunk validates nt and returns its transport and canonical source networks.
func checkTrunk(nt NewTrunk) (string, []string, error) {
	if err := checkName("trunk", nt.Name); err != nil {
		return "", nil, err
	}
	lower := strings.ToLower(nt.URI)
	host := strings.TrimPrefix(strings.TrimPrefix(lower, "sips:"), "sip:")
	switch {
	case !strings.HasPrefix(lower, "sip:") && !strings.HasPrefix(lower, "sips:"):
		return "", nil, fmt.Errorf("store: %w: trunk URI %q must start with sip: or sips:", ErrInvalid, nt.URI)
	case host == "" || strings.ContainsAny(host, " \t\r\n<>\"") || len(nt.URI) > 512:
		return "", nil, fmt.Errorf("store: %w: trunk URI %q has no usable host", ErrInvalid, nt.URI)
	}
	tp := strings.ToLower(strings.TrimSpace(nt.Transport))
	switch tp {
	case "":
		tp = "udp"
	case "udp", "tcp", "tls":
	default:
		return "", nil, fmt.Errorf("store: %w: trunk transport %q (want udp, tcp or tls)", ErrInvalid, nt.Transport)
	}
	if len(nt.AllowedSources) > maxTrunkSources {
		return "", nil, fmt.Errorf("store: %w: more than %d allowed sources", ErrInvalid, maxTrunkSources)
	}
	sources := make([]string, 0, len(nt.AllowedSources))
	for _, s := range nt.AllowedSources {
		s = strings.TrimSpace(s)
		var p netip.Prefix
		if strings.Contains(s, "/") {
			pp, err := netip.ParsePrefix(s)
			if err != nil {
				return "", nil, fmt.Errorf("store: %w: allowed source %q is not a CIDR", ErrInvalid, s)
			}
			p = pp.Masked()
		} else {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return "", nil, fmt.Errorf("store: %w: allowed source %q is not an address", ErrInvalid, s)
			}
			a = a.Unmap()
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if !slices.Contains(sources, p.String()) {
			sources = append(sources, p.String())
		}
	}
	if nt.InboundAuth && (nt.Username == "" || nt.Password == "") {
		return "", nil, fmt.Errorf("store: %w: inbound authentication needs a username and a password", ErrInvalid)
	}
	if strings.ContainsAny(nt.Username+nt.FromDomain, "\r\n\"<> ") || len(nt.Username) > 256 || len(nt.FromDomain) > 256 {
		return "", nil, fmt.Errorf("store: %w: trunk username or from domain holds a forbidden character", ErrInvalid)
	}
	if len(nt.Password) > 1024 {
		return "", nil, fmt.Errorf("store: %w: trunk password too long", ErrInvalid)
	}
	if err := checkTrunkSecurity(tp, &nt.NewTrunkSecurity); err != nil {
		return "", nil, err
	}
	if err := checkTrunkRegistration(nt); err != nil {
		return "", nil, err
	}
	return tp, sources, nil
}

// CreateTrunk creates a trunk, sealing its password with box (required when it has one). A
// name in use is ErrConflict.
func (q *Queries) CreateTrunk(ctx context.Context, box *secrets.Box, nt NewTrunk) (Trunk, error) {
	tp, sources, err := checkTrunk(nt)
	if err != nil {
		return Trunk{}, err
	}
	now := q.s.timeNow()
	t := Trunk{ID: newID[TrunkID](), Name: nt.Name, URI: strings.TrimSpace(nt.URI), Transport: tp, Username: nt.Username,
		AllowedSources: sources, InboundAuth: nt.InboundAuth, FromDomain: nt.FromDomain, CreatedAt: now, UpdatedAt: now}
	t.TrunkRegistration = nt.TrunkRegistration
	if err := t.sealSecurity(box, nt.NewTrunkSecurity); err != nil {
		return Trunk{}, err
	}
	if nt.Password != "" {
		if box == nil {
			return Trunk{}, fmt.Errorf("store: %w: a trunk password needs the master key", ErrInvalid)
		}
		if t.PasswordSealed, err = box.Seal([]byte(nt.Password), trunkAAD(t.ID)); err != nil {
			return Trunk{}, fmt.Errorf("store: seal trunk password: %w", err)
		}
	}
	src, err := jsonText(t.AllowedSources)
	if err != nil {
		return Trunk{}, err
	}
	_, err = q.exec(ctx, "create trunk",
		`INSERT INTO sip_trunks (`+trunkCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)`,
		string(t.ID), t.Name, t.URI, t.Transport, t.Username, nullText(t.PasswordSealed), src, t.InboundAuth, t.FromDomain, ts(now), ts(now),
		t.SRTP, t.SRTPOverClear, t.TLSCA, t.TLSClientCert, nullText(t.TLSClientKeySealed),
		t.Registrar, t.Backup, t.AOR, t.Proxy, t.Expires)
	if err != nil {
		return Trunk{}, err
	}
	return t, nil
}

// GetTrunk returns the trunk with id, or ErrNotFound.
func (q *Queries) GetTrunk(ctx context.Context, id TrunkID) (Trunk, error) {
	if !validID(id) {
		return Trunk{}, notFound("trunk", id)
	}
	var t Trunk
	err := q.get(ctx, "get trunk", `SELECT `+trunkCols+` FROM sip_trunks WHERE id = $1`, []any{string(id)},
		func(r rowScanner) (err error) { t, err = scanTrunk(r); return err })
	return t, err
}

// FindTrunkByName returns the trunk called name, or ErrNotFound.
func (q *Queries) FindTrunkByName(ctx context.Context, name string) (Trunk, error) {
	var t Trunk
	err := q.get(ctx, "find trunk", `SELECT `+trunkCols+` FROM sip_trunks WHERE name = $1`, []any{name},
		func(r rowScanner) (err error) { t, err = scanTrunk(r); return err })
	return t, err
}

// ListTrunks returns every trunk, oldest first.
func (q *Queries) ListTrunks(ctx context.Context) ([]Trunk, error) {
	return list(ctx, q, "list trunks", `SELECT `+trunkCols+` FROM sip_trunks ORDER BY id`, nil, scanTrunk)
}

// DeleteTrunk removes the trunk with id. Numbers that name it keep the name (and reach no
// trunk until one of that name exists again).
func (q *Queries) DeleteTrunk(ctx context.Context, id TrunkID) error {
	if !validID(id) {
		return notFound("trunk", id)
	}
	res, err := q.exec(ctx, "delete trunk", `DELETE FROM sip_trunks WHERE id = $1`, string(id))
	return affectedOne(res, err, "trunk", id)
}
