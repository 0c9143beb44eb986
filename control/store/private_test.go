package store

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSQLiteFilesPrivate: the database and its -wal and -shm files are 0600 and the data
// directory 0700, whatever the umask; an existing world-readable database is narrowed on open.
func TestSQLiteFilesPrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "data")
	ctx := context.Background()
	s, err := Open(ctx, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOrg(ctx, "Acme"); err != nil {
		t.Fatal(err)
	}
	check := func(p string, want os.FileMode) {
		t.Helper()
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s is %o, want %o", filepath.Base(p), info.Mode().Perm(), want)
		}
	}
	db := filepath.Join(dir, "parley.db")
	check(dir, 0o700)
	check(db, 0o600)
	check(db+"-wal", 0o600)
	check(db+"-shm", 0o600)
	s.Close()
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(db, 0o600)
}
