package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/store"
)

// orgsTransferAllow is `parley admin orgs transfer-allow ORG_ID [--allow CIDR…] [--clear]`
// (issue 22 item 7): the non-public networks the organization's calls may be transferred to,
// on top of the node's PARLEY_TRANSFER_ALLOW and each trunk's list (`admin trunks networks`);
// it is what calls on a number without a trunk go by. --allow replaces the list; give neither
// flag to print it. A change is recorded in the audit log.
func orgsTransferAllow(fs *flag.FlagSet) func(a *adminCtx) error {
	var allow stringList
	fs.Var(&allow, "allow", "non-public address or CIDR the organization's calls may be transferred to (repeatable, or comma-separated)")
	clear := fs.Bool("clear", false, "empty the list")
	return func(a *adminCtx) error {
		id, err := a.oneArg("organization id")
		if err != nil {
			return err
		}
		if *clear && len(allow) > 0 {
			return usageError{"give --allow or --clear, not both"}
		}
		var o store.Org
		err = a.st.Tx(a.ctx, func(tx *store.Tx) error {
			was, err := tx.GetOrg(a.ctx, store.OrgID(id))
			if err != nil {
				return err
			}
			o = was
			if !*clear && len(allow) == 0 {
				return nil
			}
			if err := tx.SetOrgTransferAllow(a.ctx, was.ID, splitList(allow)); err != nil {
				return err
			}
			if o, err = tx.GetOrg(a.ctx, was.ID); err != nil {
				return err
			}
			if slices.Equal(was.TransferAllow, o.TransferAllow) {
				return nil
			}
			return tx.InsertAudit(a.ctx, operatorEvent(o.ID, "", "organization.transfer_allow_changed", "organization", string(o.ID),
				map[string]any{"transfer_allow": app.Changed(was.TransferAllow, o.TransferAllow)}))
		})
		switch {
		case errors.Is(err, store.ErrInvalid):
			return usageError{strings.TrimPrefix(err.Error(), "store: ")}
		case errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("no organization %q", id)
		case err != nil:
			return err
		}
		res := map[string]any{"id": string(o.ID), "name": o.Name, "transfer_allow": orEmpty(o.TransferAllow)}
		return a.print(res, func(w io.Writer) {
			fmt.Fprintf(w, "organization %s (%s)\ntransfer allow: %s\n", o.ID, o.Name, strings.Join(o.TransferAllow, ","))
		})
	}
}
