package sip

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/parley-voice/parley/codec"
)

// DefaultCodecs is the audio codec order Parley offers and accepts when Options.Codecs is empty:
// PCMU, PCMA, G722, Opus. telephone-event (RFC 4733) is always offered beside them.
var DefaultCodecs = []codec.Info{codec.PCMU, codec.PCMA, codec.G722, codec.Opus}

// Fixed SDP choices of the offers Parley makes.
const (
	ptTelephoneEvent8k  = 101 // telephone-event/8000 (RFC 4733 §7.1.1)
	ptTelephoneEvent48k = 110 // telephone-event/48000, offered beside Opus
	opusFMTP            = "minptime=20;useinbandfec=1"
	dtmfFMTP            = "0-16"
	ourPtime            = 20 // Parley frames are 20 ms; a=ptime says what we like to receive
)

// Negotiated is the outcome of one SDP offer/answer exchange for the audio stream.
type Negotiated struct {
	// Audio is the codec in use, with the payload type agreed for it. For Opus its SampleRate is
	// the pipeline rate (16 kHz): libopus encodes and decodes there directly.
	Audio codec.Info
	// DTMF is the telephone-event format; HasDTMF is false when the peer offered none.
	DTMF    codec.Info
	HasDTMF bool
	// Ptime is the packet duration the peer asked to receive (a=ptime), 20 when it said nothing.
	Ptime int
	// Remote and RemoteRTCP are where to send RTP and RTCP. Remote is invalid when the peer
	// gave no usable address (c=0.0.0.0 hold).
	Remote, RemoteRTCP netip.AddrPort
	// Local is our direction; RemoteDir the peer's.
	Local, RemoteDir Direction
	// SRTP holds the SDES keys when the stream is RTP/SAVP (issue 21); nil for plain RTP.
	SRTP *sdesKeys
}

// Sending reports whether we send audio: both our direction and the peer's allow it, and the
// peer gave an address.
func (n Negotiated) Sending() bool {
	return n.Local.Sends() && n.RemoteDir.Receives() && n.Remote.IsValid()
}

// Receiving reports whether the peer is expected to send us audio (for the inactivity timeout).
func (n Negotiated) Receiving() bool { return n.Local.Receives() && n.RemoteDir.Sends() }

// formatInfo resolves a payload type of m to a known codec: by its a=rtpmap, or for static types
// without one by RFC 3551 §6.
func formatInfo(m *MediaDescription, pt uint8) (codec.Info, bool) {
	if r, ok := m.RTPMaps[pt]; ok {
		info, ok := codec.LookupInfo(r.Name, r.ClockRate)
		if !ok {
			return codec.Info{}, false
		}
		if strings.EqualFold(info.Name, codec.Opus.Name) && r.Channels != 2 {
			return codec.Info{}, false // RFC 7587 §7: opus/48000/2 or it is not Opus
		}
		info.PayloadType = pt
		return info, true
	}
	switch pt {
	case codec.PCMU.PayloadType:
		return codec.PCMU, true
	case codec.PCMA.PayloadType:
		return codec.PCMA, true
	case codec.G722.PayloadType:
		return codec.G722, true
	}
	return codec.Info{}, false
}

// enabled reports whether a codec of that name is in the list.
func enabled(list []codec.Info, info codec.Info) bool {
	for _, c := range list {
		if strings.EqualFold(c.Name, info.Name) {
			return true
		}
	}
	return false
}

// pipelineInfo adjusts a negotiated Opus to encode and decode at 16 kHz.
func pipelineInfo(info codec.Info) codec.Info {
	if strings.EqualFold(info.Name, codec.Opus.Name) {
		info.SampleRate = 16000
	}
	return info
}

// audioSection returns the index of the first audio section with a non-zero port and an RTP
// profile, or -1.
func audioSection(sd *SessionDescription) int {
	for i := range sd.Media {
		m := &sd.Media[i]
		if m.Type == "audio" && m.Port != 0 && strings.HasPrefix(m.Proto, "RTP/") {
			return i
		}
	}
	return -1
}

