package sip

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// dialog is the state of one SIP dialog (RFC 3261 §12): its identifiers, sequence numbers,
// remote target and route set, and where requests inside it go. It is guarded by its leg's
// mutex.
type dialog struct {
	callID    string
	localTag  string
	remoteTag string
	// local and remote are the From/To addresses (our From as UAC, our To as UAS).
	local, remote         sip.Uri
	localName, remoteName string
	localSeq              uint32
	remoteSeq             uint32
	remoteSeqSet          bool
	remoteTarget          sip.Uri
	routes                []sip.Uri // the route set, in the order requests carry it
	transport             Transport
	// dest is the next hop ("ip:port") when it is not the remote target: the source of an
	// inbound INVITE (symmetric signalling through NAT, RFC 3581) or the trunk's address.
	dest string
	// advertise is our address in Via and Contact for this dialog.
	advertise netip.Addr
}

// noBuild keeps sipgo from adding headers: Parley builds every request itself.
func noBuild(*sipgo.Client, *sip.Request) error { return nil }

// newRequest builds an in-dialog request (RFC 3261 §12.2.1.1). ACK and CANCEL reuse the CSeq
// number of the INVITE they belong to (seq); other methods take the next local number.
func (s *Server) newRequest(d *dialog, method sip.RequestMethod, seq uint32) *sip.Request {
	target := d.remoteTarget
	req := sip.NewRequest(method, *target.Clone())
	s.addVia(req, d.transport, d.advertise)
	mf := sip.MaxForwardsHeader(70)
	req.AppendHeader(&mf)
	from := &sip.FromHeader{DisplayName: d.localName, Address: *d.local.Clone(), Params: sip.NewParams()}
	from.Params.Add("tag", d.localTag)
	req.AppendHeader(from)
	to := &sip.ToHeader{DisplayName: d.remoteName, Address: *d.remote.Clone(), Params: sip.NewParams()}
	if d.remoteTag != "" {
		to.Params.Add("tag", d.remoteTag)
	}
	req.AppendHeader(to)
	cid := sip.CallIDHeader(d.callID)
	req.AppendHeader(&cid)
	if seq == 0 {
		d.localSeq++
		seq = d.localSeq
	}
	req.AppendHeader(&sip.CSeqHeader{SeqNo: seq, MethodName: method})
	for i := range d.routes {
		req.AppendHeader(&sip.RouteHeader{Address: *d.routes[i].Clone()})
	}
	if method != sip.ACK && method != sip.CANCEL && method != sip.BYE {
		req.AppendHeader(s.contact(d.transport, d.advertise))
	}
	req.AppendHeader(sip.NewHeader("User-Agent", s.o.UserAgent))
	req.SetTransport(sipgoTransport(d.transport))
	req.SetBody(nil) // Content-Length: 0 until a body is set (streams need it, RFC 3261 §18.3)
	s.setNextHop(req, d)
	return req
}

// setNextHop points the request at the first route, else the explicit destination, else the
// remote target (RFC 3261 §8.1.2), and sends UDP from the listening socket.
func (s *Server) setNextHop(req *sip.Request, d *dialog) {
	switch {
	case len(d.routes) > 0:
		req.SetDestination(d.routes[0].HostPort())
		if d.routes[0].Port == 0 {
			req.SetDestination(hostPortDefault(d.routes[0], d.transport))
		}
	case d.dest != "":
		req.SetDestination(d.dest)
	default:
		req.SetDestination(hostPortDefault(d.remoteTarget, d.transport))
	}
	if d.transport == UDP && s.udpLaddr.IP != nil {
		req.Laddr = s.udpLaddr
	}
}

func hostPortDefault(u sip.Uri, t Transport) string {
	port := u.Port
	if port == 0 {
		port = 5060
		if t == TLS || u.Scheme == "sips" {
			port = 5061
		}
	}
	host := u.Host
	if a, err := netip.ParseAddr(host); err == nil {
		host = uriHost(a)
	}
	return host + ":" + strconv.Itoa(port)
}

