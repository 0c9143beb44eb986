// Package config holds every setting of the parley binary: its flag, its environment variable
// (PARLEY_…), its default and its check.
//
// Each setting is declared once in the table below; flags override the environment, the
// environment overrides the default. A bad value stops the start with one line that names the
// setting. This package reads settings; it must never open sockets, files or databases.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/parley-voice/parley/internal/netguard"

	"github.com/parley-voice/parley/control/secrets"
)

// Role is one of the jobs a node can run.
type Role string

// The roles of a node (DESIGN.md "One binary, several roles").
const (
	RoleAPI    Role = "api"
	RoleMedia  Role = "media"
	RoleWorker Role = "worker"
)

// Roles is the set of roles a node runs.
type Roles map[Role]bool

// Has reports whether r is among the roles.
func (rs Roles) Has(r Role) bool { return rs[r] }

// String renders the roles in a stable order, comma separated.
func (rs Roles) String() string {
	var out []string
	for r, on := range rs {
		if on {
			out = append(out, string(r))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// PortRange is an inclusive range of UDP ports.
type PortRange struct{ Min, Max int }

func (p PortRange) String() string { return fmt.Sprintf("%d-%d", p.Min, p.Max) }

// Config is the parsed configuration of one node.
type Config struct {
	HTTPAddr    string
	BaseURL     string
	DataDir     string
	DatabaseURL string
	RedisURL    string
	Roles       Roles
	SIPAddr     string
	SIPTLSAddr  string
	SIPTLSCert  string
	SIPTLSKey   string
	// SIPTLSClientAuth is none, request or require (issue 21: inbound mutual TLS).
	SIPTLSClientAuth string
	RTPPorts         PortRange
	PublicIP         string
	TransferAllow    []netip.Prefix
	MediaAddr        string
	WebRTCUDPPort    int
	MasterKey        string
	// MasterKeyPrevious lists (comma-separated) previous master keys still accepted (issue 17).
	MasterKeyPrevious string
	LogLevel          slog.Level
	LogFormat         string
	DrainTimeout      time.Duration
	MaxBodyBytes      int64
	KeyRatePerMin     int
	OrgRatePerMin     int
	NodeID            string
	Pprof             bool

	// Outbound requests to customer URLs (internal/netguard).
	OutboundAllowPrivate bool
	OutboundCAFile       string

	// issue 14: webhook deliveries.
	WebhookRetrySchedule []time.Duration
	WebhookConcurrency   int
	// issue 16: the optional embeddings of knowledge bases (an OpenAI-compatible server).
	EmbeddingsBaseURL, EmbeddingsKey, EmbeddingsModel string

	// Vendors (see control/providers).
	OpenAIBaseURL, OpenAIKey         string
	AnthropicBaseURL, AnthropicKey   string
	DeepgramBaseURL, DeepgramKey     string
	ElevenLabsBaseURL, ElevenLabsKey string
	TranscribeBaseURL, TranscribeKey string
	SpeechBaseURL, SpeechKey         string
	FakesURL                         string
	WhatsAppBaseURL                  string // issue 19: Meta's Graph API
	LLMFirstTokenTimeout             time.Duration
	MaxCalls                         int
	StartingCreditMicros             int64 // credit of the organization bootstrapped on the embedded default
	GCPercent                        int
	LowLoadTuning                    bool // issue 20: adapt GOMAXPROCS to the load and keep sysmon out of deep sleep
	OpusComplexity                   int
	OpusApplication                  string        // issue 20: "lowdelay" (CELT only) or "voip" (SILK with FEC)
	WebRTCReadPeriod                 time.Duration // issue 20: batched reads of the WebRTC socket; 0 reads each packet as it comes
	WebCallsPerDay                   int
	ChatIdleTimeout                  time.Duration // issue 13: a chat with no message for this long ends
	Record                           bool
	TTSFirstByteTimeout              time.Duration
	STTConnectTimeout                time.Duration
}

// setting is one row of the settings table.
type setting struct {
	flag, env, def, help string
	set                  func(c *Config, v string) error
}

// Scope says which commands use a setting.
type Scope int

const (
	// ScopeStore settings are used by every command that opens the store (serve, migrate, admin).
	ScopeStore Scope = 1 << iota
	// ScopeServe settings are used by serve only.
	ScopeServe
)

type scopedSetting struct {
	setting
	scope Scope
}

func settings() []scopedSetting {
	return []scopedSetting{
		{setting{"http-addr", "PARLEY_HTTP_ADDR", ":8080", "address the HTTP API listens on", setAddr(func(c *Config) *string { return &c.HTTPAddr })}, ScopeServe},
		{setting{"base-url", "PARLEY_BASE_URL", "", "public URL used in links the API returns, such as web-call join pages (default: http://<http-addr host>:<port>, localhost when the address names no host)", setBaseURL}, ScopeServe},
		{setting{"data-dir", "PARLEY_DATA_DIR", "./data", "directory for the embedded database, recordings, attachments and the generated master key", setNonEmpty(func(c *Config) *string { return &c.DataDir })}, ScopeStore | ScopeServe},
		{setting{"database-url", "PARLEY_DATABASE_URL", "", "empty: embedded SQLite file in the data directory; postgres://… : PostgreSQL through pgx", setDatabaseURL}, ScopeStore | ScopeServe},
		{setting{"redis-url", "PARLEY_REDIS_URL", "", "empty: in-process bus (one node); redis://… : Redis bus shared by many nodes", setRedisURL}, ScopeStore | ScopeServe},
		{setting{"roles", "PARLEY_ROLES", "api,media,worker", "comma-separated roles this node runs: api, media, worker", setRoles}, ScopeServe},
		{setting{"sip-addr", "PARLEY_SIP_ADDR", ":5060", "address the SIP endpoint listens on (UDP and TCP)", setAddr(func(c *Config) *string { return &c.SIPAddr })}, ScopeServe},
		{setting{"sip-tls-addr", "PARLEY_SIP_TLS_ADDR", ":5061", "address of the SIP TLS listener (used only when a certificate is set)", setAddr(func(c *Config) *string { return &c.SIPTLSAddr })}, ScopeServe},
		{setting{"sip-tls-cert", "PARLEY_SIP_TLS_CERT", "", "PEM certificate file for SIP over TLS (empty: no TLS listener)", setString(func(c *Config) *string { return &c.SIPTLSCert })}, ScopeServe},
		{setting{"sip-tls-key", "PARLEY_SIP_TLS_KEY", "", "PEM private key file for SIP over TLS", setString(func(c *Config) *string { return &c.SIPTLSKey })}, ScopeServe},
		{setting{"sip-tls-client-auth", "PARLEY_SIP_TLS_CLIENT_AUTH", "none", "client certificates on the SIP TLS listener: none, request (a certificate, when given, must be signed by a trunk's CA and picks that trunk) or require (no certificate, no connection)", setString(func(c *Config) *string { return &c.SIPTLSClientAuth })}, ScopeServe},
		{setting{"rtp-ports", "PARLEY_RTP_PORTS", "10000-20000", "UDP port range for RTP (pairs: even RTP, odd RTCP)", setPorts}, ScopeServe},
		{setting{"public-ip", "PARLEY_PUBLIC_IP", "", "IP address advertised in SIP Via/Contact, SDP and WebRTC NAT 1:1 candidates (empty: the local address)", setPublicIP}, ScopeServe},
		{setting{"media-addr", "PARLEY_MEDIA_ADDR", "", "IP address the RTP ports and the WebRTC UDP port bind (empty: the host of --sip-addr when it names one, else every interface)", setMediaAddr}, ScopeServe},
		{setting{"transfer-allow", "PARLEY_TRANSFER_ALLOW", "", "comma-separated CIDRs of non-public networks call transfers may go to, e.g. a PBX on the LAN (empty: transfers to SIP URIs on loopback, private and link-local addresses are refused)", setTransferAllow}, ScopeServe},
		{setting{"webrtc-udp-port", "PARLEY_WEBRTC_UDP_PORT", "3478", "the one UDP port all WebRTC ICE traffic uses (UDP mux); 0 picks a free port", setPort(func(c *Config) *int { return &c.WebRTCUDPPort })}, ScopeServe},
		{setting{"webrtc-read-period", "PARLEY_WEBRTC_READ_PERIOD", "20ms", "while web calls are up, the WebRTC UDP port is read this often, every queued packet in one recvmmsg, so the node wakes once per period instead of once per packet of every call (issue 20: the wake-ups are the largest cost of a web call after the codecs); incoming audio and handshakes wait up to one period (the playout's slack of three frames covers it, so no frame more is concealed). 0 reads each packet as it arrives", setDuration(func(c *Config) *time.Duration { return &c.WebRTCReadPeriod })}, ScopeServe},
		{setting{"master-key", "PARLEY_MASTER_KEY", "", "base64 or hex 32-byte key that encrypts secrets at rest (empty: generated into <data-dir>/master.key on first start)", setMasterKey}, ScopeStore | ScopeServe},
		// issue 17: the previous master keys still accepted during a rotation.
		{setting{"master-key-previous", "PARLEY_MASTER_KEY_PREVIOUS", "", "comma-separated previous master keys still accepted for reading during a rotation (parley admin master-key rotate); remove them once the rotation is done", setMasterKeyPrevious}, ScopeStore | ScopeServe},
		{setting{"log-level", "PARLEY_LOG_LEVEL", "info", "log level: debug, info, warn, error", setLogLevel}, ScopeStore | ScopeServe},
		{setting{"log-format", "PARLEY_LOG_FORMAT", "text", "log format: text or json", setLogFormat}, ScopeStore | ScopeServe},
		{setting{"drain-timeout", "PARLEY_DRAIN_TIMEOUT", "30s", "on SIGTERM, how long requests and calls in progress may take to finish", setDuration(func(c *Config) *time.Duration { return &c.DrainTimeout })}, ScopeServe},
		{setting{"max-body-bytes", "PARLEY_MAX_BODY_BYTES", "1048576", "largest request body accepted by the API (bytes); some operations set lower limits", setInt64(func(c *Config) *int64 { return &c.MaxBodyBytes }, 1024)}, ScopeServe},
		{setting{"rate-key", "PARLEY_RATE_KEY", "600", "requests per minute allowed per API key (0 disables)", setInt(func(c *Config) *int { return &c.KeyRatePerMin }, 0)}, ScopeServe},
		{setting{"rate-org", "PARLEY_RATE_ORG", "3000", "requests per minute allowed per organization (0 disables)", setInt(func(c *Config) *int { return &c.OrgRatePerMin }, 0)}, ScopeServe},
		{setting{"pprof", "PARLEY_PPROF", "false", "serve Go profiles at /debug/pprof/ (enable only where the HTTP port is private)", setBool(func(c *Config) *bool { return &c.Pprof })}, ScopeServe},
		{setting{"openai-base-url", "PARLEY_OPENAI_BASE_URL", "", "OpenAI-compatible chat completions server (OpenAI, Groq, vLLM, Ollama, llama.cpp); empty: api.openai.com", setURL(func(c *Config) *string { return &c.OpenAIBaseURL })}, ScopeServe},
		{setting{"openai-api-key", "PARLEY_OPENAI_API_KEY", "", "API key for the OpenAI-compatible server", setString(func(c *Config) *string { return &c.OpenAIKey })}, ScopeServe},
		{setting{"anthropic-base-url", "PARLEY_ANTHROPIC_BASE_URL", "", "Anthropic Messages API; empty: api.anthropic.com", setURL(func(c *Config) *string { return &c.AnthropicBaseURL })}, ScopeServe},
		{setting{"anthropic-api-key", "PARLEY_ANTHROPIC_API_KEY", "", "API key for Anthropic", setString(func(c *Config) *string { return &c.AnthropicKey })}, ScopeServe},
		{setting{"deepgram-base-url", "PARLEY_DEEPGRAM_BASE_URL", "", "Deepgram live streaming; empty: wss://api.deepgram.com", setURL(func(c *Config) *string { return &c.DeepgramBaseURL })}, ScopeServe},
		{setting{"deepgram-api-key", "PARLEY_DEEPGRAM_API_KEY", "", "API key for Deepgram", setString(func(c *Config) *string { return &c.DeepgramKey })}, ScopeServe},
		{setting{"elevenlabs-base-url", "PARLEY_ELEVENLABS_BASE_URL", "", "ElevenLabs text-to-speech; empty: api.elevenlabs.io", setURL(func(c *Config) *string { return &c.ElevenLabsBaseURL })}, ScopeServe},
		{setting{"elevenlabs-api-key", "PARLEY_ELEVENLABS_API_KEY", "", "API key for ElevenLabs", setString(func(c *Config) *string { return &c.ElevenLabsKey })}, ScopeServe},
		{setting{"transcribe-base-url", "PARLEY_TRANSCRIBE_BASE_URL", "", "OpenAI-compatible transcription server (whisper.cpp, faster-whisper); empty: the OpenAI base URL", setURL(func(c *Config) *string { return &c.TranscribeBaseURL })}, ScopeServe},
		{setting{"transcribe-api-key", "PARLEY_TRANSCRIBE_API_KEY", "", "API key for the transcription server (empty: the OpenAI key)", setString(func(c *Config) *string { return &c.TranscribeKey })}, ScopeServe},
		{setting{"speech-base-url", "PARLEY_SPEECH_BASE_URL", "", "OpenAI-compatible speech server; empty: the OpenAI base URL", setURL(func(c *Config) *string { return &c.SpeechBaseURL })}, ScopeServe},
		{setting{"speech-api-key", "PARLEY_SPEECH_API_KEY", "", "API key for the speech server (empty: the OpenAI key)", setString(func(c *Config) *string { return &c.SpeechKey })}, ScopeServe},
		{setting{"starting-credit", "PARLEY_STARTING_CREDIT", "10", "USD of credit the first start gives the organization it creates on the embedded default (SQLite), so the first call works; 0 gives none. Ignored with PostgreSQL: add credit with parley admin credit add", setStartingCredit}, ScopeServe},
		{setting{"max-calls", "PARLEY_MAX_CALLS", "50", "voice calls an organization may have going at once, and that one media node takes (over it: 429 to the API, 503 to SIP)", setInt(func(c *Config) *int { return &c.MaxCalls }, 1)}, ScopeServe},
		{setting{"web-calls-per-day", "PARLEY_WEB_CALLS_PER_DAY", "5000", "browser calls an organization may start a day", setInt(func(c *Config) *int { return &c.WebCallsPerDay }, 1)}, ScopeServe},
		{setting{"chat-idle-timeout", "PARLEY_CHAT_IDLE_TIMEOUT", "24h", "a chat with no message for this long ends (silence_timeout); 0 keeps chats open until the agent, the API or their length ends them. Chats outlive restarts and nodes", setDuration(func(c *Config) *time.Duration { return &c.ChatIdleTimeout })}, ScopeServe}, // issue 13
		{setting{"record", "PARLEY_RECORD", "true", "record voice calls (stereo WAV under <data-dir>/recordings)", setBool(func(c *Config) *bool { return &c.Record })}, ScopeServe},
		{setting{"llm-first-token-timeout", "PARLEY_LLM_FIRST_TOKEN_TIMEOUT", "10s", "how long an LLM may take to its first token before the request is retried or fails", setDuration(func(c *Config) *time.Duration { return &c.LLMFirstTokenTimeout })}, ScopeServe},
		{setting{"tts-first-byte-timeout", "PARLEY_TTS_FIRST_BYTE_TIMEOUT", "5s", "how long a TTS may take to its first audio byte", setDuration(func(c *Config) *time.Duration { return &c.TTSFirstByteTimeout })}, ScopeServe},
		{setting{"stt-connect-timeout", "PARLEY_STT_CONNECT_TIMEOUT", "5s", "how long connecting to a streaming STT may take", setDuration(func(c *Config) *time.Duration { return &c.STTConnectTimeout })}, ScopeServe},
		{setting{"embeddings-base-url", "PARLEY_EMBEDDINGS_BASE_URL", "", "OpenAI-compatible /v1/embeddings server (OpenAI, Ollama, llama.cpp, vLLM, TEI, or `parley fakes`) for knowledge-base vectors fused with full text; empty: full text only", setURL(func(c *Config) *string { return &c.EmbeddingsBaseURL })}, ScopeServe},
		{setting{"embeddings-api-key", "PARLEY_EMBEDDINGS_API_KEY", "", "API key for the embeddings server", setString(func(c *Config) *string { return &c.EmbeddingsKey })}, ScopeServe},
		{setting{"embeddings-model", "PARLEY_EMBEDDINGS_MODEL", "text-embedding-3-small", "embeddings model name (changing it needs the documents re-uploaded or crawls refreshed)", setString(func(c *Config) *string { return &c.EmbeddingsModel })}, ScopeServe},
		{setting{"fakes-url", "PARLEY_FAKES_URL", "", "point every vendor at one `parley fakes` server (keyless demo, tests, benchmark)", setURL(func(c *Config) *string { return &c.FakesURL })}, ScopeServe},
		{setting{"whatsapp-base-url", "PARLEY_WHATSAPP_BASE_URL", "", "Meta's Graph API for the WhatsApp channel; empty: https://graph.facebook.com (with fakes-url: the fakes)", setURL(func(c *Config) *string { return &c.WhatsAppBaseURL })}, ScopeServe},
		{setting{"opus-complexity", "PARLEY_OPUS_COMPLEXITY", "2", "Opus encoder complexity for audio sent to browsers, 1–10. In the default low-delay mode a 20 ms frame of speech costs about 18 µs at 2 and about 30 µs at 5 (webrtc BenchmarkOpusEncodeComplexity, thread CPU); in the voip mode 110 µs at 2 and 127 µs at 5. webrtc TestOpusEncodeQuality holds the default mode and complexity within 0.5 dB of the voip mode's segmental SNR at 5", setIntRange(func(c *Config) *int { return &c.OpusComplexity }, 1, 10)}, ScopeServe},
		{setting{"opus-application", "PARLEY_OPUS_APPLICATION", "lowdelay", "Opus encoder mode for audio sent to browsers: `lowdelay` (CELT only: about a sixth of the CPU of voip at complexity 2, a higher segmental SNR and 4 ms less codec delay, but no in-band FEC: a lost packet is concealed by the browser) or `voip` (SILK wideband with in-band FEC coded for 10% loss, for networks that lose packets)", setOpusApplication}, ScopeServe},
		{setting{"gc-percent", "PARLEY_GC_PERCENT", "20", "Go garbage collector target: heap growth allowed over the live heap, in percent (Go's default is 100); a media node's live heap is mostly per-call buffers that allocate nothing per frame, so a tight target costs little CPU and keeps memory per call low. The GOGC environment variable, when set, wins", setInt(func(c *Config) *int { return &c.GCPercent }, 1)}, ScopeServe},
		{setting{"low-load-tuning", "PARLEY_LOW_LOAD_TUNING", "true", "fit the Go scheduler to a media node's bursts: run on one processor while the process uses under 0.25 cores for 2 s, on every processor again once it uses over 0.5 cores in 250 ms; and start again with GODEBUG's scheduler trace at its longest period, which keeps the runtime's monitor thread from waking every 20 µs after each burst. At 5 web calls on 2 otherwise idle cores it cut context switches by about 60 % and CPU by about 30 % (README, Performance: issue 20, session 7); an idle node costs about 0.003 cores more. A GOMAXPROCS or GODEBUG schedtrace set in the environment wins", setBool(func(c *Config) *bool { return &c.LowLoadTuning })}, ScopeServe},
		{setting{"outbound-allow-private", "PARLEY_OUTBOUND_ALLOW_PRIVATE", "false", "UNSAFE in production: let webhooks, tools, MCP servers and crawls reach loopback, private, link-local and CGNAT addresses (local testing needs it; unspecified, multicast and the cloud metadata address stay refused)", setBool(func(c *Config) *bool { return &c.OutboundAllowPrivate })}, ScopeServe},
		{setting{"outbound-ca-file", "PARLEY_OUTBOUND_CA_FILE", "", "UNSAFE in production: PEM file of an extra certificate authority trusted for webhooks, tools, MCP servers and crawls, besides the system's (e.g. a local test receiver's self-signed certificate)", setString(func(c *Config) *string { return &c.OutboundCAFile })}, ScopeServe},
		{setting{"webhook-retry-schedule", "PARLEY_WEBHOOK_RETRY_SCHEDULE", "5s,5m,30m,2h,5h,10h,10h", "waits between the attempts of a webhook delivery after the first, which is immediate (each with up to 20% jitter; a 429 or 503 with Retry-After waits that long instead); after the last the delivery is failed. Tests shorten it", setSchedule}, ScopeServe},
		{setting{"webhook-concurrency", "PARLEY_WEBHOOK_CONCURRENCY", "64", "webhook deliveries one worker node sends at once (a slow receiver holds one for at most 15 s)", setInt(func(c *Config) *int { return &c.WebhookConcurrency }, 1)}, ScopeServe},
		{setting{"node-id", "PARLEY_NODE_ID", "", "name of this node in the cluster (empty: hostname plus a random suffix)", setString(func(c *Config) *string { return &c.NodeID })}, ScopeServe},
	}
}

// Error is a configuration error that names the setting.
type Error struct {
	Flag, Env, Value string
	Err              error
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid setting --%s (%s=%q): %v", e.Flag, e.Env, e.Value, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrHelp is returned when -h or --help was asked for; the usage has been printed.
var ErrHelp = flag.ErrHelp

// Parse reads the settings of the given scope from args and the environment (getenv; nil means
// os.Getenv). It returns the configuration and the positional arguments left after the flags.
// Usage text goes to usageOut when help is asked for.
func Parse(name string, scope Scope, args []string, getenv func(string) string, usageOut io.Writer, extra func(fs *flag.FlagSet)) (*Config, []string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := &Config{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var rows []scopedSetting
	for _, s := range settings() {
		if s.scope&scope == 0 {
			continue
		}
		rows = append(rows, s)
		if s.def == "false" || s.def == "true" {
			fs.Bool(s.flag, s.def == "true", s.help)
		} else {
			fs.String(s.flag, s.def, s.help)
		}
	}
	if extra != nil {
		extra(fs)
	}
	// Flags and positional arguments may be interleaved ("freeze ID --json").
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				if usageOut != nil {
					PrintUsage(usageOut, name, fs, rows)
				}
				return nil, nil, ErrHelp
			}
			return nil, nil, fmt.Errorf("%w (see %s --help)", err, name)
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, s := range rows {
		v := s.def
		if ev, ok := lookupEnv(getenv, s.env); ok {
			v = ev
		}
		if given[s.flag] {
			v = fs.Lookup(s.flag).Value.String()
		}
		if err := s.set(c, v); err != nil {
			return nil, nil, &Error{Flag: s.flag, Env: s.env, Value: v, Err: err}
		}
	}
	if err := c.finish(scope); err != nil {
		return nil, nil, err
	}
	return c, positional, nil
}

func lookupEnv(getenv func(string) string, k string) (string, bool) {
	v := getenv(k)
	return v, v != ""
}

// PrintUsage writes every setting with its flag, environment variable and default.
func PrintUsage(w io.Writer, name string, fs *flag.FlagSet, rows []scopedSetting) {
	fmt.Fprintf(w, "Usage: %s [flags]\n", name)
	known := map[string]bool{}
	for _, s := range rows {
		known[s.flag] = true
	}
	own := false
	fs.VisitAll(func(f *flag.Flag) {
		if known[f.Name] {
			return
		}
		if !own {
			fmt.Fprintf(w, "\nFlags:\n")
			own = true
		}
		fmt.Fprintf(w, "  --%s  (default %q)\n      %s\n", f.Name, f.DefValue, f.Usage)
	})
	if len(rows) == 0 {
		return
	}
	title := "Settings"
	if own {
		title = "Settings shared with the server"
	}
	fmt.Fprintf(w, "\n%s (each flag can also be set by its environment variable; a flag wins over the environment):\n", title)
	for _, s := range rows {
		def := s.def
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(w, "  --%s  (%s, default %s)\n      %s\n", s.flag, s.env, def, s.help)
	}
}

// Reference returns the settings table as markdown rows (flag, env, default, meaning), for the README.
func Reference() string {
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	for _, s := range settings() {
		def := s.def
		if def == "" {
			def = "(empty)"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | `%s` | %s |\n", s.flag, s.env, def, s.help)
	}
	return b.String()
}

func (c *Config) finish(scope Scope) error {
	if scope&ScopeServe != 0 {
		if c.BaseURL == "" {
			c.BaseURL = baseURLOf(c.HTTPAddr)
		}
		if (c.SIPTLSCert == "") != (c.SIPTLSKey == "") {
			return &Error{Flag: "sip-tls-key", Env: "PARLEY_SIP_TLS_KEY", Value: c.SIPTLSKey, Err: errors.New("set both PARLEY_SIP_TLS_CERT and PARLEY_SIP_TLS_KEY, or neither")}
		}
		switch strings.ToLower(strings.TrimSpace(c.SIPTLSClientAuth)) {
		case "", "none", "request", "require":
			c.SIPTLSClientAuth = strings.ToLower(strings.TrimSpace(c.SIPTLSClientAuth))
		default:
			return &Error{Flag: "sip-tls-client-auth", Env: "PARLEY_SIP_TLS_CLIENT_AUTH", Value: c.SIPTLSClientAuth, Err: errors.New("want none, request or require")}
		}
		if c.OutboundCAFile != "" {
			if _, err := netguard.New(netguard.Options{ExtraCAFile: c.OutboundCAFile}); err != nil {
				return &Error{Flag: "outbound-ca-file", Env: "PARLEY_OUTBOUND_CA_FILE", Value: c.OutboundCAFile, Err: err}
			}
		}
	}
	return nil
}

// UsesSQLite reports whether the store is the embedded SQLite file.
func (c *Config) UsesSQLite() bool { return !strings.HasPrefix(c.DatabaseURL, "postgres") }

// setSchedule reads the webhook retry schedule: 1 to 20 durations separated by commas.
func setSchedule(c *Config, v string) error {
	var out []time.Duration
	for _, p := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil || d < 0 {
			return fmt.Errorf("%q is not a duration such as 5s or 10m", strings.TrimSpace(p))
		}
		out = append(out, d)
	}
	if len(out) > 20 {
		return fmt.Errorf("at most 20 waits")
	}
	c.WebhookRetrySchedule = out
	return nil
}

func setOpusApplication(c *Config, v string) error {
	if v != "lowdelay" && v != "voip" {
		return errors.New("want lowdelay or voip")
	}
	c.OpusApplication = v
	return nil
}

func setString(p func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *p(c) = v; return nil }
}

func setNonEmpty(p func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		if strings.TrimSpace(v) == "" {
			return errors.New("must not be empty")
		}
		*p(c) = v
		return nil
	}
}

func setAddr(p func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		host, port, err := net.SplitHostPort(v)
		if err != nil {
			return fmt.Errorf("want host:port or :port: %v", err)
		}
		if host != "" && net.ParseIP(host) == nil && !validHostname(host) {
			return fmt.Errorf("bad host %q", host)
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("bad port %q", port)
		}
		*p(c) = v
		return nil
	}
}

func validHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, r := range h {
		if !(r == '.' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func setPort(p func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 65535 {
			return errors.New("want a port number 0-65535")
		}
		*p(c) = n
		return nil
	}
}

func setInt(p func(*Config) *int, min int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			return fmt.Errorf("want a whole number ≥ %d", min)
		}
		*p(c) = n
		return nil
	}
}