// answerOffer is the answerer's side of RFC 3264 §6: it picks the first format of the offer's
// first usable audio stream that is among codecs (the offerer's preference wins), the
// telephone-event format at the same clock rate, and builds the answer: that one codec and
// telephone-event on our address, the direction reversed, every other stream rejected with
// port 0. It returns ErrNoCommonCodec (wrapped) when nothing fits. RTP/SAVP sections are
// taken like RTP/AVP ones: answerOfferSRTP (srtp.go) rejects those the trunk's policy forbids
// beforehand and adds the keys after.
func answerOffer(offer *SessionDescription, codecs []codec.Info, local netip.AddrPort, origin Origin) (Negotiated, *SessionDescription, error) {
	idx := -1
	var n Negotiated
	for i := range offer.Media {
		m := &offer.Media[i]
		if m.Type != "audio" || m.Port == 0 || (m.Proto != "RTP/AVP" && m.Proto != "RTP/AVPF" && !isSecureProto(m.Proto)) {
			continue
		}
		found := false
		for _, pt := range m.PayloadTypes() {
			info, ok := formatInfo(m, pt)
			if !ok || info.Name == codec.TelephoneEvent.Name || !enabled(codecs, info) {
				continue
			}
			n.Audio, found = pipelineInfo(info), true
			break
		}
		if !found {
			continue
		}
		idx = i
		n.DTMF, n.HasDTMF = pickDTMF(m, n.Audio.ClockRate)
		n.Ptime = ourPtime
		if m.Ptime > 0 {
			n.Ptime = m.Ptime
		}
		n.Remote = offer.AudioAddr(m)
		n.RemoteRTCP = offer.RTCPAddrPort(m)
		n.RemoteDir = offer.MediaDirection(m)
		n.Local = n.RemoteDir.Reverse()
		break
	}
	if idx < 0 {
		return Negotiated{}, nil, fmt.Errorf("%w in the offer", ErrNoCommonCodec)
	}
	ans := &SessionDescription{Origin: origin, Name: "parley", Conn: local.Addr()}
	for i := range offer.Media {
		om := &offer.Media[i]
		am := MediaDescription{Type: om.Type, Proto: om.Proto, Formats: om.Formats}
		if i == idx {
			am = audioMedia(local.Port(), om.Proto, n.Audio, n.DTMF, n.HasDTMF, n.Local)
			if n.HasDTMF {
				am.FMTPs[n.DTMF.PayloadType] = answerEvents(om.FMTPs[n.DTMF.PayloadType])
			}
		}
		ans.Media = append(ans.Media, am)
	}
	return n, ans, nil
}

// answerEvents is the fmtp of the telephone-event format of an answer: the events of the
// offer's list (RFC 4733 §2.4.1; no list means 0-15, §7.1.1) that Parley handles (0-16),
// never one the offer did not list.
func answerEvents(offered string) string {
	if strings.TrimSpace(offered) == "" {
		offered = "0-15"
	}
	var have [17]bool
	for _, part := range strings.Split(offered, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil {
				continue
			}
		}
		for e := max(a, 0); e <= min(b, 16); e++ {
			have[e] = true
		}
	}
	var out []string
	for e := 0; e <= 16; e++ {
		if !have[e] {
			continue
		}
		f := e
		for e+1 <= 16 && have[e+1] {
			e++
		}
		if f == e {
			out = append(out, strconv.Itoa(f))
		} else {
			out = append(out, strconv.Itoa(f)+"-"+strconv.Itoa(e))
		}
	}
	if len(out) == 0 {
		return strings.TrimSpace(offered) // none we handle: we send none, and list nothing new
	}
	return strings.Join(out, ",")
}

// pickDTMF returns the telephone-event format of m at rate, else at any rate.
func pickDTMF(m *MediaDescription, rate uint32) (codec.Info, bool) {
	var any codec.Info
	have := false
	for _, pt := range m.PayloadTypes() {
		info, ok := formatInfo(m, pt)
		if !ok || info.Name != codec.TelephoneEvent.Name {
			continue
		}
		if info.ClockRate == rate {
			return info, true
		}
		if !have {
			any, have = info, true
		}
	}
	return any, have
}

