package siptest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/parley-voice/parley/codec"
)

// handle answers an in-dialog request.
func (c *Call) handle(req *sip.Request, tx sip.ServerTransaction) {
	c.mu.Lock()
	c.requests = append(c.requests, req)
	tag := c.localTag
	c.mu.Unlock()
	respond := func(status int, reason string, body []byte, hdrs ...sip.Header) {
		res := sip.NewResponseFromRequest(req, status, reason, nil)
		res.To().Params.Add("tag", tag)
		for _, h := range hdrs {
			res.AppendHeader(h)
		}
		if body != nil {
			res.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
		}
		res.SetBody(body)
		tx.Respond(res)
	}
	switch req.Method {
	case sip.BYE:
		respond(200, "OK", nil)
		c.stopMedia()
		c.markEnded("bye received")
	case sip.INVITE:
		var body []byte
		var err error
		late := len(req.Body()) == 0
		if late {
			body = c.offer(SendRecv)
		} else if body, err = c.answer(req.Body()); err != nil {
			respond(488, "Not Acceptable Here", nil)
			return
		}
		var hdrs []sip.Header
		if se := req.GetHeaders("Session-Expires"); len(se) > 0 {
			hdrs = append(hdrs, sip.NewHeader("Session-Expires", se[0].Value()))
		}
		hdrs = append(hdrs, c.p.contact())
		respond(200, "OK", body, hdrs...)
		select {
		case ack := <-c.acks:
			if late {
				c.takeAnswer(ack.Body())
			}
		case <-time.After(5 * time.Second):
		case <-c.done:
		}
	case sip.UPDATE:
		respond(200, "OK", nil)
	case sip.INFO:
		ct := ""
		if h := req.GetHeaders("Content-Type"); len(h) > 0 {
			ct = strings.ToLower(h[0].Value())
		}
		body := strings.TrimSpace(string(req.Body()))
		c.mu.Lock()
		c.infos = append(c.infos, ct+": "+body)
		if strings.HasPrefix(ct, "application/dtmf-relay") {
			for _, line := range strings.Split(body, "\n") {
				k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
				if ok && strings.EqualFold(k, "signal") && len(strings.TrimSpace(v)) == 1 {
					c.dtmf = append(c.dtmf, rune(strings.TrimSpace(v)[0]))
				}
			}
		}
		c.mu.Unlock()
		respond(200, "OK", nil)
	case sip.NOTIFY:
		respond(200, "OK", nil)
		frag := strings.TrimSpace(string(req.Body()))
		c.mu.Lock()
		c.notifies = append(c.notifies, frag)
		c.mu.Unlock()
		select {
		case c.notify <- frag:
		default:
		}
	case sip.REFER:
		c.onRefer(req, respond)
	default:
		respond(405, "Method Not Allowed", nil)
	}
}

// onRefer answers a REFER as the options say: the phone acts as a transferee whose transfer
// succeeds (or ends with ReferResult).
func (c *Call) onRefer(req *sip.Request, respond func(int, string, []byte, ...sip.Header)) {
	switch c.p.o.Refer {
	case "reject":
		respond(603, "Decline", nil)
		return
	case "silent":
		respond(202, "Accepted", nil)
		return
	}
	respond(202, "Accepted", nil)
	c.p.wg.Add(1)
	go func() {
		defer c.p.wg.Done()
		ctx, cancel := context.WithTimeout(c.p.ctx, 5*time.Second)
		defer cancel()
		c.sendNotify(ctx, "SIP/2.0 100 Trying", false)
		c.sendNotify(ctx, c.p.o.ReferResult, true)
		if c.p.o.ReferBye && strings.Contains(c.p.o.ReferResult, " 200 ") {
			c.Bye(ctx)
		}
	}()
}

func (c *Call) sendNotify(ctx context.Context, frag string, final bool) error {
	req := c.request(sip.NOTIFY)
	req.AppendHeader(sip.NewHeader("Event", "refer"))
	state := "active;expires=60"
	if final {
		state = "terminated;reason=noresource"
	}
	req.AppendHeader(sip.NewHeader("Subscription-State", state))
	req.AppendHeader(sip.NewHeader("Content-Type", "message/sipfrag;version=2.0"))
	req.SetBody([]byte(frag + "\r\n"))
	_, err := c.p.do(ctx, req)
	return err
}