func setIntRange(p func(*Config) *int, lo, hi int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("want a whole number from %d to %d", lo, hi)
		}
		*p(c) = n
		return nil
	}
}

func setInt64(p func(*Config) *int64, min int64) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < min {
			return fmt.Errorf("want a whole number ≥ %d", min)
		}
		*p(c) = n
		return nil
	}
}

func setBool(p func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("want true or false")
		}
		*p(c) = b
		return nil
	}
}

func setDuration(p func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return errors.New("want a duration such as 30s or 2m")
		}
		*p(c) = d
		return nil
	}
}

func setURL(p func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		if v == "" {
			*p(c) = ""
			return nil
		}
		u, err := url.Parse(v)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ws" && u.Scheme != "wss") {
			return errors.New("want an absolute http(s) or ws(s) URL")
		}
		*p(c) = strings.TrimRight(v, "/")
		return nil
	}
}

func setBaseURL(c *Config, v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an absolute http(s) URL such as https://voice.example.com")
	}
	c.BaseURL = strings.TrimRight(v, "/")
	return nil
}

func setDatabaseURL(c *Config, v string) error {
	if v != "" && !strings.HasPrefix(v, "postgres://") && !strings.HasPrefix(v, "postgresql://") && !strings.HasPrefix(v, "sqlite://") {
		return errors.New("want empty (embedded SQLite), sqlite:///path/file.db or postgres://user@host:port/db")
	}
	if strings.HasPrefix(v, "postgres") {
		if _, err := url.Parse(v); err != nil {
			return err
		}
	}
	c.DatabaseURL = v
	return nil
}

