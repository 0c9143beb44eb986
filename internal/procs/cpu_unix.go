//go:build unix

package procs

import (
	"syscall"
	"time"
)

// processCPU is the process's user plus system CPU time; -1 when it cannot be read.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
