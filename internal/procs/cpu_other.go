//go:build !unix

package procs

import "time"

// processCPU is not measured here: the adapter stays at every processor.
func processCPU() time.Duration { return -1 }
