package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/control/config"
)

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, rest, err := config.Parse("parley serve", config.ScopeServe, args, nil, stdout, nil)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", rest[0])}
	}
	log := cfg.NewLogger(stderr)
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(cfg.GCPercent)
	}
	node, err := control.NewNode(ctx, cfg, log, stdout)
	if err != nil {
		return err
	}
	return node.Run(ctx)
}

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, _, err := config.Parse("parley migrate", config.ScopeStore, args, nil, stdout, nil)
	if err != nil {
		return err
	}
	log := cfg.NewLogger(stderr)
	st, err := control.OpenStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	applied, err := st.Migrate(ctx)
	if err != nil {
		return err
	}
	v, err := st.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "store (%s) at schema version %d; applied now: %v\n", st.Dialect(), v, applied)
	return nil
}
