package api

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/app/calls"
	"github.com/parley-voice/parley/control/app/campaigns"
	"github.com/parley-voice/parley/control/jobs"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
)

// benchMedia places nothing: it ends each conversation busy at once, so that the benchmark
// measures the dialler's own bookkeeping (lease, checks, conversation, settle) and no media.
// That end (a store write the media node would make) is a stand-in, not the dialler's: the
// CPU its thread spends is kept in cpu, and reported apart.
type benchMedia struct {
	st  *store.Store
	mu  sync.Mutex
	n   int
	cpu time.Duration
}

func (m *benchMedia) CanPlace(string) error { return nil }
func (m *benchMedia) Place(ctx context.Context, _ store.Mode, p calls.Placement) error {
	var err error
	d := onThreadCPU(func() {
		_, err = m.st.EndConversation(ctx, p.ConversationID, store.ConversationEnd{Reason: "busy", At: time.Now()})
	})
	m.mu.Lock()
	m.n++
	m.cpu += d
	m.mu.Unlock()
	return err
}
func (m *benchMedia) Abandon(context.Context, store.OrgID, store.ConversationID) {}
func (m *benchMedia) AcquireCallSlot(context.Context, store.OrgID, store.ConversationID, int) error {
	return nil
}
func (m *benchMedia) ReleaseCallSlot(context.Context, store.OrgID, store.ConversationID) {}
func (m *benchMedia) CountDaily(context.Context, store.OrgID, int) (bool, error)         { return true, nil }
func (m *benchMedia) StartWebCall(context.Context, store.ConversationID, string) (calls.WebCallJoin, error) {
	return calls.WebCallJoin{}, nil
}

