package channels

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"

	"github.com/parley-voice/parley/control/fault"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/sip"
)

// TransferChecker is the control plane's check of a transfer destination (issue 22 item 7),
// the same the media node makes before it sends anything (sip.CheckTransferDestination): a
// SIP URI must name a public address, or one in the node's allow-list, in the allow-list of the
// call's organization (what a call whose number has no trunk goes by), or in the allow-list of
// the call's trunk (the trunk of its phone number). A number always passes: the trunk carries
// it.
type TransferChecker struct {
	Store *store.Store
	Allow []netip.Prefix // the node's PARLEY_TRANSFER_ALLOW
}

// Check implements conversations.Service.TransferCheck: a refusal is a
// transfer_destination_not_allowed fault (422).
func (t TransferChecker) Check(ctx context.Context, c store.Conversation, dest string) error {
	lower := strings.ToLower(strings.TrimSpace(dest))
	if !strings.HasPrefix(lower, "sip:") && !strings.HasPrefix(lower, "sips:") {
		return nil
	}
	allow := t.Allow
	org, err := t.Store.GetOrg(ctx, c.OrgID)
	if err != nil {
		return err
	}
	if len(org.TransferAllow) > 0 {
		extra, err := orgAllow(org.TransferAllow)
		if err != nil {
			return err
		}
		allow = slices.Concat(allow, extra)
	}
	if c.PhoneNumberID != "" {
		if n, err := t.Store.GetPhoneNumber(ctx, c.PhoneNumberID); err == nil && n.Trunk != "" {
			if tr, err := t.Store.FindTrunkByName(ctx, n.Trunk); err == nil {
				nets, err := t.Store.GetTrunkNetworks(ctx, tr.ID)
				if err != nil {
					return err
				}
				extra, err := sip.ParsePrefixes(nets.TransferAllow)
				if err != nil {
					return err
				}
				allow = sip.TransferAllowFor(allow, sip.Trunk{TransferAllow: extra})
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	err = sip.CheckTransferDestination(ctx, dest, allow)
	switch {
	case errors.Is(err, sip.ErrDestinationNotAllowed):
		return fault.E(fault.CodeTransferNotAllowed, "The transfer destination %s is not allowed: %s.", dest, strings.TrimPrefix(err.Error(), "sip: transfer destination not allowed: "))
	case err != nil:
		e := fault.E(fault.CodeValidationFailed, "destination is not a usable SIP URI.")
		e.Errors = []fault.FieldError{{Pointer: "/destination", Code: "invalid_format", Detail: "destination is not a usable SIP URI."}}
		return e
	}
	return nil
}
