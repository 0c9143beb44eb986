package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/session/fakes"
	"github.com/parley-voice/parley/sip/siptest"
)

// TestPhoneNodeKilledRecording is issue 22 item 3 against a real phone: a call is in progress
// on media node A (PostgreSQL, Redis, a shared data directory) with its recording being
// written; A is killed with SIGKILL. Node B (api, worker) notices A gone from the cluster
// heartbeat, ends the call network_lost, repairs the WAV the crash left (its header sizes) and
// attaches it; the API serves it, and deleting the conversation removes the file. It is item 9
// against a real phone as well (the lost node's call ends within seconds, not a 2-minute
// grace), and item 10 (the media sockets bind the SIP listener's address).
func TestPhoneNodeKilledRecording(t *testing.T) {
	pg := pgSchemaURL(t)
	redisURL := testenv.RedisURL(t)
	fk := fakes.NewServer(fakes.ServerOptions{Script: fakes.NewScript(fakes.ScriptTurn{Text: "Hello."})})
	fsrv := httptest.NewServer(fk)
	t.Cleanup(fsrv.Close)
	t.Cleanup(fk.Close)
	dataDir := t.TempDir()
	env := []string{"PARLEY_DATABASE_URL=" + pg, "PARLEY_REDIS_URL=" + redisURL, "PARLEY_MASTER_KEY=" + strings.Repeat("ab", 32),
		"PARLEY_FAKES_URL=" + fsrv.URL, "PARLEY_DATA_DIR=" + dataDir}
	out, errOut, code := runCLI(t, env, "admin", "bootstrap", "--json")
	if code != 0 {
		t.Fatalf("bootstrap: %s", errOut)
	}
	var boot map[string]string
	if err := json.Unmarshal([]byte(out), &boot); err != nil {
		t.Fatalf("bootstrap JSON: %v %q", err, out)
	}
	for _, args := range [][]string{
		{"admin", "credit", "add", "--org", boot["organization_id"], "--amount", "10"},
		{"admin", "trunks", "add", "--name", "local", "--uri", "sip:127.0.0.1:5099", "--allow", "127.0.0.1"},
	} {
		if _, errOut, code := runCLI(t, env, args...); code != 0 {
			t.Fatalf("%v: %s", args, errOut)
		}
	}
	suffix := boot["project_id"][:8]
	a := startServer(t, append(env, "PARLEY_NODE_ID=media-a-"+suffix), "--roles", "media")
	b := startServer(t, append(env, "PARLEY_NODE_ID=api-b-"+suffix), "--roles", "api,worker")
	live := boot["live_key"]
	def := map[string]any{"format": "service.agent/1", "references": map[string]any{}, "agent": map[string]any{
		"name": "Front desk", "kind": "faq", "direction": "inbound", "channels": []any{"phone"},
		"system_prompt": "You answer questions about the shop.", "first_message": "Hello, front desk."}}
	agent := b.must(t, 201, "POST", "/v1/agents", live, map[string]any{"project_id": boot["project_id"], "definition": def}, nil)
	agentID := agent["id"].(string)
	b.must(t, 201, "POST", "/v1/agents/"+agentID+"/publish", live, nil, nil)
	if _, errOut, code := runCLI(t, env, "admin", "numbers", "add", "--project", boot["project_id"], "--number", "+14155550198", "--trunk", "local", "--agent", agentID); code != 0 {
		t.Fatalf("numbers add: %s", errOut)
	}
	sm := sipAddrRe.FindStringSubmatch(a.stderr.String())
	if sm == nil {
		t.Fatalf("no SIP address logged by node A:\n%s", a.stderr)
	}
	phone := siptest.NewPhone(t, siptest.PhoneOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	call, err := phone.Call(ctx, "sip:+14155550198@"+sm[1], siptest.CallOptions{From: "+14155550123"})
	if err != nil {
		t.Fatalf("call: %v (status %d)", err, call.Status())
	}
	var id string
	waitUntil(t, "the call in progress", func() bool {
		list := b.must(t, 200, "GET", "/v1/conversations?limit=5", live, nil, nil)
		data := list["data"].([]any)
		if len(data) == 0 {
			return false
		}
		c := data[0].(map[string]any)
		id = c["id"].(string)
		return c["status"] == "in_progress"
	})
	wav := filepath.Join(dataDir, "recordings", id+".wav")
	waitUntil(t, "two seconds of the recording written", func() bool {
		st, err := os.Stat(wav)
		return err == nil && st.Size() > 44+2*16000*2*2
	})
	// Item 10 on the way: with SIP on 127.0.0.1 the media sockets bind it too (RTP and the
	// WebRTC mux), and with TLS off the start-up line says nothing of TLS.
	waitUntil(t, "the call's RTP latched", func() bool { return strings.Contains(a.stderr.String(), "rtp latched") })
	for _, l := range strings.Split(a.stderr.String(), "\n") {
		switch {
		case strings.Contains(l, "rtp latched") && !strings.Contains(l, "local=127.0.0.1:"),
			strings.Contains(l, "webrtc service listening") && !strings.Contains(l, "udp=127.0.0.1:"),
			strings.Contains(l, "sip: serving") && strings.Contains(l, "tls="):
			t.Errorf("node A: %s", l)
		}
	}
	a.cmd.Process.Kill() // SIGKILL: the recording is left as the crash cut it
	<-a.done
	var c map[string]any
	waitUntil(t, "the call of the killed node ended", func() bool {
		c = b.must(t, 200, "GET", "/v1/conversations/"+id, live, nil, nil)
		return c["status"] == "ended"
	})
	if c["end_reason"] != "network_lost" || c["has_recording"] != true {
		t.Fatalf("after the kill: %v", c)
	}
	raw, err := os.ReadFile(wav)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) < 44 || string(raw[:4]) != "RIFF" || int(binary.LittleEndian.Uint32(raw[4:])) != len(raw)-8 || int(binary.LittleEndian.Uint32(raw[40:])) != len(raw)-44 {
		t.Fatalf("the WAV was not repaired: %d bytes, RIFF size %d, data size %d", len(raw), binary.LittleEndian.Uint32(raw[4:]), binary.LittleEndian.Uint32(raw[40:]))
	}
	b.must(t, 200, "DELETE", "/v1/conversations/"+id, live, nil, nil)
	if _, err := os.Stat(wav); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the recording is still on disk after the deletion: %v", err)
	}
}
