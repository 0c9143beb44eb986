package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/parley-voice/parley/control/store"
)

// trunksNetworks is `parley admin trunks networks NAME [--transfer-allow CIDR…] [--media CIDR…]`
// (issue 22 item 7): the non-public networks the trunk's calls may be transferred to, and the
// networks its SDP may put media at (carriers publish their media ranges). Both replace what
// was set; give neither to print them; --clear empties both.
func trunksNetworks(fs *flag.FlagSet) func(a *adminCtx) error {
	var xfer, med stringList
	fs.Var(&xfer, "transfer-allow", "non-public address or CIDR the trunk's calls may be transferred to (repeatable, or comma-separated)")
	fs.Var(&med, "media", "address or CIDR the trunk's media may come from and go to (repeatable, or comma-separated; none: any)")
	clear := fs.Bool("clear", false, "empty both lists")
	return func(a *adminCtx) error {
		ref, err := a.oneArg("trunk name")
		if err != nil {
			return err
		}
		t, err := a.st.FindTrunkByName(a.ctx, ref)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no trunk named %q", ref)
		}
		if err != nil {
			return err
		}
		if *clear || len(xfer) > 0 || len(med) > 0 {
			err := a.st.SetTrunkNetworks(a.ctx, t.ID, store.TrunkNetworks{TransferAllow: splitList(xfer), MediaCIDRs: splitList(med)})
			if errors.Is(err, store.ErrInvalid) {
				return usageError{strings.TrimPrefix(err.Error(), "store: ")}
			}
			if err != nil {
				return err
			}
		}
		n, err := a.st.GetTrunkNetworks(a.ctx, t.ID)
		if err != nil {
			return err
		}
		res := map[string]any{"name": t.Name, "transfer_allow": orEmpty(n.TransferAllow), "media_cidrs": orEmpty(n.MediaCIDRs)}
		return a.print(res, func(w io.Writer) {
			fmt.Fprintf(w, "trunk %s\ntransfer allow: %s\nmedia networks: %s\n", t.Name, strings.Join(n.TransferAllow, ","), strings.Join(n.MediaCIDRs, ","))
		})
	}
}

func splitList(l stringList) []string {
	var out []string
	for _, s := range l {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

func orEmpty(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
