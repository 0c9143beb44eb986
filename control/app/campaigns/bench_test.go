package campaigns

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
)

// benchStores opens a migrated SQLite file store and a PostgreSQL one (in a schema of its own).
func benchStores(b *testing.B) map[string]*store.Store {
	open := func(o store.Options) *store.Store {
		s, err := store.Open(b.Context(), o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		if _, err := s.Migrate(b.Context()); err != nil {
			b.Fatal(err)
		}
		return s
	}
	out := map[string]*store.Store{"sqlite": open(store.Options{DataDir: b.TempDir()})}
	base := testenv.PostgresURL(b)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { admin.Close() })
	r := make([]byte, 6)
	rand.Read(r)
	schema := "bench_" + hex.EncodeToString(r)
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	out["postgres"] = open(store.Options{URL: base + sep + "search_path=" + schema, MaxConns: 4})
	return out
}

// BenchmarkImport10k imports a CSV of 10,000 contacts (name, zone, external id, a variable):
// the first pass creates them all, every later pass updates them all (the repeat import).
// The target is ≤ 2 s per import on SQLite and on PostgreSQL.
func BenchmarkImport10k(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("number,name,timezone,external_id,var.plan\n")
	for i := range MaxImportRows {
		fmt.Fprintf(&sb, "+1415%07d,Person %d,America/Chicago,crm-%d,gold\n", 2000000+i, i, i)
	}
	data := []byte(sb.String())
	for name, st := range benchStores(b) {
		b.Run(name, func(b *testing.B) {
			org, err := st.CreateOrg(b.Context(), "Bench "+name)
			if err != nil {
				b.Fatal(err)
			}
			p, err := st.CreateProject(b.Context(), org.ID, "One")
			if err != nil {
				b.Fatal(err)
			}
			s := &Service{Store: st}
			act := app.OperatorActor(org, "bench")
			pid := string(p.ID)
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				res, err := s.Import(b.Context(), act, &pid, FormatCSV, data)
				if err != nil || res.Refused != 0 || res.Created+res.Updated != MaxImportRows {
					b.Fatalf("import: %+v %v", res, err)
				}
			}
			// The machine is shared: this process's CPU time per import is steadier than the
			// wall clock (the database server's own CPU is not in it).
			b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is the CPU time this process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
