package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"path/filepath"
	"sort"

	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
)

// masterKeyCommand is `parley admin master-key rotate|status|forget-previous` (issue 17): the
// master key that wraps the vault's data keys and seals trunk passwords.
//
// With the key file (no PARLEY_MASTER_KEY), rotate makes a new key, writes it first in the
// file with the old one after it (both accepted), and re-wraps every data key under it; once
// every node has restarted with the new file, forget-previous drops the old key. With
// PARLEY_MASTER_KEY, the operator sets the new key there and the old one in
// PARLEY_MASTER_KEY_PREVIOUS on every node first, then runs rotate, then removes the previous.
// Rotation never re-encrypts values, and never prints a key.
func masterKeyCommand() *command {
	return &command{name: "master-key", short: "the master key that encrypts secrets at rest", subs: []*command{
		{name: "rotate", short: "re-wrap every data key under a new master key (the key file: a new key is made; PARLEY_MASTER_KEY: the key set there)", run: adminLeaf(masterKeyRotate)},
		{name: "status", short: "the master key ids accepted and how many data keys each wraps", run: adminLeaf(masterKeyStatus)},
		{name: "forget-previous", short: "drop the previous keys from the key file once nothing is wrapped by them", run: adminLeaf(masterKeyForget)},
	}}
}

// keyring loads the master keys as serve does: the primary and the previous ones.
func (a *adminCtx) keyring() (primary []byte, previous [][]byte, err error) {
	primary, previous, _, err = secrets.LoadKeys(a.config.MasterKey, a.config.MasterKeyPrevious, a.config.DataDir)
	if err != nil {
		return nil, nil, fmt.Errorf("master key: %w", err)
	}
	return primary, previous, nil
}

// rotationJSON is what rotate prints.
type rotationJSON struct {
	KeyID      string   `json:"key_id"`
	Accepted   []string `json:"accepted_key_ids"`
	Rewrapped  int      `json:"data_keys_rewrapped"`
	Resealed   int      `json:"values_resealed"`
	KeyFile    string   `json:"key_file,omitempty"`
	NextAction string   `json:"next"`
}

func masterKeyRotate(fs *flag.FlagSet) func(a *adminCtx) error {
	return func(a *adminCtx) error {
		primary, previous, err := a.keyring()
		if err != nil {
			return err
		}
		res := rotationJSON{}
		var box *secrets.Box
		if a.config.MasterKey == "" {
			// The key file: a new key first, every old one after it, written before anything is
			// re-wrapped, so that a rotation cut short leaves every key in place.
			fresh, err := secrets.NewKey()
			if err != nil {
				return err
			}
			old := append([][]byte{primary}, previous...)
			if err := secrets.WriteKeyFile(a.config.DataDir, fresh, old...); err != nil {
				return err
			}
			if box, err = secrets.NewKeyring(fresh, old...); err != nil {
				return err
			}
			res.KeyFile = filepath.Join(a.config.DataDir, secrets.KeyFile)
			res.NextAction = "restart every node (they read the key file at start), then run: parley admin master-key forget-previous"
		} else {
			if len(previous) == 0 {
				return usageError{"with PARLEY_MASTER_KEY, set the new key there and the old one in PARLEY_MASTER_KEY_PREVIOUS (on every node too), then rotate"}
			}
			if box, err = secrets.NewKeyring(primary, previous...); err != nil {
				return err
			}
			res.NextAction = "remove PARLEY_MASTER_KEY_PREVIOUS from every node and restart them"
		}
		res.KeyID, res.Accepted = box.KeyID(), box.KeyIDs()
		if res.Rewrapped, res.Resealed, err = a.st.RotateMasterKey(a.ctx, box); err != nil {
			return fmt.Errorf("rotate: %w (every key is still accepted; fix the cause and run rotate again)", err)
		}
		return a.print(res, func(w io.Writer) {
			fmt.Fprintf(w, "key id\t%s\naccepted\t%v\ndata keys re-wrapped\t%d\nvalues re-sealed\t%d\n", res.KeyID, res.Accepted, res.Rewrapped, res.Resealed)
			if res.KeyFile != "" {
				fmt.Fprintf(w, "key file\t%s\n", res.KeyFile)
			}
			fmt.Fprintf(w, "next\t%s\n", res.NextAction)
		})
	}
}

type keyStatusJSON struct {
	KeyID    string         `json:"key_id"`
	Accepted []string       `json:"accepted_key_ids"`
	DataKeys map[string]int `json:"data_keys_by_key_id"`
}

func masterKeyStatus(fs *flag.FlagSet) func(a *adminCtx) error {
	return func(a *adminCtx) error {
		primary, previous, err := a.keyring()
		if err != nil {
			return err
		}
		box, err := secrets.NewKeyring(primary, previous...)
		if err != nil {
			return err
		}
		counts, err := a.st.DataKeysByMasterKey(a.ctx)
		if err != nil {
			return err
		}
		res := keyStatusJSON{KeyID: box.KeyID(), Accepted: box.KeyIDs(), DataKeys: counts}
		return a.print(res, func(w io.Writer) {
			fmt.Fprintf(w, "key id\t%s\naccepted\t%v\n", res.KeyID, res.Accepted)
			ids := make([]string, 0, len(counts))
			for id := range counts {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			for _, id := range ids {
				fmt.Fprintf(w, "data keys wrapped by %s\t%d\n", id, counts[id])
			}
		})
	}
}

func masterKeyForget(fs *flag.FlagSet) func(a *adminCtx) error {
	return func(a *adminCtx) error {
		if a.config.MasterKey != "" {
			return usageError{"the keys come from PARLEY_MASTER_KEY: remove PARLEY_MASTER_KEY_PREVIOUS instead"}
		}
		primary, previous, err := a.keyring()
		if err != nil {
			return err
		}
		if len(previous) == 0 {
			fmt.Fprintln(a.out, "no previous key in the key file")
			return nil
		}
		box, err := secrets.NewBox(primary)
		if err != nil {
			return err
		}
		counts, err := a.st.DataKeysByMasterKey(a.ctx)
		if err != nil {
			return err
		}
		for id, n := range counts {
			if id != box.KeyID() && n > 0 {
				return fmt.Errorf("%d data keys are still wrapped by key %s: run parley admin master-key rotate first", n, id)
			}
		}
		if err := checkOpensWithPrimary(a, box); err != nil {
			return err
		}
		if err := secrets.WriteKeyFile(a.config.DataDir, primary); err != nil {
			return err
		}
		fmt.Fprintf(a.out, "kept only key %s in %s\n", box.KeyID(), filepath.Join(a.config.DataDir, secrets.KeyFile))
		return nil
	}
}

// checkOpensWithPrimary refuses to forget the previous keys while a trunk password or the key
// check opens only with them.
func checkOpensWithPrimary(a *adminCtx, box *secrets.Box) error {
	trunks, err := a.st.ListTrunks(a.ctx)
	if err != nil {
		return err
	}
	for _, t := range trunks {
		if _, err := t.Password(box); err != nil {
			return errors.New("a trunk password opens only with a previous key: run parley admin master-key rotate first")
		}
	}
	if check, err := a.st.GetSetting(a.ctx, store.SettingMasterKeyCheck); err == nil && !box.Verify(check) {
		return errors.New("the master key check opens only with a previous key: run parley admin master-key rotate first")
	}
	return nil
}
