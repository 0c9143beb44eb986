package api

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
)

// TestOpenAPILint runs Redocly's CLI, a validator we did not write, over the served document.
// .ci/run installs it (npm ci in scripts/openapi-lint); locally the test skips without it.
func TestOpenAPILint(t *testing.T) {
	dir, err := filepath.Abs("../../scripts/openapi-lint")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "node_modules", ".bin", "redocly")
	if _, err := os.Stat(bin); err != nil {
		testenv.Missing(t, "@redocly/cli (run: npm ci --prefix scripts/openapi-lint)")
	}
	doc, err := OpenAPIDocument("https://api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "openapi.v1.json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "lint", "--config", filepath.Join(dir, "redocly.yaml"), "--format", "stylish", path)
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redocly lint found errors in the document:\n%s", out)
	}
	t.Logf("redocly lint:\n%s", out)
}
