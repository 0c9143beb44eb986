package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/app/events"
)

// TestEveryEventTypeDocumented: the document's webhooks section (OpenAPI 3.1) has one entry per
// registered event type, and those include the specification's, the scheduled calls', the
// campaigns', WhatsApp's and the trunks'. Every event type written as a literal anywhere in
// the code (store.Event{Type: "…"}) is registered, so that no event reaches a receiver (whose
// default set is every type) undocumented.
func TestEveryEventTypeDocumented(t *testing.T) {
	doc := servedDocument(t)
	hooks, _ := doc["webhooks"].(map[string]any)
	var documented, registered []string
	for k := range hooks {
		documented = append(documented, k)
	}
	for _, ty := range events.Types() {
		registered = append(registered, ty.Name)
	}
	slices.Sort(documented)
	slices.Sort(registered)
	if !slices.Equal(documented, registered) {
		t.Fatalf("webhooks section %v\nregistered types %v", documented, registered)
	}
	for _, want := range []string{
		"conversation.ended", "conversation.analyzed", "conversation.transcript", "form.abandoned", "conversation.deleted", // the specification's
		"conversation.started", "scheduled_call.placed", "scheduled_call.failed", "webhook.test", "conversation.redirected",
		"campaign.started", "campaign.paused", "campaign.resumed", "campaign.completed", "campaign.cancelled", "campaign.contact_finished",
		"whatsapp.message.failed", "trunk.registration",
	} {
		if !slices.Contains(documented, want) {
			t.Errorf("%s is not in the webhooks section", want)
		}
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for name, h := range hooks {
		body := h.(map[string]any)["post"].(map[string]any)["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
		parts := body["allOf"].([]any)
		props := parts[1].(map[string]any)["properties"].(map[string]any)
		ref, _ := props["data"].(map[string]any)["$ref"].(string)
		if _, ok := schemas[strings.TrimPrefix(ref, "#/components/schemas/")]; !ok || ref == "" {
			t.Errorf("%s: data %q is not a schema of the document", name, ref)
		}
	}

	// Every Event{Type: "literal"} of the code is registered.
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	found := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "node_modules" || n == "testdata" || (strings.HasPrefix(n, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "storetest") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok || !isEventType(cl.Type) {
				return true
			}
			for _, el := range cl.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				if k, ok := kv.Key.(*ast.Ident); !ok || k.Name != "Type" {
					continue
				}
				if lit, ok := kv.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					typ, _ := strconv.Unquote(lit.Value)
					found++
					if _, ok := events.Lookup(typ); !ok {
						t.Errorf("%s: event type %q is written but not registered (events.Register), so not documented", fset.Position(lit.Pos()), typ)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 5 {
		t.Fatalf("found %d event type literals in the code; the walk is broken", found)
	}
}

// isEventType reports whether a composite literal's type is store.Event (or Event inside the
// store package).
func isEventType(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.SelectorExpr:
		p, ok := x.X.(*ast.Ident)
		return ok && p.Name == "store" && x.Sel.Name == "Event"
	case *ast.Ident:
		return x.Name == "Event"
	}
	return false
}
