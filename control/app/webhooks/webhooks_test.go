package webhooks

import (
	"strings"
	"testing"
	"time"
)

// TestSignVector: the Standard Webhooks specification's example signs to its published value.
func TestSignVector(t *testing.T) {
	got, err := Sign([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if err != nil || got != "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" {
		t.Fatalf("Sign = %q, %v", got, err)
	}
	two, _ := Sign([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", NewSecret()}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if parts := strings.Split(two, " "); len(parts) != 2 || parts[0] != got || !strings.HasPrefix(parts[1], "v1,") {
		t.Fatalf("two secrets sign %q", two)
	}
}

func TestNewSecret(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	if a == b || !strings.HasPrefix(a, "whsec_") || len(a) != len("whsec_")+44 {
		t.Fatalf("secrets %q %q", a, b)
	}
}

func TestParseSchedule(t *testing.T) {
	got, err := ParseSchedule("5s, 5m,30m")
	if err != nil || len(got) != 3 || got[1] != 5*time.Minute {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", "5x", "-1s", strings.Repeat("1s,", 21) + "1s"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestJitter(t *testing.T) {
	for range 100 {
		if d := jitter(10 * time.Second); d < 10*time.Second || d > 12*time.Second {
			t.Fatalf("jitter %s", d)
		}
	}
}
