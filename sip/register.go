package sip

// issue 21: registration to a provider or a PBX (RFC 3261 §10).
//
// A trunk with a Registration makes the server REGISTER a binding of the trunk's AOR to this
// node: Contact <sip:user@node>, with a +sip.instance (RFC 5626 §4.1) naming the node, so that
// with several media nodes each keeps its own binding and the registrar forks an inbound call
// to them (no node depends on another, and a node that dies takes only its own binding away;
// one binding held through the bus would need a leader and would move the binding's address
// on failover anyway). The binding is refreshed at half its granted expiry; a failure (no
// answer, 4xx–6xx, 403 for bad credentials) retries with exponential backoff (1 s doubling to
// RegisterBackoffMax) and fails over to the backup registrar at each retry; Close (and
// Unregister) removes the binding with Expires: 0. State changes go to OnRegistration.
//
// Inbound INVITEs that arrive from a registrar (or the outbound proxy) of a registered trunk
// belong to that trunk even when its AllowedSources do not list the address; their
// Request-URI carries the AOR's user, the trunk's number.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
)

// Registration is a trunk's registration settings.
type Registration struct {
	// Registrar is the registrar's URI ("sip:pbx.example.com[:port]"); Backup a second one
	// tried when the first fails.
	Registrar, Backup string
	// AOR is the address of record ("sip:1001@pbx.example.com"); its user is the number calls
	// to the binding are for.
	AOR string
	// Expires is the binding lifetime asked for; 0 means 300 s.
	Expires time.Duration
	// Proxy, when set, is the outbound proxy every REGISTER goes through ("sip:host:port").
	Proxy string
}

// RegState is the state of a registration.
type RegState string

// Registration states.
const (
	RegRegistering  RegState = "registering"
	RegRegistered   RegState = "registered"
	RegFailed       RegState = "failed"
	RegUnregistered RegState = "unregistered"
)

// RegistrationStatus is a registration's state at a moment.
type RegistrationStatus struct {
	Trunk     string
	State     RegState
	Registrar string    // the registrar in use
	Expires   time.Time // registered: when the binding expires
	Error     string    // failed: what went wrong (never a credential)
	At        time.Time
}

// Defaults of the registration retry.
const (
	registerBackoffMin = time.Second
	registerTimeout    = 8 * time.Second
)

// registration runs one trunk's binding.
type registration struct {
	s      *Server
	trunk  Trunk
	reg    Registration
	callID string
	tag    string
	seq    uint32
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	status RegistrationStatus
	srcs   []netip.Addr // the addresses of the registrars and the proxy
}

// Register starts keeping trunk's registration (trunk.Registration must be set). A second
// Register for the same trunk name replaces the first (un-registering it).
func (s *Server) Register(trunk Trunk) error {
	if trunk.Registration == nil {
		return fmt.Errorf("%w: trunk %s has no registration", ErrBadOptions, trunk.Name)
	}
	reg := *trunk.Registration
	if reg.Expires <= 0 {
		reg.Expires = 300 * time.Second
	}
	for _, u := range []string{reg.Registrar, reg.AOR} {
		var uri sip.Uri
		if err := sip.ParseUri(u, &uri); err != nil || uri.Host == "" {
			return fmt.Errorf("%w: trunk %s registration URI %q", ErrBadOptions, trunk.Name, u)
		}
	}
	s.Unregister(trunk.Name)
	if !s.track() {
		return ErrClosed
	}
	ctx, cancel := context.WithCancel(s.ctx)
	r := &registration{s: s, trunk: trunk, reg: reg, callID: newUUID(), tag: newTag(), cancel: cancel, done: make(chan struct{}),
		status: RegistrationStatus{Trunk: trunk.Name, State: RegRegistering, Registrar: reg.Registrar, At: time.Now()}}
	for _, u := range []string{reg.Registrar, reg.Backup, reg.Proxy} {
		var uri sip.Uri
		if u != "" && sip.ParseUri(u, &uri) == nil {
			if a := resolveHost(ctx, uri.Host); a.IsValid() {
				r.srcs = append(r.srcs, a)
			}
		}
	}
	s.mu.Lock()
	if s.regs == nil {
		s.regs = map[string]*registration{}
	}
	s.regs[trunk.Name] = r
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer close(r.done)
		r.run(ctx)
	}()
	return nil
}

