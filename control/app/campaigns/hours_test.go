package campaigns

import (
	"testing"
	"time"
)

// TestCallingHoursAcrossDST: calling hours are read on each contact's wall clock, right across
// daylight saving time changes, in three zones that change on different dates (or never).
func TestCallingHoursAcrossDST(t *testing.T) {
	h := &CallingHours{StartHour: 9, EndHour: 17, Days: []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}}
	zone := func(name string) *time.Location {
		loc, err := loadZone(name)
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	ny, paris, tokyo := zone("America/New_York"), zone("Europe/Paris"), zone("Asia/Tokyo")
	utc := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name string
		loc  *time.Location
		now  string
		open bool
		next string // the next opening, in UTC
	}{
		// New York springs forward on 2026-03-08: 9:00 is 14:00 UTC the day before, 13:00 UTC after.
		{"NY before the change, 8:59 EST", ny, "2026-03-07T13:59:00Z", false, "2026-03-07T14:00:00Z"},
		{"NY before the change, 9:00 EST", ny, "2026-03-07T14:00:00Z", true, ""},
		{"NY day of the change, 8:30 EDT", ny, "2026-03-08T12:30:00Z", false, "2026-03-08T13:00:00Z"},
		{"NY day of the change, 9:00 EDT", ny, "2026-03-08T13:00:00Z", true, ""},
		{"NY after 17:00 EDT: tomorrow 9:00 EDT", ny, "2026-03-08T21:00:00Z", false, "2026-03-09T13:00:00Z"},
		// Paris changes three weeks later (2026-03-29): 9:00 is 08:00 UTC before, 07:00 UTC after.
		{"Paris the Saturday before, 16:59 CET", paris, "2026-03-28T15:59:00Z", true, ""},
		{"Paris the Saturday before, 17:00 CET", paris, "2026-03-28T16:00:00Z", false, "2026-03-29T07:00:00Z"},
		{"Paris after the change, 8:59 CEST", paris, "2026-03-29T06:59:00Z", false, "2026-03-29T07:00:00Z"},
		// Autumn: Paris falls back on 2026-10-25: 9:00 CET is 08:00 UTC.
		{"Paris falls back, 8:30 CET", paris, "2026-10-25T07:30:00Z", false, "2026-10-25T08:00:00Z"},
		// Tokyo never changes: 9:00 JST is 00:00 UTC all year.
		{"Tokyo in March", tokyo, "2026-03-08T00:00:00Z", true, ""},
		{"Tokyo at night", tokyo, "2026-03-08T12:00:00Z", false, "2026-03-09T00:00:00Z"},
	}
	for _, c := range cases {
		now := utc(c.now)
		if got := h.Open(now, c.loc); got != c.open {
			t.Errorf("%s: open %v, want %v", c.name, got, c.open)
		}
		next := h.NextOpening(now, c.loc)
		want := now
		if c.next != "" {
			want = utc(c.next)
		}
		if !next.Equal(want) {
			t.Errorf("%s: next opening %s, want %s", c.name, next.UTC(), want.UTC())
		}
	}
	// A start hour the clocks jump over (2:00 on the night New York springs forward) opens at 3:00.
	night := &CallingHours{StartHour: 2, EndHour: 5}
	if got := night.NextOpening(utc("2026-03-08T05:00:00Z"), ny); !got.Equal(utc("2026-03-08T07:00:00Z")) {
		t.Errorf("skipped hour: %s", got.UTC())
	}
	// Weekdays only: Friday 17:00 waits for Monday 9:00.
	weekdays := &CallingHours{StartHour: 9, EndHour: 17, Days: []string{"mon", "tue", "wed", "thu", "fri"}}
	if got := weekdays.NextOpening(utc("2026-03-06T22:00:00Z"), ny); !got.Equal(utc("2026-03-09T13:00:00Z")) {
		t.Errorf("weekend: %s", got.UTC())
	}
	// No hours: always open.
	var none *CallingHours
	if !none.Open(utc("2026-03-08T03:00:00Z"), ny) {
		t.Error("no calling hours must be open")
	}
}

// TestLoadZone: an unknown zone, "" and Local are refused, never silently UTC.
func TestLoadZone(t *testing.T) {
	for _, bad := range []string{"", "Local", "local", "Mars/Olympus", "../etc/passwd"} {
		if _, err := loadZone(bad); err == nil {
			t.Errorf("%q loaded", bad)
		}
	}
	if loc := zoneOf("Nowhere/City", "Europe/Paris"); loc.String() != "Europe/Paris" {
		t.Errorf("fallback %s", loc)
	}
}

func TestOutcomesAndRetries(t *testing.T) {
	for reason, want := range map[string]string{"no_answer": "no_answer", "busy": "busy", "voicemail": "voicemail",
		"invalid_number": "failed", "failed": "failed", "callee_hung_up": "completed", "agent_ended": "completed", "ended_by_api": "completed"} {
		if got := outcomeOf(reason); got != want {
			t.Errorf("%s → %s, want %s", reason, got, want)
		}
	}
	cb := CampaignCallbacks{DelaySeconds: 60, Backoff: 2}
	for n, want := range map[int]time.Duration{1: time.Minute, 2: 2 * time.Minute, 3: 4 * time.Minute} {
		if got := retryDelay(cb, n); got != want {
			t.Errorf("after %d attempts: %s, want %s", n, got, want)
		}
	}
}
