package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/control/config"
	"github.com/parley-voice/parley/internal/procs"
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
	if cfg.LowLoadTuning {
		lowLoadTuning(ctx, log)
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

// restart starts the binary again in place of this process with env (syscall.Exec: the same
// pid, open descriptors closed on exec). main sets it; tests run commands in their own process
// and leave it nil.
var restart func(env []string) error

// lowLoadTuning applies PARLEY_LOW_LOAD_TUNING (internal/procs): GODEBUG's scheduler trace at its
// longest period, which the runtime reads only at start, so the process starts itself again with
// it once; then GOMAXPROCS follows the load, unless the environment fixes it.
func lowLoadTuning(ctx context.Context, log *slog.Logger) {
	if v, add := procs.SysmonEnv(os.Getenv("GODEBUG")); add && restart != nil {
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GODEBUG=") })
		err := restart(append(env, "GODEBUG="+v))
		log.Warn("could not start again with GODEBUG for low-load tuning; going on without it", "err", err)
	}
	if os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) < 2 {
		return
	}
	a := procs.New(procs.Options{})
	log.Debug("low-load tuning: GOMAXPROCS follows the load", "max", runtime.GOMAXPROCS(0))
	go a.Run(ctx)
}
