package knowledge_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/parley-voice/parley/control/app/knowledge"
	"github.com/parley-voice/parley/control/store"
)

// benchEngines runs fn on SQLite and PostgreSQL stores.
func benchEngines(b *testing.B, fn func(b *testing.B, st *store.Store)) {
	b.Run("sqlite", func(b *testing.B) { fn(b, benchStore(b, store.Options{DataDir: b.TempDir()})) })
	b.Run("postgres", func(b *testing.B) {
		url := os.Getenv("PARLEY_TEST_DATABASE_URL")
		if url == "" {
			b.Skip("PARLEY_TEST_DATABASE_URL is not set")
		}
		admin, err := sql.Open("pgx", url)
		if err != nil {
			b.Fatal(err)
		}
		defer admin.Close()
		schema := fmt.Sprintf("kb_bench_%d", time.Now().UnixNano())
		if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		fn(b, benchStore(b, store.Options{URL: url + sep + "search_path=" + schema, MaxConns: 4}))
	})
}

func benchStore(b *testing.B, o store.Options) *store.Store {
	st, err := store.Open(b.Context(), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	return st
}

// goDocChunks extracts and chunks the Go specification and memory model.
func goDocChunks(b *testing.B) ([]store.KnowledgeChunk, int) {
	var all []store.KnowledgeChunk
	n := 0
	for _, name := range []string{"go_spec.html", "go_mem.html"} {
		data, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "doc", name))
		if err != nil {
			b.Skipf("no %s: %v", name, err)
		}
		pages, err := knowledge.Extract(data, knowledge.TypeHTML, "")
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range pages {
			n += len(p.Text)
		}
		all = append(all, knowledge.Split(pages, knowledge.ChunkOptions{})...)
	}
	return all, n
}

// BenchmarkRetrieve20k: one turn's retrieval (the 50 questions of the quality test in turn) over
// a knowledge base of 20,000 chunks (copies of the Go documents), full text; reports p50 and
// p99 in ms.
func BenchmarkRetrieve20k(b *testing.B) {
	benchEngines(b, func(b *testing.B, st *store.Store) {
		org, err := st.CreateOrg(b.Context(), "Bench "+fmt.Sprint(time.Now().UnixNano()))
		if err != nil {
			b.Fatal(err)
		}
		p, _ := st.CreateProject(b.Context(), org.ID, "P")
		sc := store.OrgScope(org.ID)
		kb, err := st.Knowledge().CreateBase(b.Context(), sc, store.KnowledgeBase{ProjectID: p.ID, Name: "Go"})
		if err != nil {
			b.Fatal(err)
		}
		chunks, _ := goDocChunks(b)
		total := 0
		for copyN := 0; total < 20000; copyN++ {
			part := chunks
			if rest := 20000 - total; rest < len(part) {
				part = part[:rest]
			}
			d, err := st.Knowledge().CreateDocument(b.Context(), sc, kb.ID, fmt.Sprintf("copy-%d.html", copyN), store.KnowledgeUpload{Data: []byte("x"), ContentType: "text/html"})
			if err != nil {
				b.Fatal(err)
			}
			if err := st.Knowledge().FinishIndex(b.Context(), d.ID, store.Indexed{Chunks: part}); err != nil {
				b.Fatal(err)
			}
			total += len(part)
		}
		if st.Dialect() == store.Postgres {
			// The steady state: autovacuum has visited the table after the load (its visibility
			// map lets a bitmap scan skip the heap, and its statistics steer the planner).
			if _, err := st.DB().ExecContext(b.Context(), "VACUUM ANALYZE knowledge_chunks"); err != nil {
				b.Fatal(err)
			}
		}
		svc := &knowledge.Service{Store: st}
		bases := []store.KnowledgeBaseID{kb.ID}
		// What the pruning of common terms costs in quality at this size: recall@3 of the
		// quality test's questions over the 20,000 chunks (each section is there many times).
		found := 0
		for _, q := range goDocQuestions {
			hits, err := svc.Retrieve(b.Context(), org.ID, bases, q.q, 3)
			if err != nil {
				b.Fatal(err)
			}
			var got []string
			for _, h := range hits {
				parts := strings.Split(h.Chunk.Heading, " > ")
				got = append(got, parts[len(parts)-1])
			}
			if slices.ContainsFunc(got, func(s string) bool { return strings.EqualFold(s, q.section) }) {
				found++
			} else {
				b.Logf("miss: %q %v want %q, got %q", q.q, knowledge.Terms(q.q), q.section, got)
			}
		}
		durs := make([]time.Duration, 0, 1000)
		cpus := make([]time.Duration, 0, 1000)
		// The machine is shared: besides wall time, the CPU time of this thread (SQLite runs on
		// the calling goroutine, locked to it) says what one retrieval costs.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			start, c0 := time.Now(), threadCPU()
			if _, err := svc.Retrieve(b.Context(), org.ID, bases, goDocQuestions[i%len(goDocQuestions)].q, 4); err != nil {
				b.Fatal(err)
			}
			durs = append(durs, time.Since(start))
			cpus = append(cpus, threadCPU()-c0)
		}
		slices.Sort(durs)
		b.ReportMetric(float64(found)/float64(len(goDocQuestions)), "recall@3")
		slices.Sort(cpus)
		if len(durs) > 0 {
			b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(cpus[len(cpus)/2].Microseconds())/1000, "cpu-p50-ms")
			b.ReportMetric(float64(cpus[len(cpus)*99/100].Microseconds())/1000, "cpu-p99-ms")
		}
	})
}

// BenchmarkIndex: extracting, chunking and indexing the Go specification (one core); the
// throughput is of extracted text.
func BenchmarkIndex(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "doc", "go_spec.html"))
	if err != nil {
		b.Skip(err)
	}
	benchEngines(b, func(b *testing.B, st *store.Store) {
		org, _ := st.CreateOrg(b.Context(), "Bench "+fmt.Sprint(time.Now().UnixNano()))
		p, _ := st.CreateProject(b.Context(), org.ID, "P")
		sc := store.OrgScope(org.ID)
		kb, _ := st.Knowledge().CreateBase(b.Context(), sc, store.KnowledgeBase{ProjectID: p.ID, Name: "Go"})
		svc := &knowledge.Service{Store: st}
		pages, _ := knowledge.Extract(data, knowledge.TypeHTML, "")
		b.SetBytes(int64(len(pages[0].Text)))
		c0 := processCPU()
		b.ResetTimer()
		defer func() {
			// The machine is shared: the process's CPU time (GC included) per byte is the
			// throughput of one core.
			if cpu := processCPU() - c0; cpu > 0 {
				b.ReportMetric(float64(len(pages[0].Text))*float64(b.N)/1e6/cpu.Seconds(), "cpu-MB/s")
			}
		}()
		for b.Loop() {
			d, err := st.Knowledge().CreateDocument(b.Context(), sc, kb.ID, "go_spec.html", store.KnowledgeUpload{Data: data, ContentType: knowledge.TypeHTML})
			if err != nil {
				b.Fatal(err)
			}
			if err := svc.Index(b.Context(), store.KnowledgeDocumentID(d.ID)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// threadCPU is the CPU time of the calling OS thread, from the scheduler's own count
// (CLOCK_THREAD_CPUTIME_ID, nanoseconds; getrusage's figures are sampled at the clock tick, too
// coarse for a millisecond).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// processCPU is the CPU time of the process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
