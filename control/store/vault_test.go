package store_test

import (
	"bytes"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
)

// TestVaultDumpHoldsNoValue: after secrets are created, changed and used, neither the SQLite
// files (database, WAL) nor a pg_dump of the PostgreSQL schema holds a value in clear text, in
// any of the forms an outbound request sends it (raw, base64 of user:password).
func TestVaultDumpHoldsNoValue(t *testing.T) {
	values := []string{"VALUE-in-clear-0001-bearer", "VALUE-in-clear-0002-basic", "VALUE-in-clear-0003-changed"}
	fill := func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		box, err := secrets.NewBox(bytes.Repeat([]byte{3}, secrets.KeySize))
		if err != nil {
			t.Fatal(err)
		}
		org, err := s.CreateOrg(ctx, "Acme")
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.CreateProject(ctx, org.ID, "One")
		if err != nil {
			t.Fatal(err)
		}
		sc := store.OrgScope(org.ID)
		a, err := s.Vault().Create(ctx, sc, box, store.NewSecret{ProjectID: p.ID, Name: "a", Type: store.SecretBearer, Value: values[0]})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Vault().Create(ctx, sc, box, store.NewSecret{ProjectID: p.ID, Name: "b", Type: store.SecretBasic, Username: "svc", Value: values[1]}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Vault().Change(ctx, sc, box, a.ID, store.SecretChange{Value: &values[2]}); err != nil {
			t.Fatal(err)
		}
		if err := s.Vault().Touch(ctx, sc, a.ID); err != nil {
			t.Fatal(err)
		}
	}
	check := func(t *testing.T, what string, dump []byte) {
		t.Helper()
		for _, v := range values {
			if bytes.Contains(dump, []byte(v)) || bytes.Contains(dump, []byte("VALUE-in-clear")) {
				t.Fatalf("%s holds a secret value in clear text", what)
			}
		}
		if len(dump) == 0 {
			t.Fatalf("%s is empty", what)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		s := open(t, store.Options{DataDir: dir})
		if _, err := s.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		fill(t, s)
		files, _ := filepath.Glob(filepath.Join(dir, "parley.db*"))
		if len(files) == 0 {
			t.Fatal("no database file")
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			check(t, f, b)
		}
		s.Close()
		b, _ := os.ReadFile(filepath.Join(dir, "parley.db"))
		check(t, "the checkpointed database file", b)
	})
	t.Run("postgres", func(t *testing.T) {
		base := testenv.PostgresURL(t)
		pgDump := testenv.NeedCommand(t, "pg_dump")
		admin, err := sql.Open("pgx", base)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.Close() })
		url := pgSchema(t, admin, base)
		s := open(t, store.Options{URL: url, MaxConns: 2})
		if _, err := s.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		fill(t, s)
		schema := url[strings.LastIndex(url, "search_path=")+len("search_path="):]
		conn := strings.Split(base, "?")[0]
		out, err := exec.CommandContext(t.Context(), pgDump, "--dbname="+conn, "--schema="+schema, "--data-only").Output()
		if err != nil {
			t.Fatalf("pg_dump: %v", err)
		}
		if !bytes.Contains(out, []byte("vault_secrets")) {
			t.Fatalf("the dump has no vault: %s", out)
		}
		check(t, "pg_dump", out)
	})
}
