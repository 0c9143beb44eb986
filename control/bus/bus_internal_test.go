package bus

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestParseRedisURL(t *testing.T) {
	o, err := parseRedisURL("rediss://user:pw@cache.internal:6380/3?read_timeout=750ms")
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != "cache.internal:6380" || o.DB != 3 || o.Username != "user" || o.Password != "pw" || o.TLSConfig == nil {
		t.Errorf("parsed %+v", o)
	}
	b := boundedOptions(o)
	if b.ReadTimeout != 750*time.Millisecond {
		t.Errorf("ReadTimeout %s, want the URL's 750ms", b.ReadTimeout)
	}
	if b.DialTimeout != defaultDialTimeout || b.WriteTimeout != defaultWriteTimeout || b.PoolTimeout != defaultPoolTimeout {
		t.Errorf("unset timeouts not bounded: dial %s write %s pool %s", b.DialTimeout, b.WriteTimeout, b.PoolTimeout)
	}
	if b.MaxRetries != 1 || b.DialerRetries != 1 || !b.ContextTimeoutEnabled {
		t.Errorf("MaxRetries %d DialerRetries %d ContextTimeoutEnabled %v", b.MaxRetries, b.DialerRetries, b.ContextTimeoutEnabled)
	}
	if o.ContextTimeoutEnabled {
		t.Error("boundedOptions changed the caller's options")
	}
	if b := boundedOptions(&redis.Options{ReadTimeout: -1}); b.ReadTimeout != -1 {
		t.Errorf("an explicit 'no timeout' (-1) became %s", b.ReadTimeout)
	}
}

// FuzzParseRedisURL: any string gives options or an ErrInvalid error, never a panic, and an
// error never repeats a password.
func FuzzParseRedisURL(f *testing.F) {
	for _, s := range []string{
		"redis://localhost:6379/0", "rediss://u:p@h/1?dial_timeout=1s", "redis://[::1]:6379",
		"redis://h/1/2", "redis://h?db=x", "http://x", "", "redis://%zz", "redis://h:99999",
		"redis://:hunter2@h:6379/notanumber",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := parseRedisURL(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%q: error %v does not wrap ErrInvalid", s, err)
			}
			if u, perr := url.Parse(s); perr == nil {
				// Only a password that occurs nowhere else in the URL can be told apart.
				if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Count(s, pw) == 1 && strings.Contains(err.Error(), pw) {
					t.Fatalf("%q: error %q repeats the password", s, err)
				}
			}
			return
		}
		if o == nil || o.Addr == "" {
			t.Fatalf("%q: no error and no address", s)
		}
	})
}

func TestRoundTTL(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, 0},
		{time.Nanosecond, time.Millisecond},
		{time.Millisecond, time.Millisecond},
		{1500 * time.Microsecond, 2 * time.Millisecond},
		{time.Minute, time.Minute},
	} {
		if got := roundTTL(tc.in); got != tc.want {
			t.Errorf("roundTTL(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestCheckChannels(t *testing.T) {
	got, err := checkChannels([]string{"b", "a", "b", "c", "a"})
	if err != nil || !slices.Equal(got, []string{"b", "a", "c"}) {
		t.Errorf("checkChannels = %q, %v", got, err)
	}
	for _, bad := range [][]string{nil, {}, {""}, {"a", ""}} {
		if _, err := checkChannels(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("checkChannels(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}
