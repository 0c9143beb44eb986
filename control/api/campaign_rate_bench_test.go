package api

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/app/campaigns"
	voicechannels "github.com/parley-voice/parley/control/channels"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/media"
	"github.com/parley-voice/parley/sip"
)

// BenchmarkCampaignSippStarts (issue 15): the dialler's start rate against a real SIP peer. A
// campaign of 2,000 contacts (pacing: 1,000 at once, 6,000 a minute, the most the interface
// allows) is dialled through Parley's SIP server to one sipp UAS on loopback that answers
// every INVITE 486 Busy Here (a final outcome: one attempt per contact). From sipp's own
// message log it reports starts/s (INVITEs received, over the time from the first to the
// last) and double-dials (INVITEs beyond the first for any number; must be 0), and fails on a
// double dial or a contact not called. Not part of make test; run it with `make
// bench-campaign-rate` (SQLite, and PostgreSQL when PARLEY_TEST_DATABASE_URL is set).
func BenchmarkCampaignSippStarts(b *testing.B) {
	sippBin := testenv.NeedCommand(b, "sipp")
	engines := []struct {
		name string
		open func(b *testing.B) *store.Store
	}{{"sqlite", func(b *testing.B) *store.Store { return migrate(b, store.Options{DataDir: b.TempDir()}) }}}
	if os.Getenv("PARLEY_TEST_DATABASE_URL") != "" {
		engines = append(engines, struct {
			name string
			open func(b *testing.B) *store.Store
		}{"postgres", func(b *testing.B) *store.Store { return migrate(b, store.Options{URL: killSchema(b), MaxConns: 16}) }})
	}
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			var rates []float64
			double := 0
			for b.Loop() {
				r, d := campaignStartRate(b, e.open(b), sippBin)
				rates, double = append(rates, r), double+d
			}
			sort.Float64s(rates)
			b.ReportMetric(rates[len(rates)/2], "starts/s")
			b.ReportMetric(float64(double), "double-dials")
		})
	}
}

