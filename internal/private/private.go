// Package private keeps the service's data — the database, recordings, attachments, the master
// key — readable and writable by the service's own user only: directories 0700 and files 0600,
// whatever the umask. It must never widen a mode, and never follow a symbolic link out of the
// tree it is given.
package private

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Modes of the data directory's contents.
const (
	DirMode  fs.FileMode = 0o700
	FileMode fs.FileMode = 0o600
)

// MkdirAll creates dir and its missing parents with DirMode, and narrows dir itself to DirMode
// when it exists with a looser mode.
func MkdirAll(dir string) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return err
	}
	return Narrow(dir, DirMode)
}

// Create opens path for writing, creating it with FileMode (the umask cannot widen it) and
// truncating it; its directory is made with MkdirAll.
func Create(path string) (*os.File, error) {
	if err := MkdirAll(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, FileMode)
}

// WriteFile writes data to path with FileMode.
func WriteFile(path string, data []byte) error {
	if err := MkdirAll(filepath.Dir(path)); err != nil {
		return err
	}
	if err := os.WriteFile(path, data, FileMode); err != nil {
		return err
	}
	return Narrow(path, FileMode)
}

// Touch creates path empty with FileMode when it does not exist, so that a library that then
// opens it (SQLite, which gives its -wal and -shm files the database file's mode) keeps it
// private.
func Touch(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return err
	}
	return f.Close()
}

// FixTree narrows every directory under root (root included) to DirMode and every regular file
// to FileMode, and returns the paths it changed. Symbolic links are left alone.
func FixTree(root string) ([]string, error) {
	var fixed []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		want := FileMode
		switch {
		case d.IsDir():
			want = DirMode
		case !d.Type().IsRegular():
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm()&^want != 0 {
			if err := os.Chmod(p, info.Mode().Perm()&want); err != nil {
				return fmt.Errorf("make %s private: %w", p, err)
			}
			fixed = append(fixed, p)
		}
		return nil
	})
	return fixed, err
}

// Narrow removes from path's mode the bits want does not have.
func Narrow(path string, want fs.FileMode) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if info.Mode().Perm()&^want != 0 {
		return os.Chmod(path, info.Mode().Perm()&want)
	}
	return nil
}
