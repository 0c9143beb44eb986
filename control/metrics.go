package control

import (
	"context"
	"runtime/debug"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/internal/procs"
	"github.com/parley-voice/parley/session"
	"github.com/parley-voice/parley/sip"
	"github.com/parley-voice/parley/webrtc"
)

// metrics are the node's Prometheus collectors; each node has its own registry so tests can run
// several nodes in one process.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	draining prometheus.Gauge
	inFlight prometheus.Gauge
	voice    voiceMetrics
}

// voiceMetrics are the calls' collectors. Labels are bounded: channel, direction, end reason
// (a fixed set), SIP status code and RTP direction; never a call.
type voiceMetrics struct {
	active      *prometheus.GaugeVec   // channel
	starts      *prometheus.CounterVec // channel, direction
	ends        *prometheus.CounterVec // channel, reason
	sip         *prometheus.CounterVec // direction (sent, received), code
	rtpPackets  *prometheus.CounterVec // direction (sent, received)
	rtpLost     *prometheus.CounterVec // direction: received (our reception), sent (the peer's RTCP reports)
	rtpLate     *prometheus.CounterVec // direction (received)
	rtpConceal  prometheus.Counter
	rtpJitter   *prometheus.HistogramVec // direction
	rtpSendErrs prometheus.Counter
}

func newVoiceMetrics() voiceMetrics {
	return voiceMetrics{
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "parley_calls_active", Help: "Calls in progress on this node (ringing or answered), by channel.",
		}, []string{"channel"}),
		starts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_call_starts_total", Help: "Calls taken or placed, by channel and direction.",
		}, []string{"channel", "direction"}),
		ends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_call_ends_total", Help: "Calls ended, by channel and end reason.",
		}, []string{"channel", "reason"}),
		sip: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_sip_responses_total", Help: "SIP responses sent and received, by status code (2xx retransmissions not counted).",
		}, []string{"direction", "code"}),
		rtpPackets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_rtp_packets_total", Help: "RTP packets of ended calls, by direction.",
		}, []string{"direction"}),
		rtpLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_rtp_lost_packets_total", Help: "RTP packets lost over ended calls (RFC 3550 A.3), by direction: received (the peers' streams, as Parley counted), sent (Parley's streams, as the peers' RTCP reports said).",
		}, []string{"direction"}),
		rtpLate: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_rtp_late_packets_total", Help: "RTP packets that came after their turn to play and were dropped, over ended calls, by direction (received).",
		}, []string{"direction"}),
		rtpConceal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_rtp_concealed_frames_total", Help: "20 ms frames made up for lost or late packets, over ended calls (concealment rate: divide by received packets).",
		}),
		rtpJitter: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "parley_rtp_jitter_seconds", Help: "Interarrival jitter at the end of each call (RFC 3550 A.8), by direction: received (the peer's stream), sent (Parley's, as the peer reported it).",
			Buckets: []float64{.001, .0025, .005, .01, .02, .04, .08, .16, .32},
		}, []string{"direction"}),
		rtpSendErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_rtp_send_errors_total", Help: "RTP packets that could not be encoded or sent, over ended calls.",
		}),
	}
}

func (v voiceMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{v.active, v.starts, v.ends, v.sip, v.rtpPackets, v.rtpLost, v.rtpLate, v.rtpConceal, v.rtpJitter, v.rtpSendErrs}
}

// sipObserver counts a SIP server's calls and responses (sip.Observer), channel "phone".
type sipObserver struct{ v voiceMetrics }

func (o sipObserver) CallStarted(dir sip.CallDirection) {
	o.v.active.WithLabelValues("phone").Inc()
	o.v.starts.WithLabelValues("phone", string(dir)).Inc()
}

func (o sipObserver) CallEnded(dir sip.CallDirection, reason session.EndReason, st sip.CallStats) {
	o.v.active.WithLabelValues("phone").Dec()
	o.v.ends.WithLabelValues("phone", boundedReason(reason)).Inc()
	o.v.rtpPackets.WithLabelValues("sent").Add(float64(st.PacketsSent))
	o.v.rtpPackets.WithLabelValues("received").Add(float64(st.PacketsReceived))
	if st.PacketsLost > 0 {
		o.v.rtpLost.WithLabelValues("received").Add(float64(st.PacketsLost))
	}
	if st.RemotePacketsLost > 0 {
		o.v.rtpLost.WithLabelValues("sent").Add(float64(st.RemotePacketsLost))
	}
	o.v.rtpLate.WithLabelValues("received").Add(float64(st.Late))
	o.v.rtpConceal.Add(float64(st.Concealed))
	o.v.rtpSendErrs.Add(float64(st.SendErrors))
	if st.PacketsReceived > 0 {
		o.v.rtpJitter.WithLabelValues("received").Observe(st.Jitter.Seconds())
	}
	if st.RemoteJitter > 0 {
		o.v.rtpJitter.WithLabelValues("sent").Observe(st.RemoteJitter.Seconds())
	}
}

