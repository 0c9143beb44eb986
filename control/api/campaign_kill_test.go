package api

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	crand "crypto/rand"

	"github.com/redis/go-redis/v9"

	"github.com/parley-voice/parley/control/app/campaigns"
	"github.com/parley-voice/parley/control/bus"
	voicechannels "github.com/parley-voice/parley/control/channels"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/sip"
)

// issue 15: exactly once across a SIGKILL. Two worker nodes (this test binary run twice as a
// child) share one PostgreSQL schema and one Redis; each runs the campaign dialler (its tick,
// the attempt jobs and the reaper of lost conversations) and its own SIP server, dialling one
// sipp UAS that rings 300 ms and answers 486. One node is SIGKILLed in the middle of the
// campaign. At sipp, every conversation id (carried on the INVITE) was INVITEd at most once,
// and every contact was called no more often than its attempts say.

const (
	killChildEnv = "PARLEY_CAMPAIGN_CHILD"
	killURLEnv   = "PARLEY_CAMPAIGN_CHILD_URL"
	killSippEnv  = "PARLEY_CAMPAIGN_CHILD_SIPP"
)

// TestCampaignKillChild is a worker node of TestCampaignKillExactlyOnce (it runs only as its
// child).
func TestCampaignKillChild(t *testing.T) {
	name := os.Getenv(killChildEnv)
	if name == "" {
		t.Skip("a worker node of TestCampaignKillExactlyOnce; runs only as its child")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	st, err := store.Open(ctx, store.Options{URL: os.Getenv(killURLEnv), MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ro, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	b := bus.NewRedis(ro)
	defer b.Close()
	base := testenv.RTPBase(99)
	trunk := sip.Trunk{Name: "sipp", URI: "sip:" + os.Getenv(killSippEnv), Transport: sip.UDP,
		AllowedSources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	trunks := sip.NewStaticTrunks(trunk)
	srv, err := sip.New(sip.Options{Addr: "127.0.0.1:0", RTPPorts: media.PortRange{Min: base, Max: base + 99},
		RTPIP: netip.MustParseAddr("127.0.0.1"), Trunks: trunks, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	sipCtx, stopSIP := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Run(sipCtx) }()
	defer func() { stopSIP(); <-served }()
	tp, err := runtime.NewTestProviders(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	rt, err := runtime.New(runtime.Options{NodeID: name, Store: st, Bus: b, Providers: tp, TestProviders: tp, Media: true,
		Dialer: &voicechannels.SIPDialer{Server: srv, Trunks: trunks.Lookup}, OwnerTTL: 2 * time.Second, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	a := &API{Store: st, Bus: b, Runtime: rt, Log: log}
	a.Services()
	w := jobs.NewWorker(jobs.Options{Store: st, Owner: name, Concurrency: 4, Lease: 2 * time.Second, PollInterval: 50 * time.Millisecond, Log: log})
	w.Register(campaigns.KindAttempt, a.Campaigns.RunAttempt)
	go func() {
		tick, reap := time.NewTicker(100*time.Millisecond), time.NewTicker(500*time.Millisecond)
		defer tick.Stop()
		defer reap.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if _, err := a.Campaigns.Tick(ctx); err != nil && ctx.Err() == nil {
					log.Warn("tick", "err", err)
				}
			case <-reap.C:
				if _, err := rt.ReapLost(ctx, time.Second); err != nil && ctx.Err() == nil {
					log.Warn("reap", "err", err)
				}
			}
		}
	}()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// killSchema makes a PostgreSQL schema for the test and returns its URL.
func killSchema(t testing.TB) string {
	base := testenv.PostgresURL(t)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	r := make([]byte, 6)
	crand.Read(r)
	schema := "kill_" + hex.EncodeToString(r)
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema
}

func TestCampaignKillExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two worker processes; skipped with -short")
	}
	sippBin := testenv.NeedCommand(t, "sipp")
	testenv.RedisURL(t)
	url := killSchema(t)
	st := migrate(t, store.Options{URL: url, MaxConns: 4})
	w := newWorld(t, st, worldOpts{conv: &convOpts{dialer: &outcomeDialer{dials: map[string]int{}, toOf: map[string]string{}}}})
	w.credit(t, 1000)
	agent := w.publishedAgent(t, w.p1.ID, "Reminder", "outbound", channels("phone"))
	if _, err := w.st.CreatePhoneNumber(context.Background(), storeNumber(w, agent, "+14155550001", "sipp")); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	busy := strings.Replace(sippUAS("busy"), "\n  <send>\n    <![CDATA[\n\n      SIP/2.0 486", "\n  <pause milliseconds=\"300\"/>\n  <send>\n    <![CDATA[\n\n      SIP/2.0 486", 1)
	os.WriteFile(filepath.Join(dir, "busy.xml"), []byte(busy), 0o644)
	port := testenv.FreeUDPPort(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()
	sipp := exec.CommandContext(ctx, sippBin, "-sf", "busy.xml", "-i", "127.0.0.1", "-p", fmt.Sprint(port), "-mp", fmt.Sprint(testenv.FreeUDPPort(t, true)),
		"-nostdin", "-trace_msg", "-message_file", "msgs.log", "-timeout", "165s")
	sipp.Dir, sipp.Env, sipp.WaitDelay = dir, append(os.Environ(), "TERM=dumb"), 5*time.Second
	if err := sipp.Start(); err != nil {
		t.Fatal(err)
	}
	sippDone := make(chan struct{})
	go func() { _ = sipp.Wait(); close(sippDone) }()
	t.Cleanup(func() { cancel(); <-sippDone })

	var contacts []any
	for i := range 120 {
		contacts = append(contacts, map[string]any{"to_number": fmt.Sprintf("+1415602%04d", i), "variables": map[string]any{"customer": "Ada"}})
	}
	id := w.must(t, http.StatusCreated, req{method: "POST", path: "/v1/campaigns", key: kLive, header: idem("kill"), body: map[string]any{
		"agent_id": agent, "name": "Kill", "contacts": contacts, "start": true,
		"pacing":    map[string]any{"max_concurrent": 12, "starts_per_minute": 6000},
		"callbacks": map[string]any{"max_attempts": 2, "retry_on": []any{"busy"}, "delay_seconds": 1}}}).Str("id")

	var victimOut, survivorOut bytes.Buffer
	start := func(name string, out *bytes.Buffer) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestCampaignKillChild$", "-test.v")
		cmd.Env = append(os.Environ(), killChildEnv+"="+name, killURLEnv+"="+url, killSippEnv+"="+fmt.Sprintf("127.0.0.1:%d", port))
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	victim, survivor := start("victim", &victimOut), start("survivor", &survivorOut)
	t.Cleanup(func() {
		victim.Process.Kill()
		survivor.Process.Kill()
		if t.Failed() {
			t.Logf("victim:\n%s\nsurvivor:\n%s", victimOut.String(), survivorOut.String())
		}
	})
	count := func(q string, args ...any) int {
		var n int
		if err := st.DB().QueryRow(q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	waitFor(t, 60*time.Second, "the victim dialling, with attempt jobs in hand", func() bool {
		return count(`SELECT count(*) FROM campaign_attempts WHERE state IN ('placed', 'finished')`) >= 60 &&
			count(`SELECT count(*) FROM jobs WHERE kind = $1 AND state = 'running' AND lease_owner LIKE 'victim/%'`, campaigns.KindAttempt) >= 1
	})
	if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = victim.Wait()
	held := count(`SELECT count(*) FROM jobs WHERE kind = $1 AND state = 'running' AND lease_owner LIKE 'victim/%'`, campaigns.KindAttempt)
	killed := time.Now()
	waitFor(t, 90*time.Second, "the campaign completed by the survivor", func() bool {
		return w.must(t, http.StatusOK, req{method: "GET", path: "/v1/campaigns/" + id, key: kLive}).Str("status") == "completed"
	})
	t.Logf("completed %s after the kill; the victim held %d attempt jobs when it died", time.Since(killed).Round(time.Millisecond), held)
	survivor.Process.Signal(syscall.SIGTERM)
	_ = survivor.Wait()
	cancel()
	<-sippDone

	// sipp's log: conversation id (X-Parley-Conversation-Id) → Call-IDs; number → Call-IDs.
	byConv, byNumber := map[string]map[string]bool{}, map[string]map[string]bool{}
	f, err := os.Open(filepath.Join(dir, "msgs.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	convHdr := regexp.MustCompile(`(?i)^X-Parley-Conversation-Id:\s*(\S+)`)
	var number, callID, conv string
	flush := func() {
		if number != "" && callID != "" && conv != "" {
			for m, k := range map[*map[string]map[string]bool]string{&byConv: conv, &byNumber: number} {
				if (*m)[k] == nil {
					(*m)[k] = map[string]bool{}
				}
				(*m)[k][callID] = true
			}
		}
		number, callID, conv = "", "", ""
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case sippStamp.MatchString(line):
			flush()
		case sippInvite.MatchString(line):
			number = sippInvite.FindStringSubmatch(line)[1]
		case number != "" && sippCallID.MatchString(line):
			callID = sippCallID.FindStringSubmatch(line)[1]
		case number != "" && convHdr.MatchString(line):
			conv = convHdr.FindStringSubmatch(line)[1]
		}
	}
	flush()
	invites := 0
	for c, ids := range byConv {
		invites += len(ids)
		if len(ids) != 1 {
			t.Errorf("conversation %s was INVITEd as %d calls", c, len(ids))
		}
	}
	attempts := map[string]int{}
	rows, err := st.DB().Query(`SELECT to_number, attempts, state FROM campaign_contacts`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	short := 0
	for rows.Next() {
		var n, state string
		var a int
		rows.Scan(&n, &a, &state)
		attempts[n] = a
		got := len(byNumber[n])
		if got > a {
			t.Errorf("%s: sipp saw %d calls, its attempts say %d", n, got, a)
		}
		if got < a {
			short += a - got // placed, then the victim died before its INVITE went out
		}
		if state != "busy" && state != "failed" {
			t.Errorf("%s ended %s", n, state)
		}
	}
	if len(attempts) != 120 {
		t.Fatalf("%d contacts", len(attempts))
	}
	t.Logf("%d INVITEs for %d conversations at sipp; %d attempts counted whose INVITE never left the killed node", invites, len(byConv), short)
	if short > 12 {
		t.Errorf("%d attempts without an INVITE: more than the calls the victim could have had in hand", short)
	}
}
