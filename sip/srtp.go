package sip

// issue 21: SRTP with SDES key exchange (RFC 4568) on top of RFC 3264 offer/answer.
//
// A trunk's SRTPMode says what its calls may use: disabled (plain RTP/AVP only: an RTP/SAVP
// offer is answered 488), allowed (accept RTP/SAVP or RTP/AVP; offer RTP/AVP) or required
// (offer only RTP/SAVP; refuse RTP/AVP with 488). SDES sends the keys inside the SDP, so they
// are only as secret as the signalling: SRTP is refused over UDP or TCP unless the trunk sets
// SRTPOverClear. The keys never appear in a log line: sdesKeys prints its suite only, and the
// SDP bodies carrying them are never logged.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"

	"github.com/parley-voice/parley/codec"
	"github.com/parley-voice/parley/media"
)

// SRTPMode is a trunk's media-encryption setting.
type SRTPMode string

// SRTP modes.
const (
	SRTPDisabled SRTPMode = "disabled"
	SRTPAllowed  SRTPMode = "allowed"
	SRTPRequired SRTPMode = "required"
)

// ParseSRTPMode reads a mode; empty means disabled.
func ParseSRTPMode(s string) (SRTPMode, error) {
	switch m := SRTPMode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return SRTPDisabled, nil
	case SRTPDisabled, SRTPAllowed, SRTPRequired:
		return m, nil
	}
	return "", fmt.Errorf("sip: unknown SRTP mode %q (want disabled, allowed or required)", s)
}

// Errors of the SRTP negotiation. Inbound, each is answered 488 (with Warning 399 and the
// error's text in the Reason header, never a key); outbound, each fails the call before the
// INVITE (transport) or with outcome failed (answer).
var (
	// ErrSRTPRequired: the trunk requires SRTP and the peer offered or answered plain RTP.
	ErrSRTPRequired = errors.New("sip: SRTP required")
	// ErrSRTPDisabled: the trunk does not use SRTP and the peer offered only RTP/SAVP.
	ErrSRTPDisabled = errors.New("sip: SRTP not enabled on this trunk")
	// ErrSRTPClearSignalling: SDES keys would travel over UDP or TCP, which the trunk does not
	// allow (SRTPOverClear).
	ErrSRTPClearSignalling = errors.New("sip: SRTP keys refused over unencrypted signalling")
	// ErrSRTPNoCrypto: the RTP/SAVP section carries no a=crypto line Parley can use (a known
	// suite, one inline key of the right length, no MKI and no session parameters that weaken
	// it).
	ErrSRTPNoCrypto = errors.New("sip: no usable a=crypto")
)

// srtpPolicy is what one leg may do: the trunk's mode and whether its signalling is encrypted
// (TLS) or the trunk accepts keys over clear signalling.
type srtpPolicy struct {
	mode   SRTPMode
	secure bool
}

func (p srtpPolicy) enabled() bool { return p.mode == SRTPAllowed || p.mode == SRTPRequired }

// policyFor returns the policy of a leg of trunk t over transport tp.
func policyFor(t Trunk, tp Transport) srtpPolicy {
	mode, err := ParseSRTPMode(string(t.SRTP))
	if err != nil {
		mode = SRTPRequired // an unreadable setting fails closed
	}
	return srtpPolicy{mode: mode, secure: tp == TLS || t.SRTPOverClear}
}

// sdesKeys are the keys of one SRTP stream agreed by SDES: the suite, the crypto tag, our key
// (what we send with) and the peer's (what we receive with), each master key || master salt.
type sdesKeys struct {
	profile media.SRTPProfile
	tag     int
	local   []byte
	remote  []byte
}

// String names the suite only: keys are never printed.
func (k *sdesKeys) String() string {
	if k == nil {
		return "none"
	}
	return string(k.profile)
}

// LogValue keeps the keys out of structured logs too.
func (k *sdesKeys) LogValue() slog.Value { return slog.StringValue(k.String()) }

// GoString keeps the keys out of %#v.
func (k *sdesKeys) GoString() string { return "sdesKeys(" + k.String() + ")" }

func (k *sdesKeys) same(o *sdesKeys) bool {
	if k == nil || o == nil {
		return k == o
	}
	return k.profile == o.profile && bytes.Equal(k.local, o.local) && bytes.Equal(k.remote, o.remote)
}

// contexts builds the packet protection of these keys.
func (k *sdesKeys) contexts() (*media.SRTP, error) {
	return media.NewSRTP(k.profile, k.local, k.remote)
}

