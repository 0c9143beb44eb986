package app

import (
	"bytes"
	"time"
)

// TimeLayout is how the API writes an instant: RFC 3339 with exactly six fractional digits
// (microseconds, the precision both stores keep), so every timestamp of every answer, event and
// webhook body has the same length and sorts as text within one offset.
const TimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// Time is an instant in an answer. It writes itself with TimeLayout; reading accepts any
// RFC 3339 form. The API's schema reflector documents it as a date-time string.
type Time struct{ time.Time }

// T is t in UTC, as answers carry it. (A time that must keep its zone's offset, such as the
// start of a billing month, is Time{t}.)
func T(t time.Time) Time { return Time{t.UTC()} }

// TP is a nullable T: nil for nil or the zero time.
func TP(t *time.Time) *Time {
	if t == nil || t.IsZero() {
		return nil
	}
	v := T(*t)
	return &v
}

// MarshalJSON writes the instant with TimeLayout.
func (t Time) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(TimeLayout)+2)
	b = append(b, '"')
	b = t.Time.Truncate(time.Microsecond).AppendFormat(b, TimeLayout)
	return append(b, '"'), nil
}

// UnmarshalJSON reads an RFC 3339 instant (any number of fractional digits).
func (t *Time) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	return t.Time.UnmarshalJSON(b)
}

// MarshalText and UnmarshalText make Time usable as a query or map key too.
func (t Time) MarshalText() ([]byte, error) {
	return t.Time.Truncate(time.Microsecond).AppendFormat(nil, TimeLayout), nil
}

// UnmarshalText reads an RFC 3339 instant.
func (t *Time) UnmarshalText(b []byte) error { return t.Time.UnmarshalText(b) }
