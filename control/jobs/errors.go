package jobs

import "errors"

// Sentinel errors.
var (
	// ErrLeaseLost: the worker no longer holds the job (its lease ran out and another claim
	// took it). The handler's ctx is cancelled with it as the cause, and CompleteIn returns it.
	ErrLeaseLost = errors.New("jobs: lease lost")
	// ErrRunning: Run was called on a worker that runs already, or Register or Every after Run.
	ErrRunning = errors.New("jobs: worker already running")
	// ErrNoHandlers: Run was called on a worker with no handler registered.
	ErrNoHandlers = errors.New("jobs: no handler registered")
)
