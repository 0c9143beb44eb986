package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/parley-voice/parley/control/config"
)

// command is one node of the command tree; leaves have run, inner nodes have subs.
type command struct {
	name  string
	short string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	subs  []*command
}

func root() *command {
	return &command{name: "parley", subs: []*command{
		{name: "serve", short: "run the service (roles api, media, worker)", run: cmdServe},
		{name: "migrate", short: "apply the store's migrations and exit", run: cmdMigrate},
		adminCommand(),
		{name: "fakes", short: "serve local fakes of every paid vendor (keyless demo, tests, benchmark)", run: cmdFakes},
		{name: "demo", short: "hear an agent: a scripted voice call through the real engine and the fakes, recorded to a WAV", run: cmdDemo},
		{name: "version", short: "print the version", run: cmdVersion},
	}}
}

// usageError is an error whose message is a usage hint; it exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := root()
	path := []string{c.name}
	for c.run == nil {
		if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			printHelp(stdout, path, c)
			if len(args) == 0 {
				return 2
			}
			return 0
		}
		next := find(c, args[0])
		if next == nil {
			fmt.Fprintf(stderr, "%s: unknown command %q (see %s --help)\n", strings.Join(path, " "), args[0], strings.Join(path, " "))
			return 2
		}
		c, args, path = next, args[1:], append(path, next.name)
	}
	err := c.run(withCommandPath(ctx, strings.Join(path, " ")), args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, config.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "%s: %v\n", strings.Join(path, " "), err)
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", strings.Join(path, " "), oneLine(err))
		return 1
	}
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

func find(c *command, name string) *command {
	for _, s := range c.subs {
		if s.name == name {
			return s
		}
	}
	return nil
}

func printHelp(w io.Writer, path []string, c *command) {
	fmt.Fprintf(w, "Usage: %s <command> [flags]\n\nCommands:\n", strings.Join(path, " "))
	subs := append([]*command(nil), c.subs...)
	sort.SliceStable(subs, func(i, j int) bool { return false })
	for _, s := range subs {
		fmt.Fprintf(w, "  %-10s %s\n", s.name, s.short)
	}
	fmt.Fprintf(w, "\nRun '%s <command> --help' for a command's flags.\n", strings.Join(path, " "))
}

type commandPathKey struct{}

// withCommandPath tells a command the words that called it ("parley admin keys revoke"), for
// its usage line.
func withCommandPath(ctx context.Context, path string) context.Context {
	return context.WithValue(ctx, commandPathKey{}, path)
}

// commandPath is the words that called the running command, or def.
func commandPath(ctx context.Context, def string) string {
	if p, ok := ctx.Value(commandPathKey{}).(string); ok && p != "" {
		return p
	}
	return def
}
