package sip

import (
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

func TestUASSessionTimer(t *testing.T) {
	s := &Server{o: Options{SessionExpires: 1800 * time.Second, MinSE: 90 * time.Second}}
	cases := []struct {
		name      string
		headers   map[string]string
		interval  time.Duration
		weRefresh bool
		response  string
		minSE     time.Duration
	}{
		{"no timer support: we refresh", nil, 1800 * time.Second, true, "1800;refresher=uas", 0},
		{"supported, no interval: they refresh", map[string]string{"Supported": "timer"}, 1800 * time.Second, false, "1800;refresher=uac", 0},
		{"their shorter interval", map[string]string{"Supported": "timer", "Session-Expires": "600"}, 600 * time.Second, false, "600;refresher=uac", 0},
		{"our shorter interval", map[string]string{"Supported": "timer", "Session-Expires": "7200"}, 1800 * time.Second, false, "1800;refresher=uac", 0},
		{"they ask us to refresh", map[string]string{"Supported": "timer", "Session-Expires": "600;refresher=uas"}, 600 * time.Second, true, "600;refresher=uas", 0},
		{"too small, supported: 422", map[string]string{"Supported": "timer", "Session-Expires": "30"}, 0, false, "", 90 * time.Second},
		{"too small, unsupported: raised", map[string]string{"Session-Expires": "30"}, 90 * time.Second, true, "90;refresher=uas", 0},
		{"compact form", map[string]string{"k": "timer", "x": "900"}, 900 * time.Second, false, "900;refresher=uac", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", Host: "x"})
			for k, v := range tc.headers {
				req.AppendHeader(sip.NewHeader(k, v))
			}
			st, hdrs, minSE := s.uasSessionTimer(req)
			if minSE != tc.minSE {
				t.Fatalf("minSE %v", minSE)
			}
			if minSE > 0 {
				return
			}
			if st.interval != tc.interval || st.weRefresh != tc.weRefresh || hdrs[0].Value() != tc.response {
				t.Errorf("got %+v %q", st, hdrs[0].Value())
			}
		})
	}
	now := time.Unix(0, 0)
	if got := (sessionTimer{interval: 90 * time.Second, weRefresh: true}).next(now); got != now.Add(45*time.Second) {
		t.Errorf("refresher acts at %v", got)
	}
	if got := (sessionTimer{interval: 90 * time.Second}).next(now); got != now.Add(60*time.Second) {
		t.Errorf("expiry at %v, want interval - interval/3", got)
	}
	if got := (sessionTimer{interval: 1800 * time.Second}).next(now); got != now.Add(1768*time.Second) {
		t.Errorf("expiry at %v, want interval - 32 s", got)
	}
}
