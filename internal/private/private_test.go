package private

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode().Perm()
}

func TestPrivateWhateverTheUmask(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	root := filepath.Join(t.TempDir(), "data")
	if err := MkdirAll(filepath.Join(root, "recordings", "2026")); err != nil {
		t.Fatal(err)
	}
	f, err := Create(filepath.Join(root, "recordings", "2026", "a.wav"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := WriteFile(filepath.Join(root, "attachments", "b.png"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := Touch(filepath.Join(root, "parley.db")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{root, filepath.Join(root, "recordings"), filepath.Join(root, "recordings", "2026"), filepath.Join(root, "attachments")} {
		if m := mode(t, d); m != DirMode {
			t.Errorf("%s is %o, want %o", d, m, DirMode)
		}
	}
	for _, f := range []string{"recordings/2026/a.wav", "attachments/b.png", "parley.db"} {
		if m := mode(t, filepath.Join(root, f)); m != FileMode {
			t.Errorf("%s is %o, want %o", f, m, FileMode)
		}
	}
}

func TestFixTreeNarrowsAnOldInstall(t *testing.T) {
	root := t.TempDir()
	os.Chmod(root, 0o755)
	sub := filepath.Join(root, "recordings")
	os.Mkdir(sub, 0o755)
	os.Chmod(sub, 0o755)
	db := filepath.Join(root, "parley.db")
	os.WriteFile(db, []byte("x"), 0o644)
	os.Chmod(db, 0o644)
	key := filepath.Join(root, "master.key")
	os.WriteFile(key, []byte("k"), 0o600)
	os.Symlink("/etc/hostname", filepath.Join(root, "link"))
	fixed, err := FixTree(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(fixed) != 3 {
		t.Fatalf("fixed %v, want the root, recordings and parley.db", fixed)
	}
	if mode(t, root) != DirMode || mode(t, sub) != DirMode || mode(t, db) != FileMode || mode(t, key) != FileMode {
		t.Fatalf("modes after fix: root %o sub %o db %o key %o", mode(t, root), mode(t, sub), mode(t, db), mode(t, key))
	}
	// A second pass changes nothing, and a mode tighter than wanted is never widened.
	os.Chmod(key, 0o400)
	if again, _ := FixTree(root); len(again) != 0 || mode(t, key) != 0o400 {
		t.Fatalf("second pass fixed %v; key %o", again, mode(t, key))
	}
	if info, _ := os.Stat("/etc/hostname"); info != nil && info.Mode().Perm() == 0 {
		t.Fatal("followed the link")
	}
}
