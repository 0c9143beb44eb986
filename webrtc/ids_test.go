package webrtc

import (
	"strings"
	"testing"
)

func TestValidID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{newID(), true},
		{"conv-1", true},
		{"conv_1", true},
		{"", false},
		{"a b", false},
		{"../etc", false},
		{"x%2F", false},
		{strings.Repeat("a", 65), false},
	} {
		if validID(tc.id) != tc.ok {
			t.Errorf("validID(%q) = %v", tc.id, !tc.ok)
		}
	}
	if a, b := newID(), newID(); a == b || len(a) != 36 {
		t.Fatalf("ids %q %q", a, b)
	}
}
