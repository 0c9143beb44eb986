package stt_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package when goroutines of the adapters or of the fakes outlive the
// tests: every stream, connection and fake must be closed and waited for.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaks := leakedGoroutines("parley/media/stt.", "parley/session/fakes."); leaks != "" {
			fmt.Fprintf(os.Stderr, "goroutines leaked by the tests:\n\n%s\n", leaks)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines polls (up to 2 s) until no goroutine runs code of the given packages and
// returns the stacks of those that remain.
func leakedGoroutines(pkgs ...string) string {
	deadline := time.Now().Add(2 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		var leaks []string
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			for _, p := range pkgs {
				if strings.Contains(g, p) {
					leaks = append(leaks, g)
					break
				}
			}
		}
		if len(leaks) == 0 || time.Now().After(deadline) {
			return strings.Join(leaks, "\n\n")
		}
		time.Sleep(10 * time.Millisecond) // polling interval, bounded by the deadline above
	}
}