// Unregister stops the registration of trunk name, removing its binding (Expires: 0). It
// returns once that was answered or timed out.
func (s *Server) Unregister(name string) {
	s.mu.Lock()
	r := s.regs[name]
	delete(s.regs, name)
	s.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// Registrations returns the state of every registration.
func (s *Server) Registrations() []RegistrationStatus {
	s.mu.Lock()
	regs := make([]*registration, 0, len(s.regs))
	for _, r := range s.regs {
		regs = append(regs, r)
	}
	s.mu.Unlock()
	out := make([]RegistrationStatus, 0, len(regs))
	for _, r := range regs {
		r.mu.Lock()
		out = append(out, r.status)
		r.mu.Unlock()
	}
	return out
}

// unregisterAll ends every registration (Close).
func (s *Server) unregisterAll() {
	s.mu.Lock()
	names := make([]string, 0, len(s.regs))
	for n := range s.regs {
		names = append(names, n)
	}
	s.mu.Unlock()
	for _, n := range names {
		s.Unregister(n)
	}
}

// registeredTrunk returns the registered trunk whose registrar or proxy is src.
func (s *Server) registeredTrunk(src netip.Addr) (Trunk, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.regs {
		for _, a := range r.srcs {
			if a == src.Unmap() {
				return r.trunk, true
			}
		}
	}
	return Trunk{}, false
}

func (r *registration) setState(st RegistrationStatus) {
	st.Trunk, st.At = r.trunk.Name, time.Now()
	r.mu.Lock()
	changed := r.status.State != st.State || r.status.Registrar != st.Registrar || r.status.Error != st.Error
	r.status = st
	r.mu.Unlock()
	if changed {
		r.s.log.Info("sip: registration", "trunk", st.Trunk, "state", string(st.State), "registrar", st.Registrar, "err", st.Error)
	}
	if f := r.s.o.OnRegistration; f != nil {
		f(st)
	}
}

// run keeps the binding until ctx ends, then removes it.
func (r *registration) run(ctx context.Context) {
	registrars := []string{r.reg.Registrar}
	if r.reg.Backup != "" {
		registrars = append(registrars, r.reg.Backup)
	}
	idx := 0
	backoff := registerBackoffMin
	maxBackoff := r.s.o.RegisterBackoffMax
	if maxBackoff <= 0 {
		maxBackoff = time.Minute
	}
	used := ""
	for {
		registrar := registrars[idx]
		r.setState(RegistrationStatus{State: RegRegistering, Registrar: registrar})
		granted, err := r.register(ctx, registrar, r.reg.Expires)
		var wait time.Duration
		if err == nil {
			used = registrar
			backoff = registerBackoffMin
			r.setState(RegistrationStatus{State: RegRegistered, Registrar: registrar, Expires: time.Now().Add(granted)})
			wait = granted / 2
		} else {
			if ctx.Err() != nil {
				break
			}
			r.setState(RegistrationStatus{State: RegFailed, Registrar: registrar, Error: err.Error()})
			wait = backoff
			backoff = min(2*backoff, maxBackoff)
			idx = (idx + 1) % len(registrars) // fail over
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
			continue
		}
		break
	}
	// Un-register on the server's way down (or Unregister), on a context of its own.
	if used != "" {
		uctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		_, err := r.register(uctx, used, 0)
		cancel()
		if err != nil {
			r.s.log.Info("sip: un-register failed", "trunk", r.trunk.Name, "err", err)
		}
	}
	r.setState(RegistrationStatus{State: RegUnregistered, Registrar: used})
}

// register sends one REGISTER (answering a digest challenge once) for expires (0 removes the
// binding) and returns the expiry the registrar granted.
func (r *registration) register(ctx context.Context, registrar string, expires time.Duration) (time.Duration, error) {
	var ruri, aor sip.Uri
	if err := sip.ParseUri(registrar, &ruri); err != nil {
		return 0, fmt.Errorf("registrar URI: %v", err)
	}
	if err := sip.ParseUri(r.reg.AOR, &aor); err != nil {
		return 0, fmt.Errorf("AOR: %v", err)
	}
	tp := r.trunk.Transport
	if tp == "" {
		tp = UDP
	}
	next := ruri
	if r.reg.Proxy != "" {
		if err := sip.ParseUri(r.reg.Proxy, &next); err != nil {
			return 0, fmt.Errorf("proxy URI: %v", err)
		}
	}
	remote := resolveHost(ctx, next.Host)
	adv := r.s.advertise(remote)
	d := dialog{callID: r.callID, localTag: r.tag, local: aor, remote: aor, remoteTarget: ruri,
		transport: tp, advertise: adv, dest: hostPortDefault(next, tp)}
	var auth sip.Header
	for attempt := 0; attempt < 3; attempt++ {
		d.localSeq = r.seq
		req := r.s.newRequest(&d, sip.REGISTER, 0)
		r.seq = d.localSeq
		req.RemoveHeader("Contact")
		ct := r.s.contact(tp, adv)
		ct.Address.User = aor.User
		ct.Params = sip.NewParams()
		ct.Params.Add("+sip.instance", `"<urn:uuid:`+r.s.instanceID()+`>"`)
		req.AppendHeader(ct)
		req.AppendHeader(sip.NewHeader("Expires", strconv.Itoa(int(expires/time.Second))))
		if auth != nil {
			req.AppendHeader(auth)
		}
		if tp == TLS {
			if err := r.s.ensureTLS(ctx, r.trunk, d.dest); err != nil {
				return 0, err
			}
		}
		tctx, cancel := context.WithTimeout(ctx, registerTimeout)
		res, err := r.s.do(tctx, req)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("no answer from %s", registrar)
		}
		switch {
		case res.IsSuccess():
			return grantedExpiry(res, expires), nil
		case (res.StatusCode == 401 || res.StatusCode == 407) && auth == nil && r.trunk.Username != "":
			if err := applyDigest(req, res, r.trunk.Username, r.trunk.Password); err != nil {
				return 0, fmt.Errorf("challenge: %v", err)
			}
			name := "Authorization"
			if res.StatusCode == 407 {
				name = "Proxy-Authorization"
			}
			auth = req.GetHeader(name)
			continue
		case res.StatusCode == 423:
			if m, err := strconv.Atoi(headerValue(res, "Min-Expires")); err == nil && m > 0 && expires > 0 {
				expires = time.Duration(m) * time.Second
				continue
			}
		}
		return 0, fmt.Errorf("%s answered %d %s", registrar, res.StatusCode, res.Reason)
	}
	return 0, errors.New("too many challenges")
}

// grantedExpiry reads the expiry of our binding in a 2xx to REGISTER: our Contact's expires
// parameter, else the Expires header, else what we asked.
func grantedExpiry(res *sip.Response, asked time.Duration) time.Duration {
	for _, h := range res.GetHeaders("Contact") {
		for _, part := range splitAddrList(h.Value()) {
			params := sip.NewParams()
			var u sip.Uri
			if _, err := sip.ParseAddressValue(part, &u, &params); err != nil {
				continue
			}
			if v, ok := params.Get("expires"); ok && strings.Contains(part, "urn:uuid:") {
				if n, err := strconv.Atoi(v); err == nil && n > 0 {
					return time.Duration(n) * time.Second
				}
			}
		}
	}
	if n, err := strconv.Atoi(headerValue(res, "Expires")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return asked
}

// instanceID is this node's +sip.instance: Options.InstanceID, else a UUID made at start.
func (s *Server) instanceID() string {
	if s.o.InstanceID != "" {
		return s.o.InstanceID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.instance == "" {
		s.instance = newUUID()
	}
	return s.instance
}