// addVia prepends our Via with a fresh branch (RFC 3261 §8.1.1.7) and rport (RFC 3581).
func (s *Server) addVia(req *sip.Request, t Transport, adv netip.Addr) {
	via := &sip.ViaHeader{
		ProtocolName: "SIP", ProtocolVersion: "2.0", Transport: sipgoTransport(t),
		Host: adv.Unmap().String(), Port: s.listenPort(t), Params: sip.NewParams(),
	}
	via.Params.Add("branch", sip.GenerateBranchN(16))
	via.Params.Add("rport", "")
	req.PrependHeader(via)
}

// contact is our Contact for transport t at address adv.
func (s *Server) contact(t Transport, adv netip.Addr) *sip.ContactHeader {
	u := sip.Uri{Scheme: "sip", User: "parley", Host: adv.Unmap().String(), Port: s.listenPort(t)}
	if t != UDP {
		u.UriParams = sip.NewParams()
		u.UriParams.Add("transport", string(t))
	}
	return &sip.ContactHeader{Address: u}
}

// errNoFinal says a transaction ended without a final response (timeout or transport error).
var errNoFinal = errors.New("sip: no final response")

// do sends a non-INVITE request in its own transaction and returns the final response. A
// timeout (Timer F) or transport failure returns an error wrapping errNoFinal.
func (s *Server) do(ctx context.Context, req *sip.Request) (*sip.Response, error) {
	if err := s.tlsFor(ctx, req); err != nil { // issue 21
		return nil, fmt.Errorf("%w: %v", errNoFinal, err)
	}
	tx, err := s.cli.TransactionRequest(ctx, req, noBuild)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoFinal, err)
	}
	defer tx.Terminate()
	for {
		select {
		case res := <-tx.Responses():
			s.observeResponse(false, res.StatusCode)
			if res.IsProvisional() {
				continue
			}
			return res, nil
		case <-tx.Done():
			return nil, fmt.Errorf("%w: %v", errNoFinal, tx.Err())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// respond sends a response built from req with our tag, Server header and extra headers.
func (s *Server) respond(tx sip.ServerTransaction, req *sip.Request, status int, tag string, body []byte, hdrs ...sip.Header) error {
	res := s.response(req, status, tag, body, hdrs...)
	s.observeResponse(true, status)
	return tx.Respond(res)
}

func (s *Server) response(req *sip.Request, status int, tag string, body []byte, hdrs ...sip.Header) *sip.Response {
	res := sip.NewResponseFromRequest(req, status, statusText(status), nil)
	res.SipVersion = "SIP/2.0" // never echo a version we do not speak (505)
	if to := res.To(); to != nil && status != 100 {
		if tag != "" {
			to.Params.Add("tag", tag)
		}
	}
	res.AppendHeader(sip.NewHeader("Server", s.o.UserAgent))
	for _, h := range hdrs {
		if h != nil {
			res.AppendHeader(h)
		}
	}
	if body != nil {
		res.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	}
	res.SetBody(body)
	return res
}

// refuse answers req with a refusal: the status, the Reason header, Retry-After and Warning
// when set, and logs it.
func (s *Server) refuse(tx sip.ServerTransaction, req *sip.Request, r *Refusal, extra ...sip.Header) {
	hdrs := append([]sip.Header{sip.NewHeader("Reason", reasonHeader(r.Status, r.Reason))}, extra...)
	if r.Status == 503 && r.RetryAfter > 0 {
		hdrs = append(hdrs, sip.NewHeader("Retry-After", retryAfterSeconds(r.RetryAfter)))
	}
	if r.Warning != 0 {
		hdrs = append(hdrs, sip.NewHeader("Warning", fmt.Sprintf(`%d parley "%s"`, r.Warning, quoteSafe(r.Reason))))
	}
	attrs := []any{"status", r.Status, "reason", r.Reason, "method", string(req.Method),
		"call_id", callID(req), "source", req.Source()}
	if r.Cause != nil {
		attrs = append(attrs, "cause", r.Cause.Error())
	}
	s.log.Info("sip: request refused", attrs...)
	if err := s.respond(tx, req, r.Status, sip.GenerateTagN(10), nil, hdrs...); err != nil {
		s.log.Debug("sip: refusal not sent", "err", err)
	}
}
