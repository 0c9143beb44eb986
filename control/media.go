package control

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/parley-voice/parley/control/channels"
	"github.com/parley-voice/parley/control/config"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/webrtc"
)

// mediaServices are what a node with the media role runs: the SIP trunk endpoint and the
// WebRTC service for browser calls and listen-ins.
type mediaServices struct {
	sip    *sip.Server
	webrtc *webrtc.Service
	trunks *storeTrunks
	dialer *channels.SIPDialer // the runtime's dialer; its server is the one startSIP builds
	reg    *regMetrics         // issue 21: registration metrics
	cancel context.CancelFunc
	done   chan struct{}
}

// startMedia opens the WebRTC UDP port of a media node and prepares its SIP trunks and dialer.
// The SIP server comes after the conversation runtime (startSIP), since it routes inbound
// calls to it; the runtime's dialer gets the server before anything runs.
func (n *Node) startMedia(masterKey []byte) error {
	if !n.cfg.Roles.Has(config.RoleMedia) {
		return nil
	}
	m := &mediaServices{trunks: &storeTrunks{st: n.Store, box: n.Box}, done: make(chan struct{})}
	m.dialer = &channels.SIPDialer{Trunks: m.trunks.Lookup}
	// The media sockets follow the configured address (PARLEY_MEDIA_ADDR, else the SIP
	// listener's host): a node on 127.0.0.1 does not open RTP on every interface.
	bind := n.cfg.MediaBindIP()
	udpHost := ""
	if bind.IsValid() {
		udpHost = bind.String()
	}
	svc, err := webrtc.NewService(webrtc.Options{UDPHost: udpHost,
		BaseURL: n.cfg.BaseURL, UDPPort: n.cfg.WebRTCUDPPort, PublicIP: n.cfg.PublicIP,
		Secret: webrtc.DeriveSecret(masterKey), Log: n.log, OpusComplexity: n.cfg.OpusComplexity,
		OpusApplication: n.cfg.OpusApplication,
		ReadPeriod:      readPeriod(n.cfg.WebRTCReadPeriod),
	})
	if err != nil {
		return fmt.Errorf("webrtc on UDP port %d (PARLEY_WEBRTC_UDP_PORT): %w", n.cfg.WebRTCUDPPort, err)
	}
	m.webrtc = svc
	n.media = m
	return nil
}

// startSIP opens the SIP listeners of a media node, routing inbound calls to the runtime rt.
func (n *Node) startSIP(rt *runtime.Runtime) error {
	if n.media == nil {
		return nil
	}
	m := n.media
	bind := n.cfg.MediaBindIP()
	var pub netip.Addr
	if n.cfg.PublicIP != "" {
		pub, _ = netip.ParseAddr(n.cfg.PublicIP)
	}
	srv, err := sip.New(sip.Options{
		Addr: n.cfg.SIPAddr, TLSAddr: n.cfg.SIPTLSAddr, TLSCertFile: n.cfg.SIPTLSCert, TLSKeyFile: n.cfg.SIPTLSKey,
		TLSClientAuth: sip.ClientAuth(n.cfg.SIPTLSClientAuth), // issue 21
		PublicIP:      pub, RTPPorts: media.PortRange{Min: n.cfg.RTPPorts.Min, Max: n.cfg.RTPPorts.Max},
		TransferAllow: n.cfg.TransferAllow, RTPIP: bind, Observer: sipObserver{n.metrics.voice},
		Router: channels.Router(rt, n.cfg.MaxCalls), Trunks: m.trunks, MaxCalls: n.cfg.MaxCalls, Logger: n.log,
		OnRegistration: n.onRegistration, InstanceID: instanceID(n.cfg.NodeID), // issue 21
	})
	if err != nil {
		return fmt.Errorf("sip on %s (PARLEY_SIP_ADDR): %w", n.cfg.SIPAddr, err)
	}
	m.sip = srv
	m.dialer.Server = srv // before the node serves: nothing dials until Run
	if n.metrics != nil {
		m.reg = newRegMetrics(n.metrics.reg)
	}
	return nil
}

// run serves SIP until stop.
func (m *mediaServices) run() {
	if m.sip == nil {
		close(m.done)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		_ = m.sip.Run(ctx)
	}()
	go m.keepRegistrations(ctx) // issue 21: ends with ctx; Close un-registers
}

// drain refuses new calls (503) and lets calls in progress finish until ctx ends.
func (m *mediaServices) drain(ctx context.Context) {
	if m == nil || m.sip == nil {
		return
	}
	_ = m.sip.Drain(ctx)
}

func (m *mediaServices) close() {
	if m == nil {
		return
	}
	if m.cancel != nil {
		m.cancel()
		<-m.done
	}
	if m.sip != nil {
		m.sip.Close()
	}
	m.webrtc.Close()
}

// storeTrunks serves the store's trunks to the SIP server. It reads them again every few
// seconds, so a trunk added with `parley admin trunks add` works without a restart.
type storeTrunks struct {
	st  *store.Store
	box *secrets.Box

	mu     sync.Mutex
	cached []sip.Trunk
	at     time.Time
}

// trunkRefresh is how long the trunk list is kept; trunkMissRefresh is how soon a miss (no
// trunk for a source or a name) reads the store again, so a trunk added by the admin CLI is
// found at once rather than after trunkRefresh.
const (
	trunkRefresh     = 5 * time.Second
	trunkMissRefresh = 500 * time.Millisecond
)

