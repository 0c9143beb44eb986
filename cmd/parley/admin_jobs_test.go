package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/store"
)

// TestAdminJobs drives `parley admin jobs list|retry` on an embedded store holding dead jobs.
func TestAdminJobs(t *testing.T) {
	dataDir := t.TempDir()
	env := []string{"PARLEY_DATA_DIR=" + dataDir, "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL=", "PARLEY_MASTER_KEY="}
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var dead []store.JobID
	for i := range 3 {
		if _, _, err := st.EnqueueJob(ctx, store.NewJob{Kind: "webhook.deliver", MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
		js, err := st.ClaimJobs(ctx, store.ClaimJobs{Owner: "node-a", Kinds: []string{"webhook.deliver"}, Now: time.Now(), Lease: time.Minute, Limit: 1})
		if err != nil || len(js) != 1 {
			t.Fatalf("claim: %v %v", js, err)
		}
		if _, err := st.FailJob(ctx, js[0].Lease(), "connection refused\nsecond line "+strings.Repeat("x", i), time.Now(), nil); err != nil {
			t.Fatal(err)
		}
		dead = append(dead, js[0].ID)
	}
	if _, _, err := st.EnqueueJob(ctx, store.NewJob{Kind: "other", RunAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := runCLI(t, env, "admin", "jobs", "list", "--state", "dead", "--limit", "2", "--json")
	if code != 0 {
		t.Fatalf("jobs list: %d %s", code, errOut)
	}
	var page struct {
		Jobs []struct {
			ID, Kind, State, LastError string `json:",omitempty"`
			Attempts                   int
		} `json:"jobs"`
		NextBefore string `json:"next_before"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(page.Jobs) != 2 || page.Jobs[0].ID != string(dead[2]) || page.Jobs[1].ID != string(dead[1]) || page.NextBefore != string(dead[1]) {
		t.Fatalf("first page of dead jobs: %s", out)
	}
	out, _, code = runCLI(t, env, "admin", "jobs", "list", "--state", "dead", "--before", page.NextBefore)
	if code != 0 || !strings.Contains(out, string(dead[0])) || strings.Contains(out, string(dead[1])) ||
		!strings.Contains(out, "connection refused") || strings.Contains(out, "second line") || strings.Contains(out, "other") {
		t.Fatalf("second page, as a table: %s", out)
	}
	if _, errOut, code := runCLI(t, env, "admin", "jobs", "list", "--state", "zombie"); code != 2 || !strings.Contains(errOut, "zombie") {
		t.Fatalf("bad state: %d %s", code, errOut)
	}

	out, errOut, code = runCLI(t, env, "admin", "jobs", "retry", string(dead[0]))
	if code != 0 || !strings.Contains(out, "queued again") {
		t.Fatalf("jobs retry: %d %s %s", code, out, errOut)
	}
	if j, err := st.GetJob(ctx, dead[0]); err != nil || j.State != store.JobQueued || j.Attempts != 0 {
		t.Fatalf("retried job: %+v %v", j, err)
	}
	if _, errOut, code := runCLI(t, env, "admin", "jobs", "retry", string(dead[0])); code != 1 || !strings.Contains(errOut, "only a dead job") {
		t.Fatalf("retrying a queued job: %d %s", code, errOut)
	}
}
