package store

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// TrunkNetworks are the networks a trunk's calls may use besides its signalling (issue 22
// item 7): TransferAllow, the non-public networks its calls may be transferred to (on top of
// the node's PARLEY_TRANSFER_ALLOW); MediaCIDRs, the networks its SDP may put media at (empty:
// any). Both hold canonical CIDRs.
type TrunkNetworks struct {
	TransferAllow []string
	MediaCIDRs    []string
}

// canonicalCIDRs checks addresses and CIDRs and returns them canonical, without repeats.
func canonicalCIDRs(what string, list []string) ([]string, error) {
	if len(list) > maxTrunkSources {
		return nil, fmt.Errorf("store: %w: more than %d %s networks", ErrInvalid, maxTrunkSources, what)
	}
	out := make([]string, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		var p netip.Prefix
		if strings.Contains(s, "/") {
			pp, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("store: %w: %s network %q is not a CIDR", ErrInvalid, what, s)
			}
			p = pp.Masked()
		} else {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("store: %w: %s network %q is not an address", ErrInvalid, what, s)
			}
			a = a.Unmap()
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if !slices.Contains(out, p.String()) {
			out = append(out, p.String())
		}
	}
	return out, nil
}

// SetTrunkNetworks replaces the networks of the trunk with id.
func (q *Queries) SetTrunkNetworks(ctx context.Context, id TrunkID, n TrunkNetworks) error {
	if !validID(id) {
		return notFound("trunk", id)
	}
	xfer, err := canonicalCIDRs("transfer", n.TransferAllow)
	if err != nil {
		return err
	}
	med, err := canonicalCIDRs("media", n.MediaCIDRs)
	if err != nil {
		return err
	}
	xs, err := jsonText(xfer)
	if err != nil {
		return err
	}
	ms, err := jsonText(med)
	if err != nil {
		return err
	}
	res, err := q.exec(ctx, "set trunk networks", `UPDATE sip_trunks SET transfer_allow = $2, media_cidrs = $3, updated_at = $4 WHERE id = $1`,
		string(id), xs, ms, ts(q.s.timeNow()))
	return affectedOne(res, err, "trunk", id)
}

// GetTrunkNetworks returns the networks of the trunk with id, or ErrNotFound.
func (q *Queries) GetTrunkNetworks(ctx context.Context, id TrunkID) (TrunkNetworks, error) {
	if !validID(id) {
		return TrunkNetworks{}, notFound("trunk", id)
	}
	var n TrunkNetworks
	err := q.get(ctx, "get trunk networks", `SELECT transfer_allow, media_cidrs FROM sip_trunks WHERE id = $1`, []any{string(id)},
		func(r rowScanner) error { return r.Scan(jsonCol{&n.TransferAllow}, jsonCol{&n.MediaCIDRs}) })
	return n, err
}
