package sip

// issue 21: outbound 3xx redirects (RFC 3261 §8.1.3.4). A 3xx to our INVITE is followed to its
// Contact targets in q-order (highest first, ties in the order given), at most maxRedirects
// targets in all, each checked first like a transfer destination (CheckTransferDestination
// with Options.TransferAllow) and by the dial's own check (DialRequest.CheckRedirect). Each
// step is reported as an EventRedirect and kept on the call (Call.Redirects) and on a failed
// dial's DialError.

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/emiago/sipgo/sip"
)

// maxRedirects bounds how many redirect targets one dial tries.
const maxRedirects = 3

// EventRedirect reports a redirect followed or refused.
const EventRedirect EventKind = "redirect"

// Redirect is one step of a redirected dial.
type Redirect struct {
	Status int    // the 3xx
	From   string // the Request-URI that was redirected
	To     string // the Contact target
	// State is "followed", or "refused" with Reason (not allowed, too many hops, bad URI).
	State  string
	Reason string
}

// redirectTarget is one Contact of a 3xx.
type redirectTarget struct {
	uri sip.Uri
	q   float64
}

// redirectContacts returns the Contact targets of a 3xx, highest q first (a missing q is 1.0,
// RFC 3261 §20.10); ties keep their order.
func redirectContacts(res *sip.Response) []redirectTarget {
	var out []redirectTarget
	for _, h := range res.GetHeaders("Contact") {
		for _, part := range splitAddrList(h.Value()) {
			var u sip.Uri
			params := sip.NewParams()
			if _, err := sip.ParseAddressValue(part, &u, &params); err != nil || u.Host == "" {
				continue
			}
			q := 1.0
			if v, ok := params.Get("q"); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f <= 1 {
					q = f
				}
			}
			out = append(out, redirectTarget{uri: u, q: q})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].q > out[j].q })
	return out
}

// redirector is the redirect state of one dial.
type redirector struct {
	s       *Server
	check   func(ctx context.Context, target string) error
	queue   []redirectTarget
	status  int
	from    string
	tried   map[string]bool
	steps   []Redirect
	onEvent func(Redirect)
}

// take records a 3xx: its Contacts join the queue (ahead of older ones).
func (r *redirector) take(res *sip.Response, from sip.Uri) {
	r.status, r.from = res.StatusCode, from.String()
	r.queue = append(redirectContacts(res), r.queue...)
}

// next returns the next allowed target, refusing (and recording) those that are not; ok is
// false when none is left or the hop limit is reached.
func (r *redirector) next(ctx context.Context) (sip.Uri, bool) {
	for len(r.queue) > 0 {
		t := r.queue[0]
		r.queue = r.queue[1:]
		to := t.uri.String()
		if r.tried[to] {
			continue // a loop back to a target already tried
		}
		if len(r.tried) >= maxRedirects {
			r.record(Redirect{Status: r.status, From: r.from, To: to, State: "refused", Reason: fmt.Sprintf("more than %d redirects", maxRedirects)})
			r.queue = nil
			return sip.Uri{}, false
		}
		r.tried[to] = true
		if s := strings.ToLower(t.uri.Scheme); s != "sip" && s != "sips" {
			r.record(Redirect{Status: r.status, From: r.from, To: to, State: "refused", Reason: "not a SIP URI"})
			continue
		}
		if err := CheckTransferDestination(ctx, to, r.s.o.TransferAllow); err != nil {
			r.record(Redirect{Status: r.status, From: r.from, To: to, State: "refused", Reason: "destination not allowed"})
			continue
		}
		if r.check != nil {
			if err := r.check(ctx, to); err != nil {
				r.record(Redirect{Status: r.status, From: r.from, To: to, State: "refused", Reason: err.Error()})
				continue
			}
		}
		r.record(Redirect{Status: r.status, From: r.from, To: to, State: "followed"})
		return t.uri, true
	}
	return sip.Uri{}, false
}

func (r *redirector) record(step Redirect) {
	r.steps = append(r.steps, step)
	if r.onEvent != nil {
		r.onEvent(step)
	}
}

// retarget points the leg's next INVITE at target (a new Request-URI, and its next hop; a
// transport parameter changes the transport). The dialog identifiers stay: the new INVITE is a
// new transaction of the same call.
func (l *leg) retarget(target sip.Uri, sp *dialSpec) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v, ok := target.UriParams.Get("transport"); ok {
		if tp, err := ParseTransport(v); err == nil {
			sp.transport = tp
		}
	} else if strings.EqualFold(target.Scheme, "sips") {
		sp.transport = TLS
	}
	sp.target = target
	l.d.remoteTarget = target
	l.d.remoteTag = ""
	l.d.routes = nil
	l.d.transport = sp.transport
	l.d.dest = hostPortDefault(target, sp.transport)
	l.pendingAuth = nil
}

// Redirects returns the redirect steps of an outbound call's dial.
func (c *Call) Redirects() []Redirect {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Redirect(nil), c.redirects...)
}
