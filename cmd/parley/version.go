package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version and commit are set at build time with -ldflags "-X main.version=… -X main.commit=…".
var (
	version = "dev"
	commit  = ""
)

func buildCommit() string {
	if commit != "" {
		return commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

func cmdVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fmt.Fprintf(stdout, "parley %s (commit %s, %s, %s/%s)\n", version, buildCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
