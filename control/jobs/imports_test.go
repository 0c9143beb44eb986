package jobs_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoTransport checks the package's promise: it imports no transport, directly or not.
func TestNoTransport(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		switch {
		case p == "net/http", strings.HasPrefix(p, "net/http/"),
			strings.HasPrefix(p, "github.com/parley-voice/parley/control/api"),
			strings.HasPrefix(p, "github.com/go-chi/"):
			t.Errorf("control/jobs depends on %s", p)
		}
	}
}
