package bench

import (
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/agentdef"
	"github.com/parley-voice/parley/session/fakes"
)

func TestWriteScriptParsesAsAFakesScript(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.txt")
	if err := writeScript(p, "Okay. I have noted that, thank you.", 3); err != nil {
		t.Fatal(err)
	}
	s, err := fakes.LoadScript(p)
	if err != nil {
		t.Fatal(err)
	}
	if s.Remaining() != 3 {
		t.Fatalf("%d turns", s.Remaining())
	}
	for i := 0; i < 3; i++ {
		if got := s.Next("x").Text; got != "Okay. I have noted that, thank you." {
			t.Errorf("turn %d: %q", i, got)
		}
	}
}

func TestFreePorts(t *testing.T) {
	p, err := freePorts()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, port := range []int{p.http, p.fakes, p.sip, p.webrtc} {
		if port <= 0 || port > 65535 {
			t.Fatalf("port %d", port)
		}
		seen[port] = true
	}
	if len(seen) < 3 { // UDP and TCP spaces are separate; the UDP ports may repeat a TCP one
		t.Errorf("ports %+v", p)
	}
	// The SIP port is free on both transports.
	u, err := net.ListenPacket("udp4", "127.0.0.1:"+itoa(p.sip))
	if err != nil {
		t.Fatalf("SIP UDP port: %v", err)
	}
	u.Close()
}

func itoa(n int) string { return fmtInt(n) }

func TestProcessGone(t *testing.T) {
	if processGone(os.Getpid()) {
		t.Error("this process is gone?")
	}
	if !processGone(1 << 30) {
		t.Error("a process that never existed is not gone")
	}
}

func TestBenchAgentDefinition(t *testing.T) {
	var d struct {
		Format string `json:"format"`
		Agent  struct {
			Direction    string   `json:"direction"`
			Channels     []string `json:"channels"`
			FirstMessage string   `json:"first_message"`
			TurnTaking   struct {
				EndpointingMS int `json:"endpointing_ms"`
			} `json:"turn_taking"`
		} `json:"agent"`
	}
	if err := json.Unmarshal(BenchAgentDefinition("Hi.", 450*time.Millisecond), &d); err != nil {
		t.Fatal(err)
	}
	if d.Format != "service.agent/1" || d.Agent.Direction != "inbound" || d.Agent.FirstMessage != "Hi." || d.Agent.TurnTaking.EndpointingMS != 450 ||
		len(d.Agent.Channels) != 2 {
		t.Errorf("%+v", d)
	}
}

func TestBenchAgentDefinitionIsValid(t *testing.T) {
	d, err := agentdef.Parse(BenchAgentDefinition("Hello, how can I help?", 600*time.Millisecond))
	if err != nil {
		t.Fatalf("the bench agent's definition does not parse: %v", err)
	}
	if d.Agent.TurnTaking.Endpointing() != 600*time.Millisecond {
		t.Errorf("endpointing %v", d.Agent.TurnTaking.Endpointing())
	}
}

func TestRecordings(t *testing.T) {
	if n := AttachStack("http://127.0.0.1:1", "k", "a", "+1", netip.MustParseAddrPort("127.0.0.1:5060"), 0, 0).Recordings(); n != -1 {
		t.Errorf("attached: %d", n)
	}
	s := &Stack{Dir: t.TempDir()}
	if s.Recordings() != 0 {
		t.Error("recordings in an empty directory")
	}
	os.MkdirAll(filepath.Join(s.Dir, "data", "recordings"), 0o755)
	os.WriteFile(filepath.Join(s.Dir, "data", "recordings", "a.wav"), nil, 0o644)
	if s.Recordings() != 1 {
		t.Errorf("%d recordings", s.Recordings())
	}
}