// campaignStartRate runs one campaign and returns the starts per second sipp saw and the
// double dials (INVITEs beyond the first for a number; any fails the benchmark).
func campaignStartRate(b *testing.B, st *store.Store, sippBin string) (float64, int) {
	const contacts = 2000
	dir := b.TempDir()
	base := testenv.RTPBase(3999)
	srv, err := sip.New(sip.Options{Addr: "127.0.0.1:0", RTPPorts: media.PortRange{Min: base, Max: base + 3999},
		RTPIP: netip.MustParseAddr("127.0.0.1"), Trunks: sip.NewStaticTrunks(), Logger: quietLog()})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stopSIP := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Run(runCtx) }()
	defer func() { stopSIP(); <-served }()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	port := testenv.FreeUDPPort(b, false)
	if err := os.WriteFile(filepath.Join(dir, "busy.xml"), []byte(sippUAS("busy")), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, sippBin, "-sf", "busy.xml", "-i", "127.0.0.1", "-p", fmt.Sprint(port),
		"-mp", fmt.Sprint(testenv.FreeUDPPort(b, true)), "-nostdin", "-trace_msg", "-message_file", "busy.msgs", "-l", "5000", "-timeout", "290s")
	cmd.Dir, cmd.Env, cmd.WaitDelay = dir, append(os.Environ(), "TERM=dumb"), 5*time.Second
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var sipps sync.WaitGroup
	sipps.Go(func() { _ = cmd.Wait() })
	defer func() { cancel(); sipps.Wait() }()
	trunks := sip.NewStaticTrunks(sip.Trunk{Name: "busy", URI: fmt.Sprintf("sip:127.0.0.1:%d", port), Transport: sip.UDP,
		AllowedSources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	dialer := &voicechannels.SIPDialer{Server: srv, Trunks: trunks.Lookup}
	w := newWorld(b, st, worldOpts{conv: &convOpts{dialer: dialer, maxCalls: 1000}})
	if _, err := st.AddCredit(context.Background(), w.org.ID, 1000*1_000_000, "bench"); err != nil {
		b.Fatal(err)
	}
	agent := benchDo(b, w, "POST", "/v1/agents", nil, map[string]any{"project_id": w.p1.ID,
		"definition": definition("Rate", "custom", "outbound", channels("phone"))}).Str("id")
	benchDo(b, w, "POST", "/v1/agents/"+agent+"/publish", nil, nil)
	if _, err := st.CreatePhoneNumber(context.Background(), store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: "+14155550001", Trunk: "busy", AgentID: store.AgentID(agent)}); err != nil {
		b.Fatal(err)
	}
	batch := func(from int) []any {
		cs := make([]any, 0, campaigns.MaxCreateContacts)
		for i := from; i < from+campaigns.MaxCreateContacts; i++ {
			cs = append(cs, map[string]any{"to_number": fmt.Sprintf("+1415604%04d", i), "variables": map[string]any{"customer": "Ada"}})
		}
		return cs
	}
	id := benchDo(b, w, "POST", "/v1/campaigns", idem("rate"), map[string]any{"agent_id": agent, "name": "Rate", "contacts": batch(0),
		"pacing": map[string]any{"max_concurrent": 1000, "starts_per_minute": 6000, "ring_timeout_seconds": 30}}).Str("id")
	for from := campaigns.MaxCreateContacts; from < contacts; from += campaigns.MaxCreateContacts {
		benchDo(b, w, "POST", "/v1/campaigns/"+id+"/contacts", nil, map[string]any{"contacts": batch(from)})
	}

	// The dialler as a node runs it (control/conversations.go): one job worker of the default
	// concurrency with the attempt jobs, woken on each lease, and the tick as its periodic job
	// once a second.
	dctx, stopDialler := context.WithCancel(context.Background())
	jw := jobs.NewWorker(jobs.Options{Store: st, Bus: w.bus, Owner: "bench", Log: quietLog()})
	jw.Register("campaigns.tick", func(ctx context.Context, _ *jobs.Job) error {
		_, err := w.api.Campaigns.Tick(ctx)
		return err
	}, jobs.WithMaxAttempts(1))
	jw.Every("campaigns.tick", time.Second)
	jw.Register(campaigns.KindAttempt, w.api.Campaigns.RunAttempt)
	q := jw.Queue()
	w.api.Campaigns.Wake = func(ctx context.Context) { q.Wake(ctx, campaigns.KindAttempt) }
	var dw sync.WaitGroup
	dw.Go(func() { _ = jw.Run(dctx) })
	defer func() { stopDialler(); dw.Wait() }()
	benchDo(b, w, "POST", "/v1/campaigns/"+id+"/start", nil, nil)
	deadline := time.Now().Add(4 * time.Minute)
	for {
		c, err := st.GetCampaign(context.Background(), store.CampaignID(id))
		if err != nil {
			b.Fatal(err)
		}
		if c.Status == store.CampaignCompleted {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the campaign did not complete: %+v", c.Counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopDialler()
	dw.Wait()
	cancel()
	sipps.Wait()

	first, _, to := readSippLog(b, filepath.Join(dir, "busy.msgs"))
	perNumber := map[string]int{}
	var at []time.Time
	for cid, n := range to {
		perNumber[n]++
		at = append(at, first[cid])
	}
	double := 0
	for n, k := range perNumber {
		if k > 1 {
			double += k - 1
			b.Errorf("%s was sent %d INVITEs", n, k)
		}
	}
	if len(perNumber) != contacts {
		b.Errorf("sipp saw %d numbers, want %d", len(perNumber), contacts)
	}
	if len(at) < 2 {
		b.Fatalf("sipp saw %d INVITEs", len(at))
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	span := at[len(at)-1].Sub(at[0])
	rate := float64(len(at)-1) / span.Seconds()
	b.Logf("%d INVITEs over %s: %.0f starts/s, %d double dials", len(at), span.Round(time.Millisecond), rate, double)
	return rate, double
}