func setRedisURL(c *Config, v string) error {
	if v != "" && !strings.HasPrefix(v, "redis://") && !strings.HasPrefix(v, "rediss://") {
		return errors.New("want empty (in-process bus) or redis://host:port/db")
	}
	c.RedisURL = v
	return nil
}

func setRoles(c *Config, v string) error {
	rs := Roles{}
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		switch Role(p) {
		case RoleAPI, RoleMedia, RoleWorker:
			rs[Role(p)] = true
		case "":
		default:
			return fmt.Errorf("unknown role %q (want api, media, worker)", p)
		}
	}
	if len(rs) == 0 {
		return errors.New("name at least one role")
	}
	c.Roles = rs
	return nil
}

func setPorts(c *Config, v string) error {
	lo, hi, ok := strings.Cut(v, "-")
	if !ok {
		return errors.New("want a range such as 10000-20000")
	}
	a, err1 := strconv.Atoi(strings.TrimSpace(lo))
	b, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if err1 != nil || err2 != nil || a < 1024 || b > 65535 || b-a < 1 {
		return errors.New("want two ports 1024-65535, low-high, at least one even/odd pair apart")
	}
	c.RTPPorts = PortRange{Min: a, Max: b}
	return nil
}

func setMediaAddr(c *Config, v string) error {
	if v != "" {
		if _, err := netip.ParseAddr(v); err != nil {
			return errors.New("want an IP address")
		}
	}
	c.MediaAddr = v
	return nil
}

