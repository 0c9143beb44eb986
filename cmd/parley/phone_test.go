package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/sip/siptest"
)

var sipAddrRe = regexp.MustCompile(`sip=([0-9.]+:[0-9]+)`)

// A phone call into `parley serve`, end to end: a trunk, a number and a published inbound agent
// set up with the operator CLI and the API; a Go SIP phone calls the number; the node answers
// through the SIP endpoint, the runtime routes it to the agent, the engine speaks through the
// vendor fakes (PARLEY_FAKES_URL); the caller hears the agent's voice and its words reach the
// recognizer; after the hang-up the conversation is in the API with its transcript.
func TestInboundPhoneCallThroughServe(t *testing.T) {
	fk := fakes.NewServer(fakes.ServerOptions{STTScript: []string{"i would like to know your opening hours"},
		Script: fakes.NewScript(fakes.ScriptTurn{Text: "We are open from nine to five."}), TTSFirstByte: 20 * time.Millisecond})
	fsrv := httptest.NewServer(fk)
	t.Cleanup(fsrv.Close)
	t.Cleanup(fk.Close)

	dataDir := t.TempDir()
	env := []string{"PARLEY_DATA_DIR=" + dataDir, "PARLEY_DATABASE_URL=", "PARLEY_REDIS_URL=", "PARLEY_FAKES_URL=" + fsrv.URL}
	s := startServer(t, env)
	m := keyRe.FindStringSubmatch(s.stdout.String())
	if m == nil {
		t.Fatalf("no keys printed:\n%s", s.stdout)
	}
	live := m[1]
	sm := sipAddrRe.FindStringSubmatch(s.stderr.String())
	if sm == nil {
		t.Fatalf("no SIP address logged:\n%s", s.stderr)
	}
	sipAddr := sm[1]
	me := s.must(t, 200, "GET", "/v1/me", live, nil, nil)
	org := me["organization"].(map[string]any)["id"].(string)
	projects := s.must(t, 200, "GET", "/v1/projects", live, nil, nil)
	project := projects["data"].([]any)[0].(map[string]any)["id"].(string)

	// Operator set-up: credit, a trunk that accepts calls from loopback, a number.
	for _, args := range [][]string{
		{"admin", "credit", "add", "--org", org, "--amount", "10"},
		{"admin", "trunks", "add", "--name", "local", "--uri", "sip:127.0.0.1:5099", "--allow", "127.0.0.1"},
	} {
		if _, errOut, code := runCLI(t, env, args...); code != 0 {
			t.Fatalf("%v: %s", args, errOut)
		}
	}
	def := map[string]any{"format": "service.agent/1", "references": map[string]any{}, "agent": map[string]any{
		"name": "Front desk", "kind": "faq", "direction": "inbound", "channels": []any{"phone"},
		"system_prompt": "You answer questions about the shop.", "first_message": "Hello, front desk."}}
	agent := s.must(t, 201, "POST", "/v1/agents", live, map[string]any{"project_id": project, "definition": def}, nil)
	agentID := agent["id"].(string)
	s.must(t, 201, "POST", "/v1/agents/"+agentID+"/publish", live, nil, nil)
	if _, errOut, code := runCLI(t, env, "admin", "numbers", "add", "--project", project, "--number", "+14155550199", "--trunk", "local", "--agent", agentID); code != 0 {
		t.Fatalf("numbers add: %s", errOut)
	}

	// The caller: a Go SIP phone speaking real speech.
	speech := mediatest.Speech(t, "I would like to know your opening hours", media.PipelineRate)
	phone := siptest.NewPhone(t, siptest.PhoneOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call, err := phone.Call(ctx, "sip:+14155550199@"+sipAddr, siptest.CallOptions{From: "+14155550123"})
	if err != nil {
		t.Fatalf("call: %v (status %d)", err, call.Status())
	}
	// Hear the greeting (the fake TTS's 440 Hz tone), then speak.
	waitUntil(t, "the greeting", func() bool {
		h := call.Heard()
		return len(h) > 3200 && mediatest.DetectTone(h[len(h)-3200:], media.PipelineRate, 440) > -30
	})
	var pos int
	call.SetSource(func(dst []int16) { // 20 ms frames at 16 kHz: the speech, then silence
		for i := range dst {
			if pos < len(speech) {
				dst[i] = speech[pos]
				pos++
			} else {
				dst[i] = 0
			}
		}
	})
	var conv map[string]any
	waitUntil(t, "the agent's answer in the transcript", func() bool {
		list := s.must(t, 200, "GET", "/v1/conversations?limit=5", live, nil, nil)
		data := list["data"].([]any)
		if len(data) == 0 {
			return false
		}
		id := data[0].(map[string]any)["id"].(string)
		conv = s.must(t, 200, "GET", "/v1/conversations/"+id+"?include=transcript", live, nil, nil)
		return strings.Contains(jsonString(conv), "We are open from nine to five.")
	})
	if conv["channel"] != "phone" || conv["direction"] != "inbound" || conv["status"] != "in_progress" {
		t.Fatalf("conversation %v", conv)
	}
	if !strings.Contains(jsonString(conv), "i would like to know your opening hours") {
		t.Fatalf("the caller's words did not reach the recognizer: %s", jsonString(conv))
	}
	// Issue 22 item 13 on a voice call: every final line says when it was started and ended
	// (ended_at not before started_at), and seq orders the lines by completion.
	lines, _ := conv["transcript"].([]any)
	lastEnd, lastSeq := "", -1.0
	for _, x := range lines {
		l := x.(map[string]any)
		st, _ := l["started_at"].(string)
		en, _ := l["ended_at"].(string)
		seq, _ := l["seq"].(float64)
		if st == "" || en == "" || en < st || seq <= lastSeq || en < lastEnd {
			t.Fatalf("transcript line times: %v (previous line ended %s, seq %v)", l, lastEnd, lastSeq)
		}
		lastEnd, lastSeq = en, seq
	}
	if len(lines) < 2 {
		t.Fatalf("transcript %v", lines)
	}
	if err := call.Bye(ctx); err != nil {
		t.Fatalf("BYE: %v", err)
	}
	id := conv["id"].(string)
	waitUntil(t, "the call ended", func() bool {
		c := s.must(t, 200, "GET", "/v1/conversations/"+id, live, nil, nil)
		return c["status"] == "ended"
	})
	c := s.must(t, 200, "GET", "/v1/conversations/"+id, live, nil, nil)
	if c["end_reason"] != "caller_hung_up" {
		t.Fatalf("end reason %v", c["end_reason"])
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