// cryptoAttr is one parsed a=crypto line.
type cryptoAttr struct {
	tag     int
	profile media.SRTPProfile
	key     []byte
}

// maxCryptoLines bounds the a=crypto lines read per media section.
const maxCryptoLines = 16

// parseCrypto reads "tag suite inline:key||salt[|lifetime][|mki:len] [session-params]"
// (RFC 4568 §9.1). It refuses a line Parley cannot honour: an unknown suite, more than one key,
// a key of the wrong length, an MKI, or session parameters other than a window-size hint.
func parseCrypto(v string) (cryptoAttr, error) {
	f := strings.Fields(v)
	if len(f) < 3 {
		return cryptoAttr{}, fmt.Errorf("%w: a=crypto needs tag, suite and key", ErrSRTPNoCrypto)
	}
	tag, err := strconv.Atoi(f[0])
	if err != nil || tag < 0 || tag > 999999999 {
		return cryptoAttr{}, fmt.Errorf("%w: a=crypto tag %q", ErrSRTPNoCrypto, f[0])
	}
	p := media.SRTPProfile(f[1])
	if !p.Known() {
		return cryptoAttr{}, fmt.Errorf("%w: suite %q not supported", ErrSRTPNoCrypto, f[1])
	}
	for _, sp := range f[3:] {
		if !strings.HasPrefix(sp, "WSH=") {
			return cryptoAttr{}, fmt.Errorf("%w: session parameter %q not supported", ErrSRTPNoCrypto, strings.SplitN(sp, "=", 2)[0])
		}
	}
	if strings.Contains(f[2], ";") {
		return cryptoAttr{}, fmt.Errorf("%w: several keys in one a=crypto", ErrSRTPNoCrypto)
	}
	kp, ok := strings.CutPrefix(f[2], "inline:")
	if !ok {
		return cryptoAttr{}, fmt.Errorf("%w: key method is not inline", ErrSRTPNoCrypto)
	}
	parts := strings.Split(kp, "|")
	if len(parts) > 3 || len(parts) == 3 || (len(parts) == 2 && strings.Contains(parts[1], ":")) {
		return cryptoAttr{}, fmt.Errorf("%w: MKI not supported", ErrSRTPNoCrypto)
	}
	key, err := base64.StdEncoding.DecodeString(parts[0])
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(parts[0])
	}
	if err != nil || len(key) != p.KeyLen() {
		// The message never quotes the key.
		return cryptoAttr{}, fmt.Errorf("%w: %s key is not %d bytes of base64", ErrSRTPNoCrypto, p, p.KeyLen())
	}
	return cryptoAttr{tag: tag, profile: p, key: key}, nil
}

// formatCrypto renders an a=crypto value.
func formatCrypto(tag int, p media.SRTPProfile, key []byte) string {
	return strconv.Itoa(tag) + " " + string(p) + " inline:" + base64.StdEncoding.EncodeToString(key)
}

func newSRTPKey(p media.SRTPProfile) []byte {
	k := make([]byte, p.KeyLen())
	rand.Read(k)
	return k
}

func isSecureProto(proto string) bool { return proto == "RTP/SAVP" || proto == "RTP/SAVPF" }