// MediaBindIP is the address the media sockets bind: MediaAddr, else the SIP listener's host
// when it is a specific address, else the zero Addr (every interface).
func (c *Config) MediaBindIP() netip.Addr {
	if a, err := netip.ParseAddr(c.MediaAddr); err == nil {
		return a
	}
	host, _, err := net.SplitHostPort(c.SIPAddr)
	if err != nil {
		return netip.Addr{}
	}
	if a, err := netip.ParseAddr(host); err == nil && !a.IsUnspecified() {
		return a
	}
	return netip.Addr{}
}

func setTransferAllow(c *Config, v string) error {
	c.TransferAllow = nil
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return fmt.Errorf("want CIDRs or addresses, comma-separated: %q", part)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		c.TransferAllow = append(c.TransferAllow, p.Masked())
	}
	return nil
}

func setPublicIP(c *Config, v string) error {
	if v != "" && net.ParseIP(v) == nil {
		return errors.New("want an IP address")
	}
	c.PublicIP = v
	return nil
}

func setMasterKey(c *Config, v string) error {
	if v == "" {
		return nil
	}
	if _, err := secrets.DecodeKey(v); err != nil {
		return err
	}
	c.MasterKey = v
	return nil
}

func setMasterKeyPrevious(c *Config, v string) error {
	for _, k := range strings.Split(v, ",") {
		if strings.TrimSpace(k) == "" {
			continue
		}
		if _, err := secrets.DecodeKey(k); err != nil {
			return err
		}
	}
	c.MasterKeyPrevious = v
	return nil
}