// observeWebRTC adds a browser call's RTP figures to the RTP series, as CallEnded does for a
// phone call: packets, loss and jitter by direction, received from the service's own count of
// the page's stream, sent from the page's RTCP receiver reports (issue 22 item 11).
func (v voiceMetrics) observeWebRTC(st webrtc.MediaStats) {
	v.rtpPackets.WithLabelValues("sent").Add(float64(st.PacketsSent))
	v.rtpPackets.WithLabelValues("received").Add(float64(st.PacketsReceived))
	if st.PacketsLost > 0 {
		v.rtpLost.WithLabelValues("received").Add(float64(st.PacketsLost))
	}
	if st.RemotePacketsLost > 0 {
		v.rtpLost.WithLabelValues("sent").Add(float64(st.RemotePacketsLost))
	}
	if st.PacketsReceived > 0 {
		v.rtpJitter.WithLabelValues("received").Observe(st.Jitter.Seconds())
	}
	if st.RemoteReports > 0 {
		v.rtpJitter.WithLabelValues("sent").Observe(st.RemoteJitter.Seconds())
	}
}

func (o sipObserver) Response(sent bool, status int) {
	dir := "received"
	if sent {
		dir = "sent"
	}
	o.v.sip.WithLabelValues(dir, boundedCode(status)).Inc()
}

// webCallCounter counts browser calls (channel "voice") in the calls' metrics: a
// runtime.WebCalls whose calls are counted once their media is up, and again when their
// conversation ends (issue 22 item 11).
type webCallCounter struct {
	runtime.WebCalls
	v voiceMetrics
}

func (w webCallCounter) CreateWebCall(ctx context.Context, r runtime.BrowserCall) (runtime.WebCall, error) {
	start := r.Start
	r.Start = func(ctx context.Context, port session.AudioPort, sink session.Sink) (*session.Conversation, error) {
		conv, err := start(ctx, port, sink)
		if err != nil || conv == nil {
			return conv, err
		}
		w.v.active.WithLabelValues("voice").Inc()
		w.v.starts.WithLabelValues("voice", "inbound").Inc()
		conv.AfterDone(func() {
			if ms, ok := port.(interface{ MediaStats() webrtc.MediaStats }); ok {
				w.v.observeWebRTC(ms.MediaStats())
			}
			w.v.active.WithLabelValues("voice").Dec()
			w.v.ends.WithLabelValues("voice", boundedReason(conv.EndReason())).Inc()
		})
		return conv, nil
	}
	return w.WebCalls.CreateWebCall(ctx, r)
}

// boundedCode keeps the code label to the valid range: anything else counts as "other".
func boundedCode(status int) string {
	if status < 100 || status > 699 {
		return "other"
	}
	return strconv.Itoa(status)
}

// knownReasons is the set of end reasons a label may carry; others count as "other".
var knownReasons = map[session.EndReason]bool{
	session.EndCompleted: true, session.EndCallerHungUp: true, session.EndCalleeHungUp: true, session.EndAgentEnded: true,
	session.EndNoAnswer: true, session.EndBusy: true, session.EndInvalidNumber: true, session.EndVoicemail: true,
	session.EndTransferred: true, session.EndMediaTimeout: true, session.EndNetworkLost: true, session.EndProviderError: true,
	session.EndFailed: true, session.EndSilenceTimeout: true, session.EndMaxDuration: true, session.EndAPI: true, session.EndShutdown: true,
}

func boundedReason(r session.EndReason) string {
	if knownReasons[r] {
		return string(r)
	}
	return "other"
}

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "parley_http_requests_total", Help: "HTTP requests by method, route and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "parley_http_request_duration_seconds", Help: "HTTP request latency by method and route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
		}, []string{"method", "route"}),
		draining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_draining", Help: "1 while the node drains before stopping.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "parley_http_requests_in_flight", Help: "HTTP requests being served now.",
		}),
		voice: newVoiceMetrics(),
	}
	reg.MustRegister(m.requests, m.duration, m.draining, m.inFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(m.voice.collectors()...)
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "parley_gomaxprocs_changes_total",
		Help: "Times low-load tuning changed the Go scheduler's processors (PARLEY_LOW_LOAD_TUNING; the current number is go_sched_gomaxprocs_threads).",
	}, func() float64 { return float64(procs.Changes()) }))
	return m
}

func debugStack() []byte { return debug.Stack() }
