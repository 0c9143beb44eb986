package sip

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"
)

// CheckTransferDestination reports whether a transfer may go to dest: an E.164 number (dialled
// through a trunk, which the operator configured) always may; a SIP URI only when its host is
// a public address, or a non-public one inside allow. A host name is resolved and every
// address it gives is checked. A refusal wraps ErrDestinationNotAllowed.
func CheckTransferDestination(ctx context.Context, dest string, allow []netip.Prefix) error {
	lower := strings.ToLower(strings.TrimSpace(dest))
	if !strings.HasPrefix(lower, "sip:") && !strings.HasPrefix(lower, "sips:") {
		return nil
	}
	var u sip.Uri
	if err := sip.ParseUri(strings.TrimSpace(dest), &u); err != nil || u.Host == "" {
		return fmt.Errorf("%w: bad SIP URI %q", ErrBadOptions, dest)
	}
	return checkTransferHost(ctx, u.Host, allow)
}

func checkTransferHost(ctx context.Context, host string, allow []netip.Prefix) error {
	host = strings.Trim(host, "[]")
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		found, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil || len(found) == 0 {
			return fmt.Errorf("%w: cannot resolve %q", ErrDestinationNotAllowed, host)
		}
		addrs = found
	}
	for _, a := range addrs {
		a = a.Unmap()
		if publicAddr(a) || allowed(a, allow) {
			continue
		}
		return fmt.Errorf("%w: %s is not a public address (allow it in the organization's or the trunk's transfer allow-list, or PARLEY_TRANSFER_ALLOW)", ErrDestinationNotAllowed, a)
	}
	return nil
}

// publicAddr reports whether a is a unicast address on the public internet.
func publicAddr(a netip.Addr) bool {
	return a.IsValid() && a.IsGlobalUnicast() && !a.IsPrivate() && !cgnat.Contains(a)
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10") // RFC 6598 shared address space

func allowed(a netip.Addr, allow []netip.Prefix) bool {
	for _, p := range allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
