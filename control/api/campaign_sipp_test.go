package api

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/codec"
	voicechannels "github.com/parley-voice/parley/control/channels"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/media/mediatest"
	"github.com/parley-voice/parley/sip"
)

// issue 15: a campaign of 300 contacts against real SIP peers. Four sipp UAS on loopback play
// the people: one answers and says "Hello?" (a human to the answering-machine detection) and
// hangs up after a while, one answers 486 Busy Here, one rings and never answers (the ring
// timeout cancels), and one answers with a voicemail greeting and a beep (a machine: Parley
// hangs up). The test routes each contact to its sipp by the number's last digit.

// sippUAS returns a sipp UAS scenario of one kind.
func sippUAS(kind string) string {
	ringing := `
  <send>
    <![CDATA[

      SIP/2.0 180 Ringing
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Contact: <sip:sipp@[local_ip]:[local_port];transport=[transport]>
      Content-Length: 0

    ]]>
  </send>`
	answer := `
  <send retrans="500">
    <![CDATA[

      SIP/2.0 200 OK
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Contact: <sip:sipp@[local_ip]:[local_port];transport=[transport]>
      Content-Type: application/sdp
      Content-Length: [len]

      v=0
      o=sipp 53655765 2353687637 IN IP[local_ip_type] [local_ip]
      s=-
      c=IN IP[media_ip_type] [media_ip]
      t=0 0
      m=audio [media_port] RTP/AVP 0
      a=rtpmap:0 PCMU/8000

    ]]>
  </send>
  <recv request="ACK" crlf="true"/>`
	ok := `
  <send>
    <![CDATA[

      SIP/2.0 200 OK
      [last_Via:]
      [last_From:]
      [last_To:]
      [last_Call-ID:]
      [last_CSeq:]
      Content-Length: 0

    ]]>
  </send>`
	var body string
	switch kind {
	case "answer": // says hello, then hangs up
		body = ringing + answer + `
  <nop><action><exec play_pcap_audio="hello.pcap"/></action></nop>
  <pause milliseconds="3000"/>
  <send retrans="500">
    <![CDATA[

      BYE [next_url] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: [$callee];tag=[pid]SIPpTag01[call_number]
      To: [$parley]
      Call-ID: [call_id]
      CSeq: 2 BYE
      Max-Forwards: 70
      Content-Length: 0

    ]]>
  </send>
  <recv response="200" crlf="true"/>`
	case "busy":
		body = `
  <send>
    <![CDATA[

      SIP/2.0 486 Busy Here
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Content-Length: 0

    ]]>
  </send>
  <recv request="ACK" crlf="true"/>`
	case "noanswer": // rings until Parley cancels (RFC 3261 §9.2: 200 to the CANCEL, 487 to the INVITE)
		body = ringing + `
  <recv request="CANCEL"/>` + ok + `
  <send>
    <![CDATA[

      SIP/2.0 487 Request Terminated
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      CSeq: [$cseq] INVITE
      Content-Length: 0

    ]]>
  </send>
  <recv request="ACK" crlf="true"/>`
	case "machine": // a greeting and a beep; Parley hangs up
		body = ringing + answer + `
  <nop><action><exec play_pcap_audio="machine.pcap"/></action></nop>
  <recv request="BYE"/>` + ok
	}
	return `<?xml version="1.0" encoding="ISO-8859-1" ?>
<!DOCTYPE scenario SYSTEM "sipp.dtd">
<scenario name="parley campaign ` + kind + `">
  <recv request="INVITE" crlf="true" rrs="true">
    <action>
      <ereg regexp="CSeq: ([0-9]+)" search_in="msg" assign_to="all,cseq"/>
      <ereg regexp="[^ ].*" search_in="hdr" header="From:" check_it="true" assign_to="parley"/>
      <ereg regexp="[^ ].*" search_in="hdr" header="To:" check_it="true" assign_to="callee"/>
    </action>
  </recv>
  <Reference variables="all,cseq,parley,callee"/>` + body + `
</scenario>
`
}

// routeDialer sends each call to the trunk of its kind, by the number's last digit.
type routeDialer struct {
	*voicechannels.SIPDialer
	mu       sync.Mutex
	perTrunk map[string]int
}

var kindByDigit = map[byte]string{'0': "answer", '1': "busy", '2': "noanswer", '3': "machine"}