// answerOfferSRTP answers offer under the leg's policy: sections the policy forbids are
// rejected (port 0) before the codec choice, the answer's audio section carries our a=crypto
// for the first usable offered one. prev is the stream's current keys (a re-INVITE): our key is
// kept while the peer keeps its own, and renewed when the peer re-keys (RFC 4568 §7.1.4).
func answerOfferSRTP(offer *SessionDescription, codecs []codec.Info, local netip.AddrPort, origin Origin, pol srtpPolicy, prev *sdesKeys) (Negotiated, *SessionDescription, error) {
	filtered := *offer
	filtered.Media = append([]MediaDescription(nil), offer.Media...)
	var refused error
	bestEffort := map[int]bool{}
	for i := range filtered.Media {
		m := &filtered.Media[i]
		if m.Type != "audio" || m.Port == 0 {
			continue
		}
		secure := isSecureProto(m.Proto)
		if !secure && len(m.Crypto) > 0 && pol.enabled() && pol.secure {
			// Best-effort SRTP: RTP/AVP with a=crypto (baresip's mediaenc=srtp, some SBCs).
			// Taken encrypted when a line is usable, else as plain RTP.
			if _, err := pickCrypto(m); err == nil {
				bestEffort[i] = true
				continue
			}
		}
		switch {
		case secure && !pol.enabled():
			refused = ErrSRTPDisabled
		case secure && !pol.secure:
			refused = ErrSRTPClearSignalling
		case !secure && pol.mode == SRTPRequired:
			refused = ErrSRTPRequired
		case secure:
			if _, err := pickCrypto(m); err != nil {
				refused = err
			} else {
				continue
			}
		default:
			continue
		}
		m.Port = 0
	}
	n, ans, err := answerOffer(&filtered, codecs, local, origin)
	if err != nil {
		if refused != nil && audioSection(&filtered) < 0 {
			return Negotiated{}, nil, refused
		}
		return Negotiated{}, nil, err
	}
	for i := range ans.Media {
		am := &ans.Media[i]
		if am.Port == 0 || !isSecureProto(am.Proto) && !bestEffort[i] {
			continue
		}
		ca, _ := pickCrypto(&filtered.Media[i])
		k := &sdesKeys{profile: ca.profile, tag: ca.tag, remote: ca.key}
		if prev != nil && prev.profile == ca.profile && bytes.Equal(prev.remote, ca.key) {
			k.local = prev.local
		} else {
			k.local = newSRTPKey(ca.profile)
		}
		am.Crypto = []string{formatCrypto(ca.tag, ca.profile, k.local)}
		n.SRTP = k
		break
	}
	return n, ans, nil
}

