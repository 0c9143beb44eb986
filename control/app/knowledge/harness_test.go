package knowledge_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/app"
	"github.com/parley-voice/parley/control/app/knowledge"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
)

// engines runs fn on a migrated SQLite store and a migrated PostgreSQL store (its own schema).
func engines(t *testing.T, fn func(t *testing.T, st *store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		fn(t, openStore(t, store.Options{DataDir: t.TempDir()}))
	})
	t.Run("postgres", func(t *testing.T) {
		base := testenv.PostgresURL(t)
		admin, err := sql.Open("pgx", base)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.Close() })
		b := make([]byte, 6)
		rand.Read(b)
		schema := "k_" + hex.EncodeToString(b)
		if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
			t.Fatalf("create schema: %v", err)
		}
		t.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
		sep := "?"
		if strings.Contains(base, "?") {
			sep = "&"
		}
		fn(t, openStore(t, store.Options{URL: base + sep + "search_path=" + schema, MaxConns: 4}))
	})
}

func openStore(t *testing.T, o store.Options) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return st
}

// fixture is an organization with a project and an operator acting in it.
type fixture struct {
	st      *store.Store
	org     store.Org
	project store.Project
	act     app.Actor
	svc     *knowledge.Service
}

func newFixture(t *testing.T, st *store.Store) *fixture {
	t.Helper()
	org, err := st.CreateOrg(t.Context(), "Acme")
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.CreateProject(t.Context(), org.ID, "Main")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{st: st, org: org, project: p, act: app.OperatorActor(org, "test"), svc: &knowledge.Service{Store: st}}
}

// base creates a knowledge base.
func (f *fixture) base(t *testing.T, name string) knowledge.KnowledgeBase {
	t.Helper()
	k, err := f.svc.CreateBase(t.Context(), f.act, knowledge.KnowledgeBaseCreate{ProjectID: string(f.project.ID), Name: name})
	if err != nil {
		t.Fatalf("CreateBase: %v", err)
	}
	return k
}

// upload uploads a document and indexes it at once (what the job does).
func (f *fixture) upload(t *testing.T, kb knowledge.KnowledgeBase, name string, data []byte) knowledge.KnowledgeDocument {
	t.Helper()
	d, err := f.svc.Upload(t.Context(), f.act, kb.ID, knowledge.Upload{Name: name, Data: data})
	if err != nil {
		t.Fatalf("Upload %s: %v", name, err)
	}
	if err := f.svc.Index(t.Context(), store.KnowledgeDocumentID(d.ID)); err != nil {
		t.Fatalf("Index %s: %v", name, err)
	}
	d, err = f.svc.GetDocument(t.Context(), f.act, kb.ID, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