// BenchmarkCampaignAttempt is the dialler's bookkeeping for one attempt, end to end through the
// store: the tick's lease (attempt row, job), the worker's claim of the attempt job, the job (the
// do-not-call list, the start rules, the conversation with the attempt's placed mark, its audit
// event and the job's completion, in one commit) and the settle (the outcome, the contact's
// final state, its event). The target is ≤ 0.5 ms of CPU per attempt.
//
// cpu-ms/attempt is this process's CPU (the database server's is not in it; on PostgreSQL
// pg-server-cpu-ms/attempt is its backends'), the campaigns' creation left out. It includes a
// stand-in that is not the dialler's, reported apart as the CPU of the thread that ran it: the
// media's end of the call (standin-media-cpu-ms/attempt: one UPDATE of the conversation). The
// loop's own reads (the campaign's status) are in cpu-ms too. stmts/attempt and txs/attempt
// count the store's statements and transactions (the stand-in's one statement among them).
func BenchmarkCampaignAttempt(b *testing.B) {
	for _, e := range []struct {
		name string
		open func(b *testing.B) *store.Store
	}{
		{"sqlite", func(b *testing.B) *store.Store { return migrate(b, store.Options{DataDir: b.TempDir()}) }},
		{"postgres", func(b *testing.B) *store.Store {
			return migrate(b, store.Options{URL: killSchema(b) + "&application_name=" + benchPGApp, MaxConns: 4})
		}},
	} {
		b.Run(e.name, func(b *testing.B) {
			st := e.open(b)
			var pg *pgServerCPU
			if e.name == "postgres" {
				pg = newPGServerCPU(b)
			}
			w := newWorld(b, st, worldOpts{conv: &convOpts{}})
			if _, err := st.AddCredit(context.Background(), w.org.ID, 1000*1_000_000, "bench"); err != nil {
				b.Fatal(err)
			}
			agent := benchDo(b, w, "POST", "/v1/agents", nil, map[string]any{"project_id": w.p1.ID,
				"definition": definition("Bench", "custom", "outbound", channels("phone"))}).Str("id")
			benchDo(b, w, "POST", "/v1/agents/"+agent+"/publish", nil, nil)
			if _, err := st.CreatePhoneNumber(context.Background(), store.NewPhoneNumber{OrgID: w.org.ID, ProjectID: w.p1.ID, Number: "+14155550001", AgentID: store.AgentID(agent)}); err != nil {
				b.Fatal(err)
			}
			// The statements and transactions the store runs (the campaigns' creation left out):
			// reported per attempt, and by op with PARLEY_BENCH_OPS=1.
			var opMu sync.Mutex
			ops, counting := map[string]int{}, false
			st.OnStatement(func(op string) {
				opMu.Lock()
				if counting {
					ops[op]++
				}
				opMu.Unlock()
			})
			countOps := func(on bool) { opMu.Lock(); counting = on; opMu.Unlock() }
			m := &benchMedia{st: st}
			svc := &campaigns.Service{Store: st, Calls: &calls.Service{Store: st, Rules: w.api.Calls.Rules, Media: m}}
			batch := 0
			var setupCPU, setupPG time.Duration // the campaigns' creation, left out of the measure
			run := func(n int) {
				contacts := make([]any, n)
				for i := range contacts {
					contacts[i] = map[string]any{"to_number": fmt.Sprintf("+1415603%04d", i), "variables": map[string]any{"customer": "Ada"}}
				}
				batch++
				b.StopTimer()
				countOps(false)
				c0, pg0 := cpuNow(), pg.sum()
				r := benchDo(b, w, "POST", "/v1/campaigns", idem(fmt.Sprintf("bench-%d", batch)),
					map[string]any{"agent_id": agent, "name": "Bench", "contacts": contacts, "start": true,
						"pacing": map[string]any{"max_concurrent": 1000, "starts_per_minute": 6000}})
				id := store.CampaignID(r.Str("id"))
				setupCPU += cpuNow() - c0
				setupPG += pg.sum() - pg0
				countOps(true)
				b.StartTimer()
				ctx := context.Background()
				for {
					if _, err := svc.Tick(ctx); err != nil {
						b.Fatal(err)
					}
					// The attempt jobs, claimed as a worker claims them and run by their handler,
					// which marks each done in the commit that places its attempt.
					claimed, err := st.ClaimJobs(ctx, store.ClaimJobs{Owner: "bench", Kinds: []string{campaigns.KindAttempt},
						Now: time.Now(), Lease: time.Minute, Limit: 1000})
					if err != nil {
						b.Fatal(err)
					}
					for _, sj := range claimed {
						if err := svc.RunAttempt(ctx, jobs.Claimed(sj, time.Now)); err != nil {
							b.Fatal(err)
						}
					}
					c, err := st.GetCampaign(ctx, id)
					if err != nil {
						b.Fatal(err)
					}
					if c.Status == store.CampaignCompleted {
						return
					}
				}
			}
			const perBatch = 100
			// The world's runtime polls the store in the background whatever the dialler does;
			// its rate, measured idle, is reported apart (background-cpu-ms/attempt).
			idle0 := cpuNow()
			time.Sleep(2 * time.Second)
			idleRate := float64(cpuNow()-idle0) / float64(2*time.Second)
			b.ResetTimer()
			m.cpu = 0
			clear(ops)
			cpu0 := cpuNow()
			pg.start()
			for b.Loop() {
				run(perBatch)
			}
			b.ReportMetric(float64((cpuNow()-cpu0-setupCPU).Microseconds())/1000/float64(b.N*perBatch), "cpu-ms/attempt")
			if pg != nil {
				// The server's CPU is not this process's: its backends for this store, from
				// /proc, the campaigns' creation left out as in the process's figure.
				b.ReportMetric(float64((pg.stop()-setupPG).Microseconds())/1000/float64(b.N*perBatch), "pg-server-cpu-ms/attempt")
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N*perBatch), "ms/attempt")
			countOps(false)
			stmts, txs := 0, ops[store.TxOp]
			for op, n := range ops {
				if op != store.TxOp {
					stmts += n
				}
			}
			b.ReportMetric(float64(stmts)/float64(b.N*perBatch), "stmts/attempt")
			b.ReportMetric(float64(txs)/float64(b.N*perBatch), "txs/attempt")
			if os.Getenv("PARLEY_BENCH_OPS") == "1" {
				for op, n := range ops {
					b.Logf("%-40s %8.3f per attempt", op, float64(n)/float64(b.N*perBatch))
				}
			}
			b.ReportMetric(float64(m.cpu.Microseconds())/1000/float64(b.N*perBatch), "standin-media-cpu-ms/attempt")
			b.ReportMetric(idleRate*float64(b.Elapsed().Microseconds())/1000/float64(b.N*perBatch), "background-cpu-ms/attempt")
			if m.n != b.N*perBatch {
				b.Fatalf("%d placed, want %d", m.n, b.N*perBatch)
			}
			// Every attempt job was marked done by its placing: none is left to the worker.
			if left, err := st.ListJobs(context.Background(), store.JobFilter{State: store.JobRunning, Kind: campaigns.KindAttempt, Limit: 10}); err != nil || len(left) > 0 {
				b.Fatalf("attempt jobs left running: %d (%v)", len(left), err)
			}
		})
	}
}

