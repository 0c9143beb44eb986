package audit

import (
	"context"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/store"
)

// TestPurge keeps 365 days of every organization's log and deletes what is older.
func TestPurge(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	var orgs []store.Org
	for _, name := range []string{"Acme", "Globex"} {
		o, err := st.CreateOrg(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		orgs = append(orgs, o)
		for _, age := range []time.Duration{Retention + time.Hour, Retention - time.Hour, time.Hour} {
			err := st.InsertAudit(ctx, store.AuditEvent{OrgID: o.ID, ActorType: store.ActorSystem, ActorID: "test",
				Action: "agent.created", ObjectType: "agent", ObjectID: "a", CreatedAt: now.Add(-age)})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	s := &Service{Store: st, Now: func() time.Time { return now }}
	if n, err := s.Purge(ctx, now); err != nil || n != 2 {
		t.Fatalf("Purge = %d, %v; want the two events older than 365 days", n, err)
	}
	if n, err := s.Purge(ctx, now); err != nil || n != 0 {
		t.Fatalf("second Purge = %d, %v", n, err)
	}
	// What is left is listed, oldest first, but not the event of the last minute.
	st.InsertAudit(ctx, store.AuditEvent{OrgID: orgs[0].ID, ActorType: store.ActorSystem, ActorID: "test",
		Action: "agent.deleted", ObjectType: "agent", ObjectID: "a", CreatedAt: now.Add(-30 * time.Second)})
	es, err := s.List(ctx, app.OperatorActor(orgs[0], "test"), Filter{}, store.Page{Limit: 10})
	if err != nil || len(es) != 2 || !es[0].CreatedAt.Equal(now.Add(-(Retention - time.Hour))) || es[1].Action != "agent.created" {
		t.Fatalf("List = %+v, %v", es, err)
	}
}
