package store

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestReadMigrations(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	good := fstest.MapFS{
		"m/0001_first.sql":  file("CREATE TABLE a (x int);"),
		"m/0002_second.sql": file("CREATE TABLE b (x int);"),
	}
	ms, err := readMigrations(good, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].version != 1 || ms[0].name != "first" || ms[1].version != 2 || !strings.Contains(ms[1].sql, "TABLE b") {
		t.Fatalf("readMigrations = %+v", ms)
	}
	bad := map[string]fstest.MapFS{
		"gap":         {"m/0001_a.sql": file(""), "m/0003_c.sql": file("")},
		"no first":    {"m/0002_b.sql": file("")},
		"duplicate":   {"m/0001_a.sql": file(""), "m/0001_b.sql": file("")},
		"bad name":    {"m/0001_a.sql": file(""), "m/2_b.sql": file("")},
		"upper case":  {"m/0001_First.sql": file("")},
		"not sql":     {"m/0001_a.txt": file("")},
		"empty":       {"m/.keep": file("")},
		"missing dir": {"other/0001_a.sql": file("")},
	}
	for name, fsys := range bad {
		if _, err := readMigrations(fsys, "m"); err == nil {
			t.Errorf("%s: readMigrations accepted it", name)
		}
	}
}

// TestEmbeddedMigrationsMatch keeps the two engines' schemas in step: the same versions with the
// same names, and the same tables.
func TestEmbeddedMigrationsMatch(t *testing.T) {
	lite, err := loadMigrations(SQLite)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := loadMigrations(Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if len(lite) != len(pg) {
		t.Fatalf("sqlite has %d migrations, postgres %d", len(lite), len(pg))
	}
	for i := range lite {
		if lite[i].name != pg[i].name {
			t.Errorf("migration %d: sqlite %q, postgres %q", i+1, lite[i].name, pg[i].name)
		}
		if a, b := strings.Count(lite[i].sql, "CREATE TABLE"), strings.Count(pg[i].sql, "CREATE TABLE"); a != b {
			t.Errorf("migration %d creates %d tables on sqlite, %d on postgres", i+1, a, b)
		}
		// SQLite's full-text index is an FTS5 virtual table where PostgreSQL has a GIN index.
		if a, b := strings.Count(lite[i].sql, "CREATE INDEX")+strings.Count(lite[i].sql, "USING fts5"), strings.Count(pg[i].sql, "CREATE INDEX"); a != b {
			t.Errorf("migration %d creates %d indexes on sqlite, %d on postgres", i+1, a, b)
		}
	}
}
