package store

// issue 21: a trunk's SRTP and TLS settings.

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	"github.com/parley-voice/parley/control/secrets"
)

// TrunkSecurity is what a trunk stores about encryption.
type TrunkSecurity struct {
	// SRTP is disabled, allowed (accept SRTP or RTP, offer RTP) or required (offer and accept
	// only SRTP).
	SRTP string
	// SRTPOverClear lets SRTP keys travel over UDP or TCP signalling.
	SRTPOverClear bool
	// TLSCA are extra PEM roots for the trunk's server certificate; TLSClientCert the PEM
	// certificate presented for mutual TLS, whose key is kept sealed (TLSClientKey opens it).
	TLSCA              string
	TLSClientCert      string
	TLSClientKeySealed string
}

// NewTrunkSecurity are the encryption settings of a trunk to create.
type NewTrunkSecurity struct {
	SRTP          string // disabled (default), allowed or required
	SRTPOverClear bool
	TLSCA         string
	TLSClientCert string
	TLSClientKey  string // sealed with the box given to CreateTrunk
}

const trunkSecurityCols = `srtp, srtp_over_clear, tls_ca, tls_client_cert, tls_client_key_sealed, ` + trunkRegistrationCols

func trunkKeyAAD(id TrunkID) []byte { return []byte("trunk:" + string(id) + ":tls_key") }

// checkTrunkSecurity validates ns (normalising SRTP) for a trunk over transport tp.
func checkTrunkSecurity(tp string, ns *NewTrunkSecurity) error {
	ns.SRTP = strings.ToLower(strings.TrimSpace(ns.SRTP))
	switch ns.SRTP {
	case "":
		ns.SRTP = "disabled"
	case "disabled", "allowed", "required":
	default:
		return fmt.Errorf("store: %w: trunk SRTP %q (want disabled, allowed or required)", ErrInvalid, ns.SRTP)
	}
	if ns.SRTP == "required" && tp != "tls" && !ns.SRTPOverClear {
		return fmt.Errorf("store: %w: SRTP required over %s sends the keys in clear: use transport tls, or allow SRTP over clear signalling", ErrInvalid, tp)
	}
	if len(ns.TLSCA)+len(ns.TLSClientCert)+len(ns.TLSClientKey) > 64<<10 {
		return fmt.Errorf("store: %w: trunk TLS material too large", ErrInvalid)
	}
	if ns.TLSCA != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(ns.TLSCA)) {
		return fmt.Errorf("store: %w: trunk CA is not PEM certificates", ErrInvalid)
	}
	if (ns.TLSClientCert == "") != (ns.TLSClientKey == "") {
		return fmt.Errorf("store: %w: a client certificate needs both certificate and key", ErrInvalid)
	}
	if ns.TLSClientCert != "" {
		if _, err := tls.X509KeyPair([]byte(ns.TLSClientCert), []byte(ns.TLSClientKey)); err != nil {
			// The error of X509KeyPair never quotes the key.
			return fmt.Errorf("store: %w: trunk client certificate: %v", ErrInvalid, err)
		}
	}
	return nil
}

// sealSecurity fills t's security settings from ns, sealing the client key with box.
func (t *Trunk) sealSecurity(box *secrets.Box, ns NewTrunkSecurity) error {
	t.SRTP, t.SRTPOverClear, t.TLSCA, t.TLSClientCert = strings.ToLower(strings.TrimSpace(ns.SRTP)), ns.SRTPOverClear, ns.TLSCA, ns.TLSClientCert
	if t.SRTP == "" {
		t.SRTP = "disabled" // checkTrunkSecurity accepted ns
	}
	if ns.TLSClientKey == "" {
		return nil
	}
	if box == nil {
		return fmt.Errorf("store: %w: a trunk client key needs the master key", ErrInvalid)
	}
	var err error
	if t.TLSClientKeySealed, err = box.Seal([]byte(ns.TLSClientKey), trunkKeyAAD(t.ID)); err != nil {
		return fmt.Errorf("store: seal trunk client key: %w", err)
	}
	return nil
}

// HasClientCert reports whether the trunk presents a client certificate.
func (t Trunk) HasClientCert() bool { return t.TLSClientKeySealed != "" }

// TLSClientKey opens the client certificate's key with box ("" when there is none).
func (t Trunk) TLSClientKey(box *secrets.Box) (string, error) {
	if t.TLSClientKeySealed == "" {
		return "", nil
	}
	if box == nil {
		return "", fmt.Errorf("store: trunk %s: no master key to open its client key", t.Name)
	}
	pt, err := box.Open(t.TLSClientKeySealed, trunkKeyAAD(t.ID))
	if err != nil {
		return "", fmt.Errorf("store: trunk %s client key: %w", t.Name, err)
	}
	return string(pt), nil
}
