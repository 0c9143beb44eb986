package calls

import (
	"testing"
	"time"
)

func TestWindowNextOpening(t *testing.T) {
	paris, _ := time.LoadLocation("Europe/Paris")
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.ParseInLocation("2006-01-02 15:04", s, paris)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// 2026-03-02 is a Monday.
	cases := []struct {
		name string
		w    CallWindow
		now  string
		want string
	}{
		{"inside", CallWindow{Timezone: "Europe/Paris", Start: "09:00", End: "17:00"}, "2026-03-02 10:00", "2026-03-02 10:00"},
		{"at the opening", CallWindow{Timezone: "Europe/Paris", Start: "09:00", End: "17:00"}, "2026-03-02 09:00", "2026-03-02 09:00"},
		{"at the close", CallWindow{Timezone: "Europe/Paris", Start: "09:00", End: "17:00"}, "2026-03-02 17:00", "2026-03-03 09:00"},
		{"before", CallWindow{Timezone: "Europe/Paris", Start: "09:00", End: "17:00"}, "2026-03-02 07:30", "2026-03-02 09:00"},
		{"weekdays from friday night", CallWindow{Timezone: "Europe/Paris", Start: "09:00", End: "17:00", Days: []string{"mon", "tue", "wed", "thu", "fri"}}, "2026-03-06 18:00", "2026-03-09 09:00"},
		{"past midnight, late", CallWindow{Timezone: "Europe/Paris", Start: "22:00", End: "02:00", Days: []string{"mon"}}, "2026-03-03 01:00", "2026-03-03 01:00"},
		{"past midnight, after", CallWindow{Timezone: "Europe/Paris", Start: "22:00", End: "02:00", Days: []string{"mon"}}, "2026-03-03 03:00", "2026-03-09 22:00"},
		{"only sunday", CallWindow{Timezone: "Europe/Paris", Start: "10:00", End: "11:00", Days: []string{"sun"}}, "2026-03-02 12:00", "2026-03-08 10:00"},
		{"spring forward", CallWindow{Timezone: "Europe/Paris", Start: "08:00", End: "09:00"}, "2026-03-29 01:00", "2026-03-29 08:00"},
	}
	for _, c := range cases {
		w, ps := c.w.Parse("UTC")
		if ps != nil {
			t.Fatalf("%s: %v", c.name, ps)
		}
		got, ok := w.NextOpening(at(c.now))
		if !ok || !got.Equal(at(c.want)) {
			t.Errorf("%s: NextOpening(%s) = %v, want %s", c.name, c.now, got.In(paris), c.want)
		}
		if w.Open(at(c.now)) != (c.now == c.want) {
			t.Errorf("%s: Open disagrees", c.name)
		}
	}
}

func TestWindowParse(t *testing.T) {
	cases := []struct {
		name string
		w    CallWindow
		want []string // pointers
	}{
		{"ok", CallWindow{Timezone: "America/New_York", Start: "08:30", End: "20:00", Days: []string{"sat"}}, nil},
		{"default zone", CallWindow{Start: "08:30", End: "20:00"}, nil},
		{"bad zone", CallWindow{Timezone: "Mars/Olympus", Start: "08:30", End: "20:00"}, []string{"/timezone"}},
		{"local is not a zone name", CallWindow{Timezone: "Local", Start: "08:30", End: "20:00"}, []string{"/timezone"}},
		{"bad times", CallWindow{Start: "8:30", End: "24:00"}, []string{"/start", "/end"}},
		{"same times", CallWindow{Start: "08:30", End: "08:30"}, []string{"/end"}},
		{"bad day", CallWindow{Start: "08:30", End: "09:00", Days: []string{"mon", "Monday"}}, []string{"/days/1"}},
	}
	for _, c := range cases {
		_, ps := c.w.Parse("UTC")
		var got []string
		for _, p := range ps {
			got = append(got, p.Pointer)
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: problems %v, want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: problems %v, want %v", c.name, got, c.want)
			}
		}
	}
}

func FuzzCallWindow(f *testing.F) {
	f.Add("Europe/Paris", "09:00", "17:00", "mon", int64(1772438400))
	f.Add("", "22:00", "02:00", "sun", int64(0))
	f.Add("UTC", "xx", "", "", int64(-1))
	f.Fuzz(func(t *testing.T, tz, start, end, day string, unix int64) {
		w, ps := CallWindow{Timezone: tz, Start: start, End: end, Days: []string{day}}.Parse("UTC")
		if ps != nil {
			return
		}
		now := time.Unix(unix%(1<<40), 0)
		at, ok := w.NextOpening(now)
		if !ok {
			t.Fatal("a parsed window never opens")
		}
		if at.Before(now) || at.Sub(now) > 8*24*time.Hour {
			t.Fatalf("opening %v for %v", at, now)
		}
		if !w.Open(at) {
			t.Fatalf("the window is not open at its opening %v", at)
		}
	})
}
