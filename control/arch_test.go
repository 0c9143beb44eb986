package control

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The arrows of the control plane (DESIGN.md): transport → domain → store, jobs beside the
// domain, never the other way. go list proves them on every test run.

type goPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
	GoFiles    []string
	Dir        string
}

func listPackages(t *testing.T, patterns ...string) []goPackage {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps=false", "-json"}, patterns...)...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", patterns, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []goPackage
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

const module = "github.com/parley-voice/parley/"

func TestArrows(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	transport := []string{"net/http", module + "control/api", module + "control/problem"}
	rules := []struct {
		pattern string
		banned  []string
		deps    bool // check every dependency, not only direct imports
	}{
		// The domain layer speaks no HTTP: not directly, and not through the transport.
		{"./control/app/...", transport, false},
		{"./control/app/...", []string{module + "control/api", module + "control/problem"}, true},
		// Jobs call the domain, never the transport.
		{"./control/jobs/...", transport, true},
		// The store knows nothing above it.
		{"./control/store/...", append(transport, module+"control/app", module+"control/runtime"), true},
		// The error catalogue is shared by every layer, so it depends on none.
		{"./control/fault", transport, true},
	}
	for _, r := range rules {
		for _, p := range listPackages(t, r.pattern) {
			if p.ImportPath == "" {
				continue
			}
			uses := p.Imports
			if r.deps {
				uses = p.Deps
			}
			for _, b := range r.banned {
				if slices.Contains(uses, b) {
					how := "imports"
					if r.deps {
						how = "depends on"
					}
					t.Errorf("%s %s %s", p.ImportPath, how, b)
				}
			}
		}
	}
}

// TestNoReachChecksInHandlers: tenancy lives in the store's Scope, so no file of the transport
// or the domain layer compares a key's reach or an organization id by hand.
func TestNoReachChecksInHandlers(t *testing.T) {
	files, err := filepath.Glob("api/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transport files: %v", err)
	}
	domain, _ := filepath.Glob("app/*/*.go")
	root, _ := filepath.Glob("app/*.go")
	files = append(append(files, domain...), root...)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"Reaches(", "OrgID != ", ".OrgID == "} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s contains %q: load objects through the caller's store.Scope instead", f, bad)
			}
		}
	}
}
