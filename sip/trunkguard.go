package sip

import (
	"net/netip"
	"slices"
)

// Issue 22 item 7: where a trunk's calls may send media and be transferred.

// transferAllow is the allow-list of the call's transfers: the node's (Options.TransferAllow),
// its trunk's (Trunk.TransferAllow) and its organization's (TransferOptions.Allow).
func (c *Call) transferAllow() []netip.Prefix {
	if len(c.trunk.TransferAllow) == 0 && len(c.xfer.Allow) == 0 {
		return c.s.o.TransferAllow
	}
	return slices.Concat(c.s.o.TransferAllow, c.trunk.TransferAllow, c.xfer.Allow)
}

// TransferAllowFor is the allow-list of transfers of a call on trunk t, for a control plane
// checking a destination before it asks the media node (CheckTransferDestination).
func TransferAllowFor(node []netip.Prefix, t Trunk) []netip.Prefix {
	return slices.Concat(node, t.TransferAllow)
}

// mediaAllowed reports whether the peer's SDP may put media at remote: any address when the
// trunk lists no media networks; else one inside them. An SDP without an address (hold with
// c=0.0.0.0) sends nothing and is allowed.
func mediaAllowed(cidrs []netip.Prefix, remote netip.AddrPort) bool {
	if len(cidrs) == 0 || !remote.IsValid() || remote.Addr().IsUnspecified() {
		return true
	}
	a := remote.Addr().Unmap()
	for _, p := range cidrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// RefuseMediaAddress answers 488 with Warning 305: the SDP puts media outside the trunk's
// media networks (RFC 3261 §21.4.26, §20.43).
func RefuseMediaAddress(a netip.Addr) *Refusal {
	return &Refusal{Status: 488, Reason: "media address " + a.String() + " not allowed for this trunk", Warning: 305}
}