func (s *storeTrunks) load(ctx context.Context) ([]sip.Trunk, error) {
	return s.loadWithin(ctx, trunkRefresh)
}

// find returns the first trunk that matches, reading the store again once on a miss.
func (s *storeTrunks) find(ctx context.Context, match func(sip.Trunk) bool) (sip.Trunk, bool, error) {
	for _, maxAge := range []time.Duration{trunkRefresh, trunkMissRefresh} {
		ts, err := s.loadWithin(ctx, maxAge)
		if err != nil {
			return sip.Trunk{}, false, err
		}
		for _, t := range ts {
			if match(t) {
				return t, true, nil
			}
		}
	}
	return sip.Trunk{}, false, nil
}

// loadWithin returns the trunk list, read again from the store when the kept one is older than maxAge.
func (s *storeTrunks) loadWithin(ctx context.Context, maxAge time.Duration) ([]sip.Trunk, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cached != nil && time.Since(s.at) < maxAge {
		return s.cached, nil
	}
	rows, err := s.st.ListTrunks(ctx)
	if err != nil {
		if s.cached != nil {
			return s.cached, nil // a store hiccup keeps the last good list
		}
		return nil, err
	}
	out := make([]sip.Trunk, 0, len(rows))
	for _, t := range rows {
		st, err := toSIPTrunk(t, s.box)
		if err == nil {
			err = withNetworks(ctx, s.st, t.ID, &st) // issue 22 item 7
		}
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	s.cached, s.at = out, time.Now()
	return out, nil
}

func toSIPTrunk(t store.Trunk, box *secrets.Box) (sip.Trunk, error) {
	pw, err := t.Password(box)
	if err != nil {
		return sip.Trunk{}, err
	}
	tr, err := sip.ParseTransport(t.Transport)
	if err != nil {
		return sip.Trunk{}, err
	}
	var prefixes []netip.Prefix
	for _, src := range t.AllowedSources {
		p, err := netip.ParsePrefix(src)
		if err != nil {
			a, aerr := netip.ParseAddr(src)
			if aerr != nil {
				return sip.Trunk{}, fmt.Errorf("trunk %s: allowed source %q: %w", t.Name, src, err)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		prefixes = append(prefixes, p)
	}
	key, err := t.TLSClientKey(box) // issue 21
	if err != nil {
		return sip.Trunk{}, err
	}
	return sip.Trunk{ID: string(t.ID), Name: t.Name, URI: t.URI, Transport: tr, Username: t.Username, Password: pw,
		AllowedSources: prefixes, InboundAuth: t.InboundAuth, FromDomain: t.FromDomain, Registration: toSIPRegistration(t),
		SRTP: sip.SRTPMode(t.SRTP), SRTPOverClear: t.SRTPOverClear,
		TLS: sip.TrunkTLS{CAPEM: t.TLSCA, ClientCertPEM: t.TLSClientCert, ClientKeyPEM: key}}, nil
}

// withNetworks adds the trunk's transfer and media networks to st.
func withNetworks(ctx context.Context, q *store.Store, id store.TrunkID, st *sip.Trunk) error {
	n, err := q.GetTrunkNetworks(ctx, id)
	if err != nil {
		return err
	}
	if st.TransferAllow, err = sip.ParsePrefixes(n.TransferAllow); err != nil {
		return err
	}
	st.MediaCIDRs, err = sip.ParsePrefixes(n.MediaCIDRs)
	return err
}

// MatchSource implements sip.TrunkSource.
func (s *storeTrunks) MatchSource(ctx context.Context, src netip.Addr) (sip.Trunk, error) {
	t, ok, err := s.find(ctx, func(t sip.Trunk) bool { return t.Allows(src) })
	if err != nil || ok {
		return t, err
	}
	return sip.Trunk{}, fmt.Errorf("%w for source %s", sip.ErrUnknownTrunk, src)
}

// MatchClientCert implements sip.CertTrunkSource (issue 21: inbound mutual TLS): the trunk
// whose CA verifies an inbound TLS client's certificate.
func (s *storeTrunks) MatchClientCert(ctx context.Context, src netip.Addr, chain []*x509.Certificate) (sip.Trunk, error) {
	var last error
	for _, maxAge := range []time.Duration{trunkRefresh, trunkMissRefresh} {
		ts, err := s.loadWithin(ctx, maxAge)
		if err != nil {
			return sip.Trunk{}, err
		}
		t, err := sip.MatchClientCert(ts, src, chain)
		if err == nil {
			return t, nil
		}
		last = err
	}
	return sip.Trunk{}, last
}

// Lookup finds a trunk by name; "" names the first trunk (the default).
func (s *storeTrunks) Lookup(name string) (sip.Trunk, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t, ok, err := s.find(ctx, func(t sip.Trunk) bool { return name == "" || t.Name == name })
	if err != nil || ok {
		return t, err
	}
	if name == "" {
		return sip.Trunk{}, errors.New("no SIP trunk is configured (parley admin trunks add)")
	}
	return sip.Trunk{}, fmt.Errorf("%w: %q", sip.ErrUnknownTrunk, name)
}

// readPeriod maps PARLEY_WEBRTC_READ_PERIOD to webrtc.Options.ReadPeriod: the setting's 0 reads
// each packet as it arrives (the option's negative; its 0 is the default).
func readPeriod(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
