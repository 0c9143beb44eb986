package main

// issue 21: the encryption flags of `parley admin trunks add`.

import (
	"flag"
	"fmt"
	"os"

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
