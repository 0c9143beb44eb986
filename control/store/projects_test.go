package store

import (
	"testing"
	"time"
)

func TestProjectTimesFollowClock(t *testing.T) {
	s, c := clockStore(t)
	ctx := t.Context()
	o, err := s.CreateOrg(ctx, "Acme")
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.CreateProject(ctx, o.ID, "Web")
	if err != nil {
		t.Fatal(err)
	}
	t1 := c.now().Add(24 * time.Hour)
	c.set(t1)
	if err := s.SetProjectFrozen(ctx, p.ID, true); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetProject(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Frozen || !got.CreatedAt.Equal(p.CreatedAt) || !got.UpdatedAt.Equal(t1.Truncate(time.Microsecond)) {
		t.Fatalf("after freezing: %+v, want updated at %v", got, t1)
	}
}
