package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// jobsCommand is `parley admin jobs list|retry`: the job queue (scheduled-call dialling,
// purges, the reaper), and above all its dead jobs, kept until the operator retries them or
// they are purged after 30 days.
func jobsCommand() *command {
	return &command{name: "jobs", short: "the job queue", subs: []*command{
		{name: "list", short: "list jobs, newest first (--state queued|running|done|dead, --kind, --limit, --before cursor)", run: adminLeaf(jobsList)},
		{name: "retry", short: "put a dead job back in the queue by id, its attempts counted from zero", run: adminLeaf(jobsRetry)},
	}}
}

// jobJSON is the admin view of a job.
type jobJSON struct {
	ID             string          `json:"id"`
	Kind           string          `json:"kind"`
	State          string          `json:"state"`
	Payload        json.RawMessage `json:"payload"`
	DedupeKey      string          `json:"dedupe_key,omitempty"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"max_attempts"`
	NextAttemptAt  time.Time       `json:"next_attempt_at"`
	LeaseOwner     string          `json:"lease_owner,omitempty"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at,omitempty"`
	LastError      string          `json:"last_error,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	FinishedAt     *time.Time      `json:"finished_at,omitempty"`
}

func toJobJSON(j store.Job) jobJSON {
	return jobJSON{ID: string(j.ID), Kind: j.Kind, State: j.State, Payload: j.Payload, DedupeKey: j.DedupeKey, Attempts: j.Attempts,
		MaxAttempts: j.MaxAttempts, NextAttemptAt: j.NextAttemptAt.UTC(), LeaseOwner: j.LeaseOwner, LeaseExpiresAt: j.LeaseExpiresAt,
		LastError: j.LastError, CreatedAt: j.CreatedAt.UTC(), FinishedAt: j.FinishedAt}
}

// jobsPage is what `jobs list --json` prints: a page and the cursor of the next one.
type jobsPage struct {
	Jobs       []jobJSON `json:"jobs"`
	NextBefore string    `json:"next_before,omitempty"`
}

func jobsList(fs *flag.FlagSet) func(a *adminCtx) error {
	state := fs.String("state", "", "only jobs in this state: queued, running, done or dead")
	kind := fs.String("kind", "", "only jobs of this kind, such as scheduled_calls.dial_due")
	limit := fs.Int("limit", 50, "jobs per page, 1 to 1000")
	before := fs.String("before", "", "the cursor a previous page printed: list the jobs older than this one")
	return func(a *adminCtx) error {
		if *state != "" && !slices.Contains([]string{store.JobQueued, store.JobRunning, store.JobDone, store.JobDead}, *state) {
			return usageError{fmt.Sprintf("--state %q: want queued, running, done or dead", *state)}
		}
		if *limit < 1 || *limit > 1000 {
			return usageError{"--limit must be between 1 and 1000"}
		}
		f := store.JobFilter{State: *state, Kind: *kind, Limit: *limit}
		if *before != "" {
			id, err := store.ParseID[store.JobID](*before)
			if err != nil {
				return usageError{"--before is not a job id"}
			}
			f.BeforeID = id
		}
		js, err := a.st.ListJobs(a.ctx, f)
		if err != nil {
			return err
		}
		page := jobsPage{Jobs: make([]jobJSON, 0, len(js))}
		for _, j := range js {
			page.Jobs = append(page.Jobs, toJobJSON(j))
		}
		if len(js) == *limit {
			page.NextBefore = string(js[len(js)-1].ID)
		}
		return a.print(page, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tKIND\tSTATE\tATTEMPTS\tNEXT ATTEMPT\tFINISHED\tLAST ERROR")
			for _, j := range page.Jobs {
				next := "-"
				if j.State == store.JobQueued {
					next = j.NextAttemptAt.Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", j.ID, j.Kind, j.State, j.Attempts, j.MaxAttempts, next,
					fmtTime(j.FinishedAt), cell(j.LastError, 80))
			}
			if page.NextBefore != "" {
				fmt.Fprintf(w, "(more: --before %s)\n", page.NextBefore)
			}
		})
	}
}

func jobsRetry(fs *flag.FlagSet) func(a *adminCtx) error {
	return func(a *adminCtx) error {
		raw, err := a.oneArg("job id")
		if err != nil {
			return err
		}
		id, err := store.ParseID[store.JobID](raw)
		if err != nil {
			return usageError{fmt.Sprintf("%q is not a job id", raw)}
		}
		j, err := a.st.RequeueJob(a.ctx, id, time.Now())
		if errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("job %s is %s; only a dead job can be retried", id, j.State)
		}
		if err != nil {
			return err
		}
		out := toJobJSON(j)
		return a.print(out, func(w io.Writer) { fmt.Fprintf(w, "job %s (%s) queued again\n", out.ID, out.Kind) })
	}
}

// cell shortens s to its first line and at most n characters, for a table cell.
func cell(s string, n int) string {
	if s == "" {
		return "-"
	}
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}