func setLogLevel(c *Config, v string) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(v)); err != nil {
		return errors.New("want debug, info, warn or error")
	}
	c.LogLevel = l
	return nil
}

func setLogFormat(c *Config, v string) error {
	if v != "text" && v != "json" {
		return errors.New("want text or json")
	}
	c.LogFormat = v
	return nil
}

// NewLogger builds the slog logger the configuration asks for, writing to w.
func (c *Config) NewLogger(w io.Writer) *slog.Logger {
	o := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// baseURLOf is the address people reach the HTTP listener at when PARLEY_BASE_URL is not set:
// its host when it names one, localhost when it listens on every address.
func baseURLOf(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://localhost"
	}
	switch host {
	case "", "0.0.0.0", "::":
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// ParseUSD reads a decimal USD amount into micro-dollars exactly (no float rounding).
func ParseUSD(s string) (int64, error) {
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" || len(frac) > 6 {
		return 0, fmt.Errorf("want a number with at most 6 decimals, got %q", s)
	}
	if whole == "" {
		whole = "0"
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > math.MaxInt64/1_000_000-1 {
		return 0, fmt.Errorf("bad amount %q", s)
	}
	f := int64(0)
	if frac != "" {
		f, err = strconv.ParseInt((frac + "000000")[:6], 10, 64)
		if err != nil || strings.ContainsAny(frac, "+-") {
			return 0, fmt.Errorf("bad amount %q", s)
		}
	}
	v := w*1e6 + f
	if v == 0 {
		return 0, fmt.Errorf("amount must not be zero")
	}
	if neg {
		v = -v
	}
	return v, nil
}

func setStartingCredit(c *Config, v string) error {
	if v = strings.TrimSpace(v); v == "0" || v == "0.00" {
		c.StartingCreditMicros = 0
		return nil
	}
	m, err := ParseUSD(v)
	switch {
	case err != nil:
		return err
	case m < 0 || m > 1000*1_000_000:
		return errors.New("want 0 to 1000 USD")
	}
	c.StartingCreditMicros = m
	return nil
}
