package webrtc

import (
	"errors"
	"strings"
	"testing"
)

func TestParseMessage(t *testing.T) {
	long := `{"type":"text","text":"` + strings.Repeat("a", maxTextRunes+1) + `"}`
	for _, tc := range []struct {
		in   string
		ok   bool
		typ  string
		more func(m message) bool
	}{
		{`{"type":"join","token":"t"}`, true, "join", nil},
		{`{"type":"join","token":"t","tracks":"split"}`, true, "join", nil},
		{`{"type":"join"}`, false, "", nil},
		{`{"type":"join","token":"t","tracks":"stereo"}`, false, "", nil},
		{`{"type":"resume","session":"s","secret":"x"}`, true, "resume", nil},
		{`{"type":"resume","session":"s"}`, false, "", nil},
		{`{"type":"offer","sdp":"v=0\r\n"}`, true, "offer", nil},
		{`{"type":"offer","sdp":"hello"}`, false, "", nil},
		{`{"type":"candidate","candidate":null}`, true, "candidate", nil},
		{`{"type":"candidate","candidate":{"candidate":"candidate:1 1 udp 1 127.0.0.1 9 typ host"}}`, true, "candidate", nil},
		{`{"type":"candidate"}`, false, "", nil},
		{`{"type":"text","text":"  hello  "}`, true, "text", func(m message) bool { return m.Text == "hello" }},
		{`{"type":"text","text":"   "}`, false, "", nil},
		{long, false, "", nil},
		{`{"type":"dtmf","digits":"12#*ab"}`, true, "dtmf", func(m message) bool { return m.Digits == "12#*AB" }},
		{`{"type":"dtmf","digits":"12e"}`, false, "", nil},
		{`{"type":"dtmf","digits":""}`, false, "", nil},
		{`{"type":"takeover","on":true}`, true, "takeover", func(m message) bool { return *m.On }},
		{`{"type":"takeover"}`, false, "", nil},
		{`{"type":"ping","seq":3}`, true, "ping", func(m message) bool { return m.Seq == 3 }},
		{`{"type":"hangup"}`, true, "hangup", nil},
		{`{"type":"welcome"}`, false, "", nil},
		{`{"type":"nonsense"}`, false, "", nil},
		{`not json`, false, "", nil},
		{`[]`, false, "", nil},
		{`{"type":"text","text":` + strings.Repeat(" ", maxMessageBytes) + `"x"}`, false, "", nil},
	} {
		m, err := parseMessage([]byte(tc.in))
		if tc.ok != (err == nil) {
			t.Fatalf("%.60s: err %v", tc.in, err)
		}
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("%.60s: error %v is not ErrBadMessage", tc.in, err)
			}
			continue
		}
		if m.Type != tc.typ || (tc.more != nil && !tc.more(m)) {
			t.Fatalf("%.60s: parsed %+v", tc.in, m)
		}
	}
}

// FuzzParseMessage: any bytes give a message or ErrBadMessage, never a panic, and accepted
// messages respect the limits.
func FuzzParseMessage(f *testing.F) {
	for _, s := range []string{`{"type":"join","token":"t"}`, `{"type":"dtmf","digits":"1"}`, `{"type":"text","text":"hi"}`, `{"type":"offer","sdp":"v=0"}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMessage(b)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("error %v is not ErrBadMessage", err)
			}
			return
		}
		if m.Type == "dtmf" && strings.Trim(m.Digits, "0123456789*#ABCD") != "" {
			t.Fatalf("digits %q accepted", m.Digits)
		}
		if m.Type == "text" && (m.Text == "" || len([]rune(m.Text)) > maxTextRunes) {
			t.Fatalf("text %q accepted", m.Text)
		}
	})
}
