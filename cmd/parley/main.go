// Command parley is the one Parley binary: serve, migrate, admin, fakes and version.
//
// main only reads the command line and handles signals: the first SIGINT/SIGTERM starts a
// graceful drain, a second one forces the stop. The work lives in the packages under control/.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		<-sigs
		fmt.Fprintln(os.Stderr, "parley: second signal, stopping now")
		os.Exit(2)
	}()
	restart = func(env []string) error {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		return syscall.Exec(exe, os.Args, env)
	}
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
