package sip

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/emiago/sipgo/sip"
)

func TestMessageHelpers(t *testing.T) {
	res := sip.NewResponse(200, "OK")
	res.AppendHeader(sip.NewHeader("Record-Route", `<sip:p1.example.com;lr>, "Proxy, Two" <sip:p2.example.com;lr>`))
	res.AppendHeader(sip.NewHeader("Record-Route", `<sip:p3.example.com;lr>`))
	hosts := func(us []sip.Uri) []string {
		var out []string
		for _, u := range us {
			out = append(out, u.Host)
		}
		return out
	}
	if got := hosts(recordRoutes(res, false)); !slices.Equal(got, []string{"p1.example.com", "p2.example.com", "p3.example.com"}) {
		t.Errorf("UAS route set %v", got)
	}
	if got := hosts(recordRoutes(res, true)); !slices.Equal(got, []string{"p3.example.com", "p2.example.com", "p1.example.com"}) {
		t.Errorf("UAC route set %v", got)
	}
	req := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", User: "%2B14155550100", Host: "x"})
	req.SetSource("[2001:db8::1]:5062")
	if got := messageSource(req); got != netip.MustParseAddrPort("[2001:db8::1]:5062") {
		t.Errorf("source %v", got)
	}
	if got := userOf(req.Recipient); got != "+14155550100" {
		t.Errorf("user %q", got)
	}
	req.AppendHeader(sip.NewHeader("X-Customer-Id", "42"))
	req.AppendHeader(sip.NewHeader("Diversion", "<sip:+15550000000@x>;reason=unconditional"))
	req.AppendHeader(sip.NewHeader("Subject", "ignored"))
	req.AppendHeader(sip.NewHeader("Supported", "timer, 100rel"))
	req.AppendHeader(sip.NewHeader("k", "replaces"))
	h := interestingHeaders(req)
	if h["X-Customer-Id"] != "42" || h["Diversion"] == "" || h["Subject"] != "" {
		t.Errorf("headers %v", h)
	}
	if !hasOption(req, "Supported", "100rel") || !hasOption(req, "Supported", "replaces") || hasOption(req, "Supported", "path") {
		t.Error("Supported options")
	}
	req.AppendHeader(sip.NewHeader("Content-Type", "Application/SDP; charset=utf-8"))
	if contentType(req) != "application/sdp" {
		t.Errorf("content type %q", contentType(req))
	}
}
