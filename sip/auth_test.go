package sip

import (
	"errors"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
	"github.com/icholy/digest"
)

func challengedInvite(t *testing.T, a *digestAuth, user, pass string) *sip.Request {
	t.Helper()
	req := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", User: "+14155550100", Host: "203.0.113.1"})
	res := sip.NewResponse(401, "Unauthorized")
	res.AppendHeader(a.challenge(false))
	if err := applyDigest(req, res, user, pass); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestDigestAuth(t *testing.T) {
	a, err := newDigestAuth()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.verify(challengedInvite(t, a, "carrier", "pw"), "carrier", "pw"); err != nil {
		t.Fatalf("right credentials: %v", err)
	}
	if err := a.verify(challengedInvite(t, a, "carrier", "bad"), "carrier", "pw"); !errors.Is(err, errBadDigest) {
		t.Errorf("wrong password: %v", err)
	}
	if err := a.verify(challengedInvite(t, a, "other", "pw"), "carrier", "pw"); !errors.Is(err, errBadDigest) {
		t.Errorf("wrong user: %v", err)
	}
	if err := a.verify(sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", Host: "x"}), "carrier", "pw"); !errors.Is(err, errNoCredentials) {
		t.Errorf("no credentials: %v", err)
	}
	// A nonce of another server (another key) is refused; an old one is stale.
	other, _ := newDigestAuth()
	if err := a.verify(challengedInvite(t, other, "carrier", "pw"), "carrier", "pw"); !errors.Is(err, errBadDigest) {
		t.Errorf("foreign nonce: %v", err)
	}
	old := challengedInvite(t, a, "carrier", "pw")
	a.now = func() time.Time { return time.Now().Add(nonceLifetime + time.Minute) }
	if err := a.verify(old, "carrier", "pw"); !errors.Is(err, errStaleNonce) {
		t.Errorf("old nonce: %v", err)
	}
	// A forged response with a valid nonce is refused.
	a.now = time.Now
	req := challengedInvite(t, a, "carrier", "pw")
	h := req.GetHeaders("Authorization")[0].Value()
	cred, _ := digest.ParseCredentials(h)
	cred.Response = "00000000000000000000000000000000"
	req.RemoveHeader("Authorization")
	req.AppendHeader(sip.NewHeader("Authorization", cred.String()))
	if err := a.verify(req, "carrier", "pw"); !errors.Is(err, errBadDigest) {
		t.Errorf("forged response: %v", err)
	}
}

func TestApplyDigestProxy(t *testing.T) {
	req := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", User: "x", Host: "h"})
	res := sip.NewResponse(407, "Proxy Authentication Required")
	res.AppendHeader(sip.NewHeader("Proxy-Authenticate", `Digest realm="r", nonce="n", algorithm=MD5`))
	if err := applyDigest(req, res, "u", "p"); err != nil {
		t.Fatal(err)
	}
	if len(req.GetHeaders("Proxy-Authorization")) != 1 || len(req.GetHeaders("Authorization")) != 0 {
		t.Error("407 must be answered with Proxy-Authorization")
	}
	if err := applyDigest(req, sip.NewResponse(401, "Unauthorized"), "u", "p"); err == nil {
		t.Error("a 401 without a challenge was accepted")
	}
}