// pickCrypto returns the first a=crypto of m Parley can use.
func pickCrypto(m *MediaDescription) (cryptoAttr, error) {
	var first error
	for _, v := range m.Crypto {
		ca, err := parseCrypto(v)
		if err == nil {
			return ca, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = fmt.Errorf("%w: the RTP/SAVP section has no a=crypto", ErrSRTPNoCrypto)
	}
	return cryptoAttr{}, first
}

// buildOfferSRTP makes our offer under the policy: with SRTP required, RTP/SAVP with one
// a=crypto per suite, each with a fresh key (prev's key is offered again for its suite, so a
// session refresh does not re-key). Allowed or disabled offers plain RTP/AVP.
func buildOfferSRTP(codecs []codec.Info, local netip.AddrPort, origin Origin, dir Direction, pol srtpPolicy, prev *sdesKeys) (*SessionDescription, error) {
	sd := buildOffer(codecs, local, origin, dir)
	if pol.mode != SRTPRequired {
		return sd, nil
	}
	if !pol.secure {
		return nil, ErrSRTPClearSignalling
	}
	m := &sd.Media[0]
	m.Proto = "RTP/SAVP"
	for i, p := range media.SRTPProfiles {
		key := newSRTPKey(p)
		if prev != nil && prev.profile == p {
			key = prev.local
		}
		m.Crypto = append(m.Crypto, formatCrypto(i+1, p, key))
	}
	return sd, nil
}

// takeAnswerSRTP reads the answer to our offer under the policy: an answer in RTP/SAVP must
// pick one of our a=crypto lines (by tag and suite) and give its own key; plain RTP answers an
// offer of ours in RTP/AVP only.
func takeAnswerSRTP(answer *SessionDescription, codecs []codec.Info, offer *SessionDescription, pol srtpPolicy) (Negotiated, error) {
	n, err := takeAnswer(answer, codecs)
	if err != nil {
		return n, err
	}
	am := &answer.Media[audioSection(answer)]
	var om *MediaDescription
	for i := range offer.Media {
		if offer.Media[i].Type == "audio" && offer.Media[i].Port != 0 {
			om = &offer.Media[i]
			break
		}
	}
	offeredSecure := om != nil && isSecureProto(om.Proto)
	if !isSecureProto(am.Proto) {
		if offeredSecure || pol.mode == SRTPRequired {
			return Negotiated{}, fmt.Errorf("%w: the answer is %s", ErrSRTPRequired, am.Proto)
		}
		return n, nil
	}
	if !offeredSecure {
		return Negotiated{}, fmt.Errorf("%w: RTP/SAVP answer to an RTP/AVP offer", ErrSRTPNoCrypto)
	}
	ca, err := pickCrypto(am)
	if err != nil {
		return Negotiated{}, err
	}
	for _, v := range om.Crypto {
		ours, err := parseCrypto(v)
		if err == nil && ours.tag == ca.tag && ours.profile == ca.profile {
			n.SRTP = &sdesKeys{profile: ca.profile, tag: ca.tag, local: ours.key, remote: ca.key}
			return n, nil
		}
	}
	return Negotiated{}, fmt.Errorf("%w: the answer's tag %d names none of our offer's", ErrSRTPNoCrypto, ca.tag)
}

// refuseSRTP is the 488 for an SRTP policy error.
func refuseSRTP(err error) *Refusal {
	return &Refusal{Status: 488, Reason: strings.TrimPrefix(err.Error(), "sip: "), Warning: 399, Cause: err}
}

// isSRTPError reports whether err is one of the SRTP negotiation errors.
func isSRTPError(err error) bool {
	return errors.Is(err, ErrSRTPRequired) || errors.Is(err, ErrSRTPDisabled) ||
		errors.Is(err, ErrSRTPClearSignalling) || errors.Is(err, ErrSRTPNoCrypto)
}

// refusalFor is the 488 of a failed answer: SRTP policy or no common codec.
func refusalFor(err error) *Refusal {
	if isSRTPError(err) {
		return refuseSRTP(err)
	}
	return &Refusal{Status: 488, Reason: "no common codec", Warning: 305, Cause: err}
}

// keys returns the leg's current SRTP keys (nil: plain RTP).
func (l *leg) keys() *sdesKeys {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.haveNeg {
		return nil
	}
	return l.neg.SRTP
}

// offerSD returns our current SDP (the offer of an outbound leg until its answer).
func (l *leg) offerSD() *SessionDescription {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.localSD
}

// rekey switches the stream to keys when they differ from those in use (a re-INVITE that
// re-keyed, or moved between RTP and SRTP).
func (m *legMedia) rekey(keys *sdesKeys) {
	m.txMu.Lock()
	same := m.keys.same(keys)
	m.txMu.Unlock()
	if same {
		return
	}
	var sec *media.SRTP
	if keys != nil {
		var err error
		if sec, err = keys.contexts(); err != nil {
			m.log.Warn("sip: SRTP re-key failed", "err", err)
			return
		}
	}
	m.ep.SetSRTP(sec)
	m.txMu.Lock()
	m.keys = keys
	m.rekeys++
	m.txMu.Unlock()
	m.log.Info("sip: SRTP keys changed", "suite", keys.String())
}

// Rekey sends a re-INVITE offering new SRTP keys for every suite (RFC 4568 §7.1.4): once the
// peer answers, both directions use the new keys. A long call re-keys this way, as RFC 3711
// §9.2 asks before 2^48 packets. It fails with ErrNotEstablished before the answer and
// ErrSRTPRequired on a plain-RTP call.
func (c *Call) Rekey(ctx context.Context) error {
	l := c.primary.Load()
	if l == nil {
		return ErrNotEstablished
	}
	if l.keys() == nil {
		return fmt.Errorf("%w: the call's media is plain RTP", ErrSRTPRequired)
	}
	l.mu.Lock()
	dir := SendRecv
	if l.localSD != nil && len(l.localSD.Media) > 0 && l.localSD.Media[0].Direction != "" {
		dir = l.localSD.Media[0].Direction
	}
	l.mu.Unlock()
	sd, err := buildOfferSRTP(l.s.preferCurrent(l), l.med.local, Origin{}, dir, srtpPolicy{mode: SRTPRequired, secure: l.sec.secure}, nil)
	if err != nil {
		return err
	}
	return l.sendReinvite(ctx, sd)
}

// srtpFailAfter is how many packets failing SRTP, with none passing, end a leg: a peer that
// sends with another key than it signalled is a clear failure, not a silent call that the
// inactivity timeout ends 30 s later.
const srtpFailAfter = 50

// onSRTPFail sets what runs (on a goroutine of its own) when the stream fails SRTP.
func (m *legMedia) onSRTPFail(f func()) { m.srtpFail.Store(&f) }

// checkSRTP fires the failure hook once srtpFailAfter packets failed and none ever passed on the
// stream. The run goroutine calls it every second.
func (m *legMedia) checkSRTP() {
	if m.ep == nil || !m.ep.SRTPActive() || m.srtpFailed.Load() {
		return
	}
	st := m.ep.Stats()
	if st.SRTPFailed < srtpFailAfter || st.PacketsReceived > 0 {
		return
	}
	if !m.srtpFailed.CompareAndSwap(false, true) {
		return
	}
	m.log.Warn("sip: every SRTP packet from the peer fails authentication; ending the call", "refused", st.SRTPFailed)
	if f := m.srtpFail.Load(); f != nil {
		go (*f)()
	}
}
