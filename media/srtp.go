package media

import (
	"errors"
	"fmt"
	"sync"

	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"
)

// issue 21: SRTP (RFC 3711) for RTPEndpoint, on pion/srtp. The keys come from the signalling
// (SDES, RFC 4568, in package sip); this file only protects and unprotects packets.

// SRTPProfile is an SRTP crypto suite.
type SRTPProfile string

// The suites Parley speaks (RFC 4568 §6.2, RFC 7714 §14.2).
const (
	AESCM128HMACSHA180 SRTPProfile = "AES_CM_128_HMAC_SHA1_80"
	AESCM128HMACSHA132 SRTPProfile = "AES_CM_128_HMAC_SHA1_32"
	AEADAES128GCM      SRTPProfile = "AEAD_AES_128_GCM"
)

// SRTPProfiles lists the suites in Parley's order of preference.
var SRTPProfiles = []SRTPProfile{AESCM128HMACSHA180, AESCM128HMACSHA132, AEADAES128GCM}

func (p SRTPProfile) pion() (srtp.ProtectionProfile, bool) {
	switch p {
	case AESCM128HMACSHA180:
		return srtp.ProtectionProfileAes128CmHmacSha1_80, true
	case AESCM128HMACSHA132:
		return srtp.ProtectionProfileAes128CmHmacSha1_32, true
	case AEADAES128GCM:
		return srtp.ProtectionProfileAeadAes128Gcm, true
	}
	return 0, false
}

// KeyLen returns the length of the master key and master salt, concatenated, the way SDES
// carries them (30 bytes for AES-CM, 28 for AES-GCM); 0 for an unknown suite.
func (p SRTPProfile) KeyLen() int {
	pp, ok := p.pion()
	if !ok {
		return 0
	}
	k, _ := pp.KeyLen()
	s, _ := pp.SaltLen()
	return k + s
}

// Known reports whether Parley speaks suite p.
func (p SRTPProfile) Known() bool { _, ok := p.pion(); return ok }

// ErrSRTP wraps every SRTP setup error. Errors never carry key material.
var ErrSRTP = errors.New("media: SRTP")

// srtpOverhead is the most SRTP adds to a packet: the 16-byte GCM tag, or a 10-byte HMAC tag.
const srtpOverhead = 16

// The shortest packets that can be SRTP (an RTP header and the shortest tag, 4 bytes of
// HMAC-SHA1-32) and SRTCP (RTCP header and sender SSRC, the SRTCP index, a 10-byte tag):
// anything shorter is malformed, not a failed authentication.
const (
	minSRTP  = 12 + 4
	minSRTCP = 8 + 4 + 10
)

// SRTP holds the four SRTP contexts of one stream: send and receive, RTP and RTCP (each pion
// context is used by one goroutine at a time: RTP send under the endpoint's txMu, RTCP send
// under rtcpMu, RTP receive on the RTP read loop, RTCP receive on either read loop behind
// rxRTCP's mutex). Build it with NewSRTP; it never prints its keys.
type SRTP struct {
	profile SRTPProfile
	txRTP   *srtp.Context
	txRTCP  *srtp.Context
	rxRTP   *srtp.Context
	rxMu    sync.Mutex // the RTCP receive context may be used by two read loops
	rxRTCP  *srtp.Context
}

// NewSRTP builds the contexts of a stream whose outgoing packets are protected with local
// (master key || master salt) and incoming ones checked with remote, both of suite p. The
// incoming direction has a 64-packet replay window (RFC 3711 §3.3.2).
func NewSRTP(p SRTPProfile, local, remote []byte) (*SRTP, error) {
	pp, ok := p.pion()
	if !ok {
		return nil, fmt.Errorf("%w: unknown suite %q", ErrSRTP, string(p))
	}
	if len(local) != p.KeyLen() || len(remote) != p.KeyLen() {
		return nil, fmt.Errorf("%w: %s needs %d bytes of key and salt", ErrSRTP, p, p.KeyLen())
	}
	kl, _ := pp.KeyLen()
	mk := func(key []byte, opts ...srtp.ContextOption) (*srtp.Context, error) {
		c, err := srtp.CreateContext(key[:kl], key[kl:], pp, opts...)
		if err != nil {
			return nil, fmt.Errorf("%w: %s context: %v", ErrSRTP, p, err)
		}
		return c, nil
	}
	s := &SRTP{profile: p}
	var err error
	if s.txRTP, err = mk(local); err != nil {
		return nil, err
	}
	if s.txRTCP, err = mk(local); err != nil {
		return nil, err
	}
	if s.rxRTP, err = mk(remote, srtp.SRTPReplayProtection(64)); err != nil {
		return nil, err
	}
	if s.rxRTCP, err = mk(remote, srtp.SRTCPReplayProtection(64)); err != nil {
		return nil, err
	}
	return s, nil
}

// Profile returns the suite.
func (s *SRTP) Profile() SRTPProfile { return s.profile }

// String names the suite only.
func (s *SRTP) String() string { return "srtp(" + string(s.profile) + ")" }

// protectRTP encrypts the marshalled packet pkt (whose header is h) into dst.
func (s *SRTP) protectRTP(dst, pkt []byte, h *rtp.Header) ([]byte, error) {
	return s.txRTP.EncryptRTP(dst, pkt, h)
}

// unprotectRTP authenticates and decrypts pkt into dst (header and payload).
func (s *SRTP) unprotectRTP(dst, pkt []byte, h *rtp.Header) ([]byte, error) {
	return s.rxRTP.DecryptRTP(dst, pkt, h)
}

func (s *SRTP) protectRTCP(dst, pkt []byte) ([]byte, error) {
	return s.txRTCP.EncryptRTCP(dst, pkt, nil)
}

func (s *SRTP) unprotectRTCP(dst, pkt []byte) ([]byte, error) {
	s.rxMu.Lock()
	defer s.rxMu.Unlock()
	return s.rxRTCP.DecryptRTCP(dst, pkt, nil)
}

// SetSRTP protects the stream from now on with s (nil: plain RTP). A re-INVITE that brings new
// keys (RFC 4568 §7.1.4) calls it again: the next packet sent uses the new key, and the
// packets received are checked against the new remote key.
func (e *RTPEndpoint) SetSRTP(s *SRTP) {
	e.txMu.Lock()
	e.srtp.Store(s)
	e.txMu.Unlock()
}

// SRTPActive reports whether the stream is protected.
func (e *RTPEndpoint) SRTPActive() bool { return e.srtp.Load() != nil }

// srtpFail counts a packet that failed SRTP checks and logs the first one (never a key).
func (e *RTPEndpoint) srtpFail(what string, err error) {
	e.srtpFailed.Add(1)
	if e.srtpWarned.CompareAndSwap(false, true) {
		e.log.Warn("media: "+what+" packet refused (wrong key or replay)", "err", err.Error())
	}
}