// onThreadCPU runs f on the calling goroutine, locked to its OS thread, and returns the CPU
// time that thread spent (getrusage RUSAGE_THREAD: user + system, the syscalls included; the
// thread sleeps while f waits for the database).
func onThreadCPU(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := threadCPU()
	f()
	return threadCPU() - t0
}

func threadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD (Linux)
	_ = syscall.Getrusage(rusageThread, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchDo sends a request of the live key through the world's router (without the document
// checks of world.do, which need a *testing.T) and fails b unless it succeeds.
func benchDo(b *testing.B, w *world, method, path string, header map[string]string, body any) *resp {
	b.Helper()
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	hr := httptest.NewRequest(method, path, bytes.NewReader(raw))
	hr.Header.Set("Authorization", "Bearer "+w.keys[kLive])
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		hr.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	w.h.ServeHTTP(rec, hr)
	r := &resp{Status: rec.Code, Body: rec.Body.Bytes()}
	_ = json.Unmarshal(r.Body, &r.JSON)
	if r.Status >= 300 {
		b.Fatalf("%s %s: %s", method, path, r)
	}
	return r
}

// benchPGApp names the benchmark's PostgreSQL connections (application_name), so that the
// server's CPU spent on them can be read apart from other clients'.
var benchPGApp = fmt.Sprintf("parley_bench_%d", os.Getpid())

// pgServerCPU sums the CPU time (user + system, from /proc/<pid>/stat) of the PostgreSQL
// backends serving benchPGApp; the server must run on this machine. A backend that closes
// between start and stop is not counted (the store keeps its connections: MaxIdleConns is
// MaxConns).
type pgServerCPU struct {
	b     *testing.B
	admin *sql.DB
	at    map[int]time.Duration
}

func newPGServerCPU(b *testing.B) *pgServerCPU {
	admin, err := sql.Open("pgx", testenv.PostgresURL(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { admin.Close() })
	return &pgServerCPU{b: b, admin: admin}
}

func (p *pgServerCPU) read() map[int]time.Duration {
	rows, err := p.admin.Query(`SELECT pid FROM pg_stat_activity WHERE application_name = $1`, benchPGApp)
	if err != nil {
		p.b.Fatal(err)
	}
	defer rows.Close()
	out := map[int]time.Duration{}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			p.b.Fatal(err)
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // not on this machine, or gone
		}
		// Fields after the command's closing parenthesis: utime and stime are the 12th and
		// 13th, in clock ticks (100 a second on Linux).
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		stm, _ := strconv.ParseInt(f[12], 10, 64)
		out[pid] = time.Duration(ut+stm) * 10 * time.Millisecond
	}
	return out
}

func (p *pgServerCPU) start() {
	if p != nil {
		p.at = p.read()
	}
}

// sum is the backends' CPU so far (0 without a server to read).
func (p *pgServerCPU) sum() time.Duration {
	if p == nil {
		return 0
	}
	var d time.Duration
	for _, t := range p.read() {
		d += t
	}
	return d
}

func (p *pgServerCPU) stop() time.Duration {
	var d time.Duration
	for pid, t := range p.read() {
		d += t - p.at[pid]
	}
	return d
}
