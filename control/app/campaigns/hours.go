package campaigns

import (
	"fmt"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // every IANA zone, whatever the host has: a contact's zone never silently fails to load

	"github.com/parley-voice/parley/control/jsoncheck"
)

// CallingHours is when a campaign's calls may start, read on the wall clock of each contact's
// own time zone (the organization's for a contact without one).
type CallingHours struct {
	StartHour int      `json:"start_hour" doc:"The hour calls may start from, 0 to 23, on the contact's wall clock." jsonschema:"minimum=0,maximum=23"`
	EndHour   int      `json:"end_hour" doc:"The hour calls stop starting, 1 to 24 (24: midnight), after start_hour." jsonschema:"minimum=1,maximum=24"`
	Days      []string `json:"days,omitempty" doc:"The days calls may start on; every day when omitted or empty." jsonschema:"maxItems=7,enum=mon,enum=tue,enum=wed,enum=thu,enum=fri,enum=sat,enum=sun"`
}

// SchemaDoc describes the object in the document.
func (CallingHours) SchemaDoc() string {
	return "When calls may start: from start_hour to end_hour on the given days, read on the wall clock of the contact's time zone, the organization's for a contact without one. Daylight saving time changes the hours in UTC, never on the wall clock."
}

var weekdays = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

// check returns the problems of the hours, relative to the object.
func (h CallingHours) check() []jsoncheck.Problem {
	var ps []jsoncheck.Problem
	if h.EndHour <= h.StartHour {
		ps = append(ps, jsoncheck.Problem{Pointer: "/end_hour", Code: "invalid_value", Detail: "end_hour must be after start_hour (calling hours do not run past midnight)."})
	}
	for i, d := range h.Days {
		if _, ok := weekdays[d]; !ok {
			ps = append(ps, jsoncheck.Problem{Pointer: fmt.Sprintf("/days/%d", i), Code: "invalid_value", Detail: fmt.Sprintf("%q is not a day: use mon … sun.", d)})
		}
	}
	return ps
}

// allows reports whether day is one of the days (every day when none is named).
func (h CallingHours) allows(day time.Weekday) bool {
	if len(h.Days) == 0 {
		return true
	}
	return slices.ContainsFunc(h.Days, func(d string) bool { return weekdays[d] == day })
}

// Open reports whether calls may start at t in loc: the wall clock there is within the hours.
func (h *CallingHours) Open(t time.Time, loc *time.Location) bool {
	if h == nil {
		return true
	}
	l := t.In(loc)
	return h.allows(l.Weekday()) && l.Hour() >= h.StartHour && l.Hour() < h.EndHour
}

// NextOpening returns t when the hours are open at t in loc, else the first moment after t
// when they open: the start hour on the next allowed day, on the wall clock of loc. On a day
// when the start hour does not exist (the clocks jump over it) it is the first moment after
// the jump.
func (h *CallingHours) NextOpening(t time.Time, loc *time.Location) time.Time {
	if h.Open(t, loc) {
		return t
	}
	l := t.In(loc)
	for i := 0; i <= 8; i++ {
		y, m, d := l.Date()
		day := time.Date(y, m, d+i, 12, 0, 0, 0, loc) // noon: never skipped by a DST change
		if !h.allows(day.Weekday()) {
			continue
		}
		open := time.Date(y, m, d+i, h.StartHour, 0, 0, 0, loc)
		if open.In(loc).Hour() != h.StartHour { // the hour was skipped: open after the jump
			open = open.Truncate(time.Hour)
			for open.In(loc).Hour() < h.StartHour {
				open = open.Add(time.Hour)
			}
		}
		if open.After(t) && h.Open(open, loc) {
			return open
		}
	}
	return t.Add(24 * time.Hour) // unreachable for checked hours
}

// loadZone loads an IANA time zone name; "" and Local are refused.
func loadZone(name string) (*time.Location, error) {
	if name == "" || strings.EqualFold(name, "local") {
		return nil, fmt.Errorf("%q is not a time zone name", name)
	}
	return time.LoadLocation(name)
}