// audioMedia builds our audio section for one codec (and telephone-event).
func audioMedia(port uint16, proto string, audio, dtmf codec.Info, hasDTMF bool, dir Direction) MediaDescription {
	if proto == "" {
		proto = "RTP/AVP"
	}
	m := MediaDescription{
		Type: "audio", Port: int(port), Proto: proto,
		RTPMaps:   map[uint8]RTPMap{},
		FMTPs:     map[uint8]string{},
		Ptime:     ourPtime,
		Direction: dir,
	}
	add := func(info codec.Info, fmtp string) {
		m.Formats = append(m.Formats, fmt.Sprint(info.PayloadType))
		m.RTPMaps[info.PayloadType] = RTPMap{Name: info.Name, ClockRate: info.ClockRate, Channels: info.Channels}
		if fmtp != "" {
			m.FMTPs[info.PayloadType] = fmtp
		}
	}
	add(audio, fmtpFor(audio))
	if hasDTMF {
		add(dtmf, dtmfFMTP)
	}
	return m
}

func fmtpFor(info codec.Info) string {
	if strings.EqualFold(info.Name, codec.Opus.Name) {
		return opusFMTP
	}
	return ""
}

// buildOffer makes an SDP offer of codecs in order, with telephone-event at 8 kHz (and at
// 48 kHz when Opus is offered), on our address, with direction dir.
func buildOffer(codecs []codec.Info, local netip.AddrPort, origin Origin, dir Direction) *SessionDescription {
	m := MediaDescription{
		Type: "audio", Port: int(local.Port()), Proto: "RTP/AVP",
		RTPMaps: map[uint8]RTPMap{}, FMTPs: map[uint8]string{},
		Ptime: ourPtime, MaxPtime: ourPtime * 3, Direction: dir,
	}
	opus := false
	for _, c := range codecs {
		if c.Name == codec.TelephoneEvent.Name {
			continue
		}
		m.Formats = append(m.Formats, fmt.Sprint(c.PayloadType))
		m.RTPMaps[c.PayloadType] = RTPMap{Name: c.Name, ClockRate: c.ClockRate, Channels: c.Channels}
		if f := fmtpFor(c); f != "" {
			m.FMTPs[c.PayloadType] = f
			opus = true
		}
	}
	if opus {
		m.Formats = append(m.Formats, fmt.Sprint(ptTelephoneEvent48k))
		m.RTPMaps[ptTelephoneEvent48k] = RTPMap{Name: codec.TelephoneEvent.Name, ClockRate: 48000, Channels: 1}
		m.FMTPs[ptTelephoneEvent48k] = dtmfFMTP
	}
	m.Formats = append(m.Formats, fmt.Sprint(ptTelephoneEvent8k))
	m.RTPMaps[ptTelephoneEvent8k] = RTPMap{Name: codec.TelephoneEvent.Name, ClockRate: 8000, Channels: 1}
	m.FMTPs[ptTelephoneEvent8k] = dtmfFMTP
	return &SessionDescription{Origin: origin, Name: "parley", Conn: local.Addr(), Media: []MediaDescription{m}}
}

// takeAnswer is the offerer's side of RFC 3264 §7: it reads the answer to an offer we made from
// codecs. The answer's first usable audio stream must name a codec we offered; its first such
// format is the one in use.
func takeAnswer(answer *SessionDescription, codecs []codec.Info) (Negotiated, error) {
	idx := audioSection(answer)
	if idx < 0 {
		return Negotiated{}, fmt.Errorf("%w: the answer accepts no audio stream", ErrNoCommonCodec)
	}
	m := &answer.Media[idx]
	var n Negotiated
	found := false
	for _, pt := range m.PayloadTypes() {
		info, ok := formatInfo(m, pt)
		if !ok || info.Name == codec.TelephoneEvent.Name || !enabled(codecs, info) {
			continue
		}
		n.Audio, found = pipelineInfo(info), true
		break
	}
	if !found {
		return Negotiated{}, fmt.Errorf("%w: the answer names no codec we offered", ErrNoCommonCodec)
	}
	n.DTMF, n.HasDTMF = pickDTMF(m, n.Audio.ClockRate)
	n.Ptime = ourPtime
	if m.Ptime > 0 {
		n.Ptime = m.Ptime
	}
	n.Remote = answer.AudioAddr(m)
	n.RemoteRTCP = answer.RTCPAddrPort(m)
	n.RemoteDir = answer.MediaDirection(m)
	n.Local = SendRecv
	return n, nil
}