func (d *routeDialer) Dial(ctx context.Context, r runtime.DialRequest) error {
	r.Trunk = kindByDigit[r.To[len(r.To)-1]]
	d.mu.Lock()
	d.perTrunk[r.Trunk]++
	d.mu.Unlock()
	return d.SIPDialer.Dial(ctx, r)
}

func TestCampaignSipp(t *testing.T) {
	sippBin := testenv.NeedCommand(t, "sipp")
	hello := append(append(make([]int16, 400), mediatest.Speech(t, "Hello?", 8000)...), make([]int16, 24000)...)
	greeting := append(append(make([]int16, 2400), mediatest.Speech(t, "Hi, you have reached the voicemail of John Smith. "+
		"I am not available right now. Please leave your name and number after the tone.", 8000)...), make([]int16, 3200)...)
	greeting = append(append(greeting, mediatest.Sine(4000, 8000, 1000, -10)...), make([]int16, 16000)...)
	dir := t.TempDir()
	for name, pcm := range map[string][]int16{"hello.pcap": hello, "machine.pcap": greeting} {
		if err := writeRTPPcapFile(filepath.Join(dir, name), pcm); err != nil {
			t.Fatal(err)
		}
	}

	base := testenv.RTPBase(399)
	srv, err := sip.New(sip.Options{Addr: "127.0.0.1:0", RTPPorts: media.PortRange{Min: base, Max: base + 399},
		RTPIP: netip.MustParseAddr("127.0.0.1"), Trunks: sip.NewStaticTrunks(), Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopSIP := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Run(runCtx) }()
	t.Cleanup(func() { stopSIP(); <-served })

	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()
	var trunks []sip.Trunk
	var sipps sync.WaitGroup
	logs := map[string]string{}
	for _, kind := range []string{"answer", "busy", "noanswer", "machine"} {
		port := testenv.FreeUDPPort(t, false)
		trunks = append(trunks, sip.Trunk{Name: kind, URI: fmt.Sprintf("sip:127.0.0.1:%d", port), Transport: sip.UDP,
			AllowedSources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
		os.WriteFile(filepath.Join(dir, kind+".xml"), []byte(sippUAS(kind)), 0o644)
		logs[kind] = filepath.Join(dir, kind+".msgs")
		cmd := exec.CommandContext(ctx, sippBin, "-sf", kind+".xml", "-i", "127.0.0.1", "-p", fmt.Sprint(port),
			"-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)), "-nostdin", "-trace_msg", "-message_file", kind+".msgs", "-l", "200", "-timeout", "165s")
		cmd.Dir, cmd.Env, cmd.WaitDelay = dir, append(os.Environ(), "TERM=dumb"), 5*time.Second
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sipps.Go(func() { _ = cmd.Wait() })
	}
	t.Cleanup(func() { cancel(); sipps.Wait() })
	static := sip.NewStaticTrunks(trunks...)
	dialer := &routeDialer{SIPDialer: &voicechannels.SIPDialer{Server: srv, Trunks: static.Lookup}, perTrunk: map[string]int{}}
	const orgLimit, maxConcurrent = 30, 24
	w := newWorld(t, migrate(t, storeOptions(t)), worldOpts{conv: &convOpts{dialer: dialer, maxCalls: orgLimit}})
	w.credit(t, 1000)
	agent := w.publishedAgent(t, w.p1.ID, "Reminder", "outbound", channels("phone"))
	if _, err := w.st.CreatePhoneNumber(context.Background(), storeNumber(w, agent, "+14155550001", "answer")); err != nil {
		t.Fatal(err)
	}
	var contacts []any
	for i := range 300 {
		contacts = append(contacts, map[string]any{"to_number": fmt.Sprintf("+1415601%03d%d", i/4, i%4), "variables": map[string]any{"customer": "Ada"}})
	}
	body := map[string]any{"agent_id": agent, "name": "Sipp", "contacts": contacts,
		"pacing":    map[string]any{"max_concurrent": maxConcurrent, "starts_per_minute": 600, "ring_timeout_seconds": 5},
		"callbacks": map[string]any{"max_attempts": 2, "retry_on": []any{"no_answer"}, "delay_seconds": 1},
		"voicemail": map[string]any{"action": "hang_up"}, "start": true}
	id := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/campaigns", key: kLive, header: idem("sipp"), body: body}).Str("id")
	started := time.Now()
	stop := runDialler(t, w)
	defer stop()
	var last *resp
	waitFor(t, 150*time.Second, "the campaign completed", func() bool {
		last = w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns/" + id, key: kLive})
		return last.Str("status") == "completed"
	})
	t.Logf("300 contacts in %s: %v", time.Since(started).Round(time.Second), last.JSON["contacts"])
	stop()

	// Every contact's final state and attempts.
	wantState := map[string]string{"answer": "completed", "busy": "busy", "noanswer": "no_answer", "machine": "voicemail"}
	wantAttempts := map[string]int{"answer": 1, "busy": 1, "noanswer": 2, "machine": 1}
	attempts := map[string]int{}
	misread := 0
	cursor := ""
	for {
		path := "/v1/campaigns/" + id + "/contacts?limit=100"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		l := w.must(t, http.StatusOK, req{method: "GET", path: path, key: kLive})
		for _, x := range l.JSON["data"].([]any) {
			cc := x.(map[string]any)
			n := cc["to_number"].(string)
			kind := kindByDigit[n[len(n)-1]]
			attempts[n] = int(cc["attempts"].(float64))
			if kind == "answer" && cc["state"] == "voicemail" && attempts[n] == 1 {
				// The detector is a heuristic on timing (2.5 s of initial silence is a machine):
				// on a loaded machine sipp's "Hello?" can start late. A few are tolerated and
				// counted; sip's own AMD tests check the detector.
				misread++
				continue
			}
			if cc["state"] != wantState[kind] || attempts[n] != wantAttempts[kind] {
				t.Errorf("%s (%s): %v after %d attempts (%v), want %s after %d", n, kind, cc["state"], attempts[n], cc["last_detail"], wantState[kind], wantAttempts[kind])
			}
		}
		if l.JSON["has_more"] != true {
			break
		}
		cursor = l.Str("next_cursor")
	}
	if len(attempts) != 300 {
		t.Fatalf("%d contacts listed", len(attempts))
	}
	if misread > 3 {
		t.Errorf("%d of 75 people who said hello were taken for machines", misread)
	} else if misread > 0 {
		t.Logf("%d of 75 people who said hello were taken for machines (tolerated: detection timing under load)", misread)
	}
	// sipp's own logs: each contact was sent exactly as many INVITEs (distinct calls) as its
	// attempts say, and the pacing held.
	cancel()
	sipps.Wait()
	calls := map[string]map[string]bool{} // number → Call-IDs
	var spans [][2]time.Time
	for kind, path := range logs {
		first, lastSeen, to := readSippLog(t, path)
		for cid, n := range to {
			if calls[n] == nil {
				calls[n] = map[string]bool{}
			}
			calls[n][cid] = true
			spans = append(spans, [2]time.Time{first[cid], lastSeen[cid]})
			if k := kindByDigit[n[len(n)-1]]; k != kind {
				t.Errorf("%s reached the %s sipp", n, kind)
			}
		}
	}
	for n, want := range attempts {
		if got := len(calls[n]); got != want {
			t.Errorf("%s: sipp saw %d calls, attempts say %d", n, got, want)
		}
	}
	starts := make([]time.Time, 0, len(spans))
	for _, s := range spans {
		starts = append(starts, s[0])
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	for i := range starts {
		j := sort.Search(len(starts), func(k int) bool { return !starts[k].Before(starts[i].Add(time.Minute)) })
		if j-i > 600 {
			t.Errorf("%d INVITEs within a minute from %s; the pacing allows 600", j-i, starts[i].Format(time.RFC3339Nano))
		}
	}
	peak := maxOverlap(spans)
	t.Logf("sipp saw %d calls; at most %d at once (max_concurrent %d, organization limit %d)", len(spans), peak, maxConcurrent, orgLimit)
	if peak > maxConcurrent {
		t.Errorf("%d calls at once at sipp; the campaign allows %d", peak, maxConcurrent)
	}
	if n, err := w.rt.CallSlots(context.Background(), w.org.ID); err != nil || n != 0 {
		t.Errorf("%d call slots held after the campaign (%v)", n, err)
	}
}

// maxOverlap is the most spans open at one moment.
func maxOverlap(spans [][2]time.Time) int {
	type ev struct {
		at time.Time
		d  int
	}
	var evs []ev
	for _, s := range spans {
		evs = append(evs, ev{s[0], 1}, ev{s[1], -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at.Equal(evs[j].at) {
			return evs[i].d < evs[j].d
		}
		return evs[i].at.Before(evs[j].at)
	})
	n, peak := 0, 0
	for _, e := range evs {
		n += e.d
		peak = max(peak, n)
	}
	return peak
}

var (
	sippStamp  = regexp.MustCompile(`^-{10,}\s+(\d{4}-\d{2}-\d{2})\s+(\d{2}:\d{2}:\d{2}\.\d+)`)
	sippInvite = regexp.MustCompile(`^INVITE sip:(\+?\d+)@`)
	sippCallID = regexp.MustCompile(`(?i)^Call-ID:\s*(\S+)`)
)

// readSippLog reads a sipp -trace_msg file: for each Call-ID, the time of its first and last
// message, and the number its INVITE called.
func readSippLog(t testing.TB, path string) (first, last map[string]time.Time, to map[string]string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("sipp log: %v", err)
	}
	defer f.Close()
	first, last, to = map[string]time.Time{}, map[string]time.Time{}, map[string]string{}
	var at time.Time
	invite := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := sippStamp.FindStringSubmatch(line); m != nil {
			at, _ = time.ParseInLocation("2006-01-02 15:04:05.000000", m[1]+" "+m[2], time.Local)
			invite = ""
			continue
		}
		if m := sippInvite.FindStringSubmatch(line); m != nil {
			invite = m[1]
			continue
		}
		if m := sippCallID.FindStringSubmatch(line); m != nil {
			cid := m[1]
			if _, ok := first[cid]; !ok {
				first[cid] = at
			}
			last[cid] = at
			if invite != "" {
				to[cid] = invite
			}
		}
	}
	return first, last, to
}

// writeRTPPcapFile writes a pcap (Ethernet, IPv4, UDP) of an RTP stream carrying pcm (8 kHz) as
// PCMU in 20 ms packets, for sipp's play_pcap_audio, which rewrites the addresses.
func writeRTPPcapFile(path string, pcm []int16) error {
	le, be := binary.LittleEndian, binary.BigEndian
	b := make([]byte, 24)
	le.PutUint32(b[0:], 0xa1b2c3d4)
	le.PutUint16(b[4:], 2)
	le.PutUint16(b[6:], 4)
	le.PutUint32(b[16:], 65535)
	le.PutUint32(b[20:], 1)
	payload := make([]byte, 160)
	for i, seq := 0, uint16(1000); i+160 <= len(pcm); i, seq = i+160, seq+1 {
		codec.EncodeMulaw(payload, pcm[i:i+160])
		rtp := make([]byte, 12+160)
		rtp[0] = 0x80
		be.PutUint16(rtp[2:], seq)
		be.PutUint32(rtp[4:], uint32(160000+i))
		be.PutUint32(rtp[8:], 0x12345678)
		copy(rtp[12:], payload)
		udpLen, ipLen := 8+len(rtp), 28+len(rtp)
		fr := make([]byte, 14+ipLen)
		be.PutUint16(fr[12:], 0x0800)
		ip := fr[14:]
		ip[0], ip[8], ip[9] = 0x45, 64, 17
		be.PutUint16(ip[2:], uint16(ipLen))
		copy(ip[12:], []byte{127, 0, 0, 1})
		copy(ip[16:], []byte{127, 0, 0, 1})
		var sum uint32
		for k := 0; k < 20; k += 2 {
			sum += uint32(be.Uint16(ip[k:]))
		}
		for sum>>16 != 0 {
			sum = sum&0xffff + sum>>16
		}
		be.PutUint16(ip[10:], ^uint16(sum))
		udp := ip[20:]
		be.PutUint16(udp[0:], 6000)
		be.PutUint16(udp[2:], 6002)
		be.PutUint16(udp[4:], uint16(udpLen))
		copy(udp[8:], rtp)
		at := time.Unix(1700000000, 0).Add(time.Duration(i/160) * 20 * time.Millisecond)
		rec := make([]byte, 16)
		le.PutUint32(rec[0:], uint32(at.Unix()))
		le.PutUint32(rec[4:], uint32(at.Nanosecond()/1000))
		le.PutUint32(rec[8:], uint32(len(fr)))
		le.PutUint32(rec[12:], uint32(len(fr)))
		b = append(append(b, rec...), fr...)
	}
	return os.WriteFile(path, b, 0o644)
}
