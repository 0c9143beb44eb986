package calls

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/parley-voice/parley/control/jsoncheck"
)

// CallWindow is when a call may start: between Start and End ("HH:MM", 24-hour clock) on the
// given days (lowercase "mon" … "sun"; none means every day), read in Timezone (an IANA name;
// empty: the organization's). An End before Start runs past midnight into the next day; the
// day named is the day the window opens.
type CallWindow struct {
	Timezone string   `json:"timezone,omitempty" doc:"An IANA time zone name, such as Europe/Paris; the organization's when omitted." jsonschema:"minLength=1,maxLength=64"`
	Start    string   `json:"start" doc:"HH:MM, 24-hour clock." jsonschema:"pattern=^([01][0-9]|2[0-3]):[0-5][0-9]$"`
	End      string   `json:"end" doc:"HH:MM; an end before start runs past midnight." jsonschema:"pattern=^([01][0-9]|2[0-3]):[0-5][0-9]$"`
	Days     []string `json:"days,omitempty" doc:"The days the window opens on; every day when omitted or empty." jsonschema:"maxItems=7,enum=mon,enum=tue,enum=wed,enum=thu,enum=fri,enum=sat,enum=sun"`
}

// SchemaDoc describes the object in the document.
func (CallWindow) SchemaDoc() string { return "When a call may start, read in timezone." }

// Window is a checked CallWindow.
type Window struct {
	loc        *time.Location
	start, end int // minutes after midnight
	days       [7]bool
}

var hhmm = regexp.MustCompile(`^([01][0-9]|2[0-3]):([0-5][0-9])$`)

var dayNames = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

// Parse checks the window. Problems name each place that does not fit, by JSON pointer
// relative to the window object; defaultTZ is used when the window names no time zone.
func (cw CallWindow) Parse(defaultTZ string) (*Window, []jsoncheck.Problem) {
	var ps []jsoncheck.Problem
	w := &Window{}
	tz := cw.Timezone
	if tz == "" {
		tz = defaultTZ
	}
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "Local" {
		ps = append(ps, jsoncheck.Problem{Pointer: "/timezone", Code: "invalid_value", Detail: fmt.Sprintf("%q is not a time zone name (such as Europe/Paris).", tz)})
	}
	w.loc = loc
	minutes := func(name, s string) int {
		m := hhmm.FindStringSubmatch(s)
		if m == nil {
			ps = append(ps, jsoncheck.Problem{Pointer: "/" + name, Code: "invalid_format", Detail: fmt.Sprintf("%s must be HH:MM on a 24-hour clock, not %q.", name, s)})
			return -1
		}
		h, _ := strconv.Atoi(m[1])
		mm, _ := strconv.Atoi(m[2])
		return h*60 + mm
	}
	w.start, w.end = minutes("start", cw.Start), minutes("end", cw.End)
	if w.start >= 0 && w.start == w.end {
		ps = append(ps, jsoncheck.Problem{Pointer: "/end", Code: "invalid_value", Detail: "end must differ from start (an end before start runs past midnight)."})
	}
	if len(cw.Days) == 0 {
		for i := range w.days {
			w.days[i] = true
		}
	}
	for i, d := range cw.Days {
		wd, ok := dayNames[d]
		if !ok {
			ps = append(ps, jsoncheck.Problem{Pointer: fmt.Sprintf("/days/%d", i), Code: "invalid_value", Detail: fmt.Sprintf("%q is not a day: use mon, tue, wed, thu, fri, sat or sun.", d)})
			continue
		}
		w.days[wd] = true
	}
	if len(ps) > 0 {
		return nil, ps
	}
	return w, nil
}

// length is how long the window stays open once it opens.
func (w *Window) length() time.Duration {
	d := w.end - w.start
	if d <= 0 {
		d += 24 * 60
	}
	return time.Duration(d) * time.Minute
}

// NextOpening returns t when the window is open at t, else the next moment it opens after t.
// ok is false only for a window that never opens (no day), which Parse does not return.
func (w *Window) NextOpening(t time.Time) (at time.Time, ok bool) {
	local := t.In(w.loc)
	y, m, d := local.Date()
	var best time.Time
	// The window that opened yesterday may still be open (past midnight); look a week ahead.
	for i := -1; i <= 7; i++ {
		day := time.Date(y, m, d+i, 0, 0, 0, 0, w.loc)
		if !w.days[day.Weekday()] {
			continue
		}
		open := time.Date(y, m, d+i, w.start/60, w.start%60, 0, 0, w.loc)
		end := open.Add(w.length())
		if !t.Before(open) && t.Before(end) {
			return t, true
		}
		if open.After(t) && (best.IsZero() || open.Before(best)) {
			best = open
		}
	}
	return best, !best.IsZero()
}

// Open reports whether the window is open at t.
func (w *Window) Open(t time.Time) bool {
	at, ok := w.NextOpening(t)
	return ok && at.Equal(t)
}
