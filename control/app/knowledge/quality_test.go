package knowledge_test

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/parley-voice/parley/control/app/knowledge"
	"github.com/parley-voice/parley/control/embeddings"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/session/fakes"
)

// qa is a question about the Go specification or memory model, with the heading of the section
// that answers it (matched against the last heading of a chunk's heading path).
type qa struct{ q, section string }

// goDocQuestions were written for this test by reading the two documents; nobody here wrote
// the documents.
var goDocQuestions = []qa{
	{"How do I write a comment that spans several lines?", "Comments"},
	{"When is a semicolon inserted automatically at the end of a line?", "Semicolons"},
	{"Which words are reserved keywords and cannot be used as identifiers?", "Keywords"},
	{"How are hexadecimal and binary integer literals written?", "Integer literals"},
	{"What is a raw string literal with back quotes?", "String literals"},
	{"Are constants typed or untyped, and what precision do they have?", "Constants"},
	{"What is the length of an array type and can it be negative?", "Array types"},
	{"What is the capacity of a slice and its underlying array?", "Slice types"},
	{"How do embedded fields and promoted fields in a struct work?", "Struct types"},
	{"What value does an uninitialized pointer have?", "Pointer types"},
	{"What does a function type with a variadic final parameter look like?", "Function types"},
	{"When does a type implement an interface?", "Implementing an interface"},
	{"Which key types are allowed in a map, and must they be comparable?", "Map types"},
	{"What is the difference between a buffered and unbuffered channel and its capacity?", "Channel types"},
	{"What is the method set of a pointer type *T?", "Method sets"},
	{"What does the blank identifier underscore do?", "Blank identifier"},
	{"How is an identifier exported to other packages with an upper case letter?", "Exported identifiers"},
	{"How does iota increment in a constant declaration?", "Iota"},
	{"What is the difference between an alias declaration and a type definition?", "Alias declarations"},
	{"What does the := short variable declaration do and may it redeclare variables?", "Short variable declarations"},
	{"How do I declare a method with a receiver?", "Method declarations"},
	{"How do composite literals for structs, arrays and maps work?", "Composite literals"},
	{"What is a closure function literal referring to variables of the surrounding function?", "Function literals"},
	{"What does a full slice expression a[low : high : max] set?", "Full slice expressions"},
	{"How does a type assertion x.(T) behave and what happens when it fails?", "Type assertions"},
	{"What happens on integer overflow of signed integers?", "Integer overflow"},
	{"What is the precedence of binary operators like && and ||?", "Operator precedence"},
	{"Which values are comparable with == and how are interface values compared?", "Comparison operators"},
	{"How do I convert a string to a slice of bytes or runes?", "Conversions to and from a string type"},
	{"In what order are function calls and operands evaluated?", "Order of evaluation"},
	{"How does a type switch on x.(type) work?", "Type switches"},
	{"How does a for loop with a range clause iterate over a map or channel?", "For statements with range clause"},
	{"What does a go statement do when starting a goroutine?", "Go statements"},
	{"How does a select statement choose among several ready communications?", "Select statements"},
	{"What does fallthrough do in a switch?", "Fallthrough statements"},
	{"When do deferred functions run and in which order?", "Defer statements"},
	{"How does append grow a slice when the capacity is exceeded, and what does copy return?", "Appending to and copying slices"},
	{"What happens when you close a channel that is already closed or nil?", "Close"},
	{"How do I delete an element from a map?", "Deletion of map elements"},
	{"How does make allocate slices, maps and channels with a size?", "Making slices, maps and channels"},
	{"How does recover stop a panicking goroutine?", "Handling panics"},
	{"What is the zero value of variables that are not initialized?", "The zero value"},
	{"In what order are package-level variables initialized and init functions run?", "Package initialization"},
	{"What does unsafe.Pointer allow and what are Sizeof and Alignof?", "Package unsafe"},
	{"What is a data race in the memory model?", "Memory Model"},
	{"Is a send on a channel synchronized before the corresponding receive completes?", "Channel communication"},
	{"Does sync.Mutex Unlock happen before the next Lock returns?", "Locks"},
	{"How does sync.Once guarantee a function runs only once?", "Once"},
	{"Is the go statement that starts a goroutine synchronized before the goroutine begins?", "Goroutine creation"},
	{"What compiler optimizations are incorrect because they introduce writes or data races?", "Incorrect compilation"},
}

// loadGoDocs indexes go_spec.html and go_mem.html from the Go installation.
func loadGoDocs(t testing.TB, f *fixture, kb knowledge.KnowledgeBase) {
	for _, name := range []string{"go_spec.html", "go_mem.html"} {
		data, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "doc", name))
		if err != nil {
			t.Skipf("no %s in the Go installation: %v", name, err)
		}
		f.upload(t.(*testing.T), kb, name, data)
	}
}

// TestRetrievalQuality: recall@3 of full text alone over the Go specification and memory model
// is at least 0.85 on both engines.
func TestRetrievalQuality(t *testing.T) {
	engines(t, func(t *testing.T, st *store.Store) {
		f := newFixture(t, st)
		kb := f.base(t, "Go")
		loadGoDocs(t, f, kb)
		r := recallAt3(t, f, kb)
		t.Logf("recall@3 full text (%s): %.3f over %d questions", st.Dialect(), r, len(goDocQuestions))
		if r < 0.85 {
			t.Errorf("recall@3 = %.3f, want ≥ 0.85", r)
		}
	})
}

func recallAt3(t *testing.T, f *fixture, kb knowledge.KnowledgeBase) float64 {
	found := 0
	for _, q := range goDocQuestions {
		res, err := f.svc.Search(t.Context(), f.act, kb.ID, knowledge.KnowledgeSearch{Query: q.q, Limit: 3})
		if err != nil {
			t.Fatalf("Search %q: %v", q.q, err)
		}
		ok := false
		var got []string
		for _, c := range res.Data {
			parts := strings.Split(c.Heading, " > ")
			last := parts[len(parts)-1]
			got = append(got, last)
			if strings.EqualFold(last, q.section) {
				ok = true
			}
		}
		if ok {
			found++
		} else {
			t.Logf("miss: %q want %q, got %q", q.q, q.section, got)
		}
	}
	return float64(found) / float64(len(goDocQuestions))
}

// TestRetrievalQualityHybrid reports recall@3 with embeddings on: the fake of `parley fakes`
// (a real HTTP server speaking the OpenAI embeddings API, deterministic vectors) through the
// OpenAI-compatible adapter, fused with full text by reciprocal rank.
func TestRetrievalQualityHybrid(t *testing.T) {
	srv := httptest.NewServer(fakes.OpenAIEmbeddingsFake{})
	defer srv.Close()
	engines(t, func(t *testing.T, st *store.Store) {
		f := newFixture(t, st)
		f.svc.Embedder = &embeddings.Client{BaseURL: srv.URL, APIKey: "fake", Model: "fake-embed"}
		kb := f.base(t, "Go")
		loadGoDocs(t, f, kb)
		res, err := f.svc.Search(t.Context(), f.act, kb.ID, knowledge.KnowledgeSearch{Query: "defer", Limit: 1})
		if err != nil || res.Method != "hybrid" {
			t.Fatalf("search %+v %v", res, err)
		}
		r := recallAt3(t, f, kb)
		t.Logf("recall@3 hybrid, fake embeddings (%s): %.3f over %d questions", st.Dialect(), r, len(goDocQuestions))
		if r < 0.8 {
			t.Errorf("recall@3 hybrid = %.3f", r)
		}
	})
}