// Bye hangs up.
func (c *Call) Bye(ctx context.Context) error {
	req := c.request(sip.BYE)
	res, err := c.p.do(ctx, req)
	c.stopMedia()
	c.markEnded("bye sent")
	if err != nil {
		return err
	}
	if !res.IsSuccess() {
		return fmt.Errorf("siptest: BYE answered %d", res.StatusCode)
	}
	return nil
}

// ReinviteOptions shape a re-INVITE.
type ReinviteOptions struct {
	// Direction is offered (default sendrecv): sendonly or inactive put the peer on hold.
	Direction Direction
	// Codecs changes the offered codecs (a codec change when the first differs).
	Codecs []codec.Info
	// NoSDP sends the re-INVITE without an offer (the peer offers in its 200).
	NoSDP bool
	// SessionExpires adds Session-Expires (a refresh).
	SessionExpires time.Duration
}

// Reinvite sends a re-INVITE and returns the final response (a 2xx is ACKed).
func (c *Call) Reinvite(ctx context.Context, o ReinviteOptions) (*sip.Response, error) {
	dir := o.Direction
	if dir == "" {
		dir = SendRecv
	}
	codecs := o.Codecs
	if len(codecs) == 0 {
		codecs = c.codecs
	}
	req := c.request(sip.INVITE)
	seq := req.CSeq().SeqNo
	c.mu.Lock()
	c.inviteSeq = seq
	se := c.sessionExpires
	c.mu.Unlock()
	if o.SessionExpires > 0 {
		se = o.SessionExpires
	}
	if se > 0 {
		req.AppendHeader(sip.NewHeader("Session-Expires", fmt.Sprintf("%d;refresher=uac", int(se/time.Second))))
		req.AppendHeader(sip.NewHeader("Supported", "timer"))
	}
	if !o.NoSDP {
		req.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
		req.SetBody(c.sdp(codecs, dir, !c.p.o.NoDTMF, 101))
	}
	tx, err := c.p.cli.TransactionRequest(ctx, req, noBuild)
	if err != nil {
		return nil, err
	}
	defer tx.Terminate()
	for {
		select {
		case res := <-tx.Responses():
			if res.IsProvisional() {
				continue
			}
			if !res.IsSuccess() {
				return res, nil
			}
			var ackBody []byte
			if o.NoSDP {
				ans, err := c.answer(res.Body())
				if err != nil {
					c.sendAck(seq, nil)
					return res, err
				}
				ackBody = ans
			} else if _, err := c.takeAnswer(res.Body()); err != nil {
				c.sendAck(seq, nil)
				return res, err
			}
			c.sendAck(seq, ackBody)
			return res, nil
		case <-tx.Done():
			return nil, errors.New("siptest: re-INVITE got no final response")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Refer asks the peer to transfer itself to target and returns the REFER's final status.
func (c *Call) Refer(ctx context.Context, target string) (int, error) {
	req := c.request(sip.REFER)
	req.AppendHeader(sip.NewHeader("Refer-To", "<"+target+">"))
	res, err := c.p.do(ctx, req)
	if err != nil {
		return 0, err
	}
	return res.StatusCode, nil
}

// WaitNotify waits for the next NOTIFY sipfrag.
func (c *Call) WaitNotify(ctx context.Context) (string, error) {
	select {
	case f := <-c.notify:
		return f, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// SendInfoDTMF sends one digit by SIP INFO with the given content type (application/dtmf-relay
// or application/dtmf) and returns the status.
func (c *Call) SendInfoDTMF(ctx context.Context, contentType string, digit rune) (int, error) {
	req := c.request(sip.INFO)
	req.AppendHeader(sip.NewHeader("Content-Type", contentType))
	body := string(digit)
	if contentType == "application/dtmf-relay" {
		body = fmt.Sprintf("Signal=%c\r\nDuration=160\r\n", digit)
	}
	req.SetBody([]byte(body))
	res, err := c.p.do(ctx, req)
	if err != nil {
		return 0, err
	}
	return res.StatusCode, nil
}

// Options sends an in-dialog OPTIONS and returns the status.
func (c *Call) Options(ctx context.Context) (int, error) {
	res, err := c.p.do(ctx, c.request(sip.OPTIONS))
	if err != nil {
		return 0, err
	}
	return res.StatusCode, nil
}
