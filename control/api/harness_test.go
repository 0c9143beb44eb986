package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/control/fault"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/parley-voice/parley/control/bus"
	"github.com/parley-voice/parley/control/problem"
	"github.com/parley-voice/parley/control/runtime"
	"github.com/parley-voice/parley/control/secrets"
	"github.com/parley-voice/parley/control/store"
	"github.com/parley-voice/parley/internal/testenv"
)

// The end-to-end suite: real HTTP requests through the /v1 router, on both stores, each
// checked against the OpenAPI document with kin-openapi (see check).

// engine opens fresh, migrated stores of one kind.
type engine struct {
	name string
	open func(t *testing.T) *store.Store
}

// engines returns SQLite (a temporary file) and PostgreSQL (a fresh schema per store), or just
// SQLite with a skip note when PostgreSQL is missing (a failure with PARLEY_REQUIRE_PEERS=1).
// answerTime finds the instants of an answer; group 1 is the fraction.
var answerTime = regexp.MustCompile(`"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d*)?(?:Z|[+-]\d{2}:\d{2})"`)

func engines(t *testing.T) []engine {
	sqlite := engine{"sqlite", func(t *testing.T) *store.Store {
		return migrate(t, store.Options{DataDir: t.TempDir()})
	}}
	out := []engine{sqlite}
	pgOK := false // a skipped subtest still "succeeds": note whether the check got through
	t.Run("postgres available", func(t *testing.T) { testenv.PostgresURL(t); pgOK = true })
	if !pgOK {
		return out
	}
	base := testenv.PostgresURL(t)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	admin.SetMaxOpenConns(2)
	t.Cleanup(func() { admin.Close() })
	return append(out, engine{"postgres", func(t *testing.T) *store.Store {
		b := make([]byte, 6)
		rand.Read(b)
		schema := "api_" + hex.EncodeToString(b)
		if _, err := admin.ExecContext(t.Context(), "CREATE SCHEMA "+schema); err != nil {
			t.Fatalf("create schema: %v", err)
		}
		t.Cleanup(func() {
			if _, err := admin.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
				t.Errorf("drop schema %s: %v", schema, err)
			}
		})
		sep := "?"
		if strings.Contains(base, "?") {
			sep = "&"
		}
		return migrate(t, store.Options{URL: base + sep + "search_path=" + schema, MaxConns: 4})
	}})
}

func migrate(t testing.TB, o store.Options) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

// forEachStore runs fn as parallel subtests, once per engine.
func forEachStore(t *testing.T, fn func(t *testing.T, e engine)) {
	for _, e := range engines(t) {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			fn(t, e)
		})
	}
}

// world is an API with an organization, two projects and keys of every kind.
type world struct {
	t       testing.TB
	st      *store.Store
	bus     bus.Bus
	api     *API
	h       http.Handler
	org     store.Org
	p1, p2  store.Project
	keys    map[string]string // name → secret
	keyIDs  map[string]store.KeyID
	limited bool // rate limits on: every answer must carry the headers
	now     atomic.Pointer[time.Time]

	// With worldOpts.conv: the conversation runtime, its fake providers, dialer and browser
	// calls, and the data directory.
	rt      *runtime.Runtime
	tp      *runtime.TestProviders
	dialer  *fakeDialer
	web     *fakeWebCalls
	dataDir string
}

// worldOpts configure newWorld.
type worldOpts struct {
	bus         bus.Bus
	st          *store.Store
	keyRate     int
	orgRate     int
	org         *store.Org // an existing organization (with st)
	p1, p2      *store.Project
	keys        map[string]string
	keyIDs      map[string]store.KeyID
	skipOpenAPI bool
	logTo       io.Writer
	conv        *convOpts // run conversations (a runtime on the world's store and bus)
}

// Key names of a world.
const (
	kLive     = "live"      // live, every permission, all projects
	kTest     = "test"      // test, every permission, all projects
	kNarrow   = "narrow"    // live, every permission, only p1
	kReadOnly = "read-only" // live, agents:read and numbers:read only
)

func newWorld(t testing.TB, st *store.Store, o worldOpts) *world {
	t.Helper()
	ctx := context.Background()
	b := o.bus
	if b == nil {
		m := bus.NewMemory()
		t.Cleanup(func() { m.Close() })
		b = m
	}
	w := &world{t: t, st: st, bus: b, keys: map[string]string{}, keyIDs: map[string]store.KeyID{}, limited: o.keyRate > 0 || o.orgRate > 0}
	if o.org != nil {
		w.org, w.p1, w.p2, w.keys, w.keyIDs = *o.org, *o.p1, *o.p2, o.keys, o.keyIDs
	} else {
		var err error
		if w.org, err = st.CreateOrg(ctx, "Acme "+randHex(4)); err != nil {
			t.Fatal(err)
		}
		w.p1 = mustV[store.Project](t)(st.CreateProject(ctx, w.org.ID, "One"))
		w.p2 = mustV[store.Project](t)(st.CreateProject(ctx, w.org.ID, "Two"))
		for name, nk := range map[string]store.NewKey{
			kLive:     {Scopes: Scopes, AllProjects: true},
			kTest:     {Test: true, Scopes: Scopes, AllProjects: true},
			kNarrow:   {Scopes: Scopes, ProjectIDs: []store.ProjectID{w.p1.ID}},
			kReadOnly: {Scopes: []string{"agents:read", "numbers:read"}, AllProjects: true},
		} {
			nk.OrgID, nk.Name = w.org.ID, name
			k, secret, err := st.CreateKey(ctx, nk)
			if err != nil {
				t.Fatal(err)
			}
			w.keys[name], w.keyIDs[name] = secret, k.ID
		}
	}
	logOut := o.logTo
	if logOut == nil {
		logOut = io.Discard
	}
	w.api = &API{Store: st, Bus: b, Box: testBox, Log: slog.New(slog.NewTextHandler(logOut, nil)), KeyRatePerMin: o.keyRate, OrgRatePerMin: o.orgRate,
		Outbound: testOutbound, // issue 14: receivers' addresses resolve without the network
		Now: func() time.Time {
			if p := w.now.Load(); p != nil {
				return *p
			}
			return time.Now()
		}}
	if o.conv != nil {
		w.startRuntime(t, *o.conv)
	}
	routes := w.api.Routes()
	mux := http.NewServeMux()
	mux.Handle("/v1/", http.StripPrefix("/v1", routes))
	mux.Handle("/v1", http.StripPrefix("/v1", routes))
	mux.Handle("GET /openapi.v1.json", w.api.OpenAPIHandler())
	var n atomic.Int64
	w.h = http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		id := fmt.Sprintf("req_test_%d", n.Add(1))
		rw.Header().Set("X-Request-Id", id)
		mux.ServeHTTP(rw, r.WithContext(problem.WithRequestID(r.Context(), id)))
	})
	return w
}

// testBox is the master key of the API tests' vault (issue 17).
var testBox, _ = secrets.NewBox(bytes.Repeat([]byte{0x5a}, secrets.KeySize))

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func mustV[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// req is one request to send.
type req struct {
	method, path string
	key          string // a key name of the world, a literal "Bearer …" header, or ""
	body         any    // marshalled to JSON unless it is a string or []byte (sent as is)
	header       map[string]string
}

// resp is an answer.
type resp struct {
	Status int
	Header http.Header
	Body   []byte
	JSON   map[string]any
}

func (r *resp) String() string { return fmt.Sprintf("%d %s", r.Status, r.Body) }

// Code is the problem code of an error answer.
func (r *resp) Code() string { s, _ := r.JSON["code"].(string); return s }

// Str returns a string member at a dotted path.
func (r *resp) Str(path string) string {
	var v any = r.JSON
	for _, p := range strings.Split(path, ".") {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

// do sends a request through the router and checks the exchange against the OpenAPI document.
func (w *world) do(t *testing.T, q req) *resp {
	t.Helper()
	var body []byte
	switch b := q.body.(type) {
	case nil:
	case string:
		body = []byte(b)
	case []byte:
		body = b
	default:
		var err error
		if body, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	hr := httptest.NewRequest(q.method, q.path, bytes.NewReader(body))
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	switch {
	case strings.HasPrefix(q.key, "Bearer ") || strings.HasPrefix(q.key, "Basic "):
		hr.Header.Set("Authorization", q.key)
	case q.key != "":
		secret, ok := w.keys[q.key]
		if !ok {
			t.Fatalf("no key %q", q.key)
		}
		hr.Header.Set("Authorization", "Bearer "+secret)
	}
	for k, v := range q.header {
		if v == "" {
			hr.Header.Del(k)
		} else {
			hr.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	w.h.ServeHTTP(rec, hr)
	r := &resp{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
	if len(r.Body) > 0 && strings.Contains(r.Header.Get("Content-Type"), "json") {
		if err := json.Unmarshal(r.Body, &r.JSON); err != nil {
			t.Fatalf("%s %s: answer is not a JSON object: %v\n%s", q.method, q.path, err, r.Body)
		}
	}
	w.check(t, hr, body, r)
	return r
}

// must sends a request and fails unless the answer has status want.
func (w *world) must(t *testing.T, want int, q req) *resp {
	t.Helper()
	r := w.do(t, q)
	if r.Status != want {
		t.Fatalf("%s %s: %s, want %d", q.method, q.path, r, want)
	}
	return r
}

// fails sends a request and fails unless the answer is a problem with status and code.
func (w *world) fails(t *testing.T, status int, code string, q req) *resp {
	t.Helper()
	r := w.do(t, q)
	if r.Status != status || r.Code() != code {
		t.Fatalf("%s %s: %s, want %d %s", q.method, q.path, r, status, code)
	}
	return r
}

var (
	kinOnce   sync.Once
	kinRouter routers.Router
	kinErr    error
	coverage  sync.Map // "operationId status code" → true
)

// openAPIRouter loads the served document into kin-openapi once.
func openAPIRouter(t *testing.T) routers.Router {
	t.Helper()
	kinOnce.Do(func() {
		openapi3filter.RegisterBodyDecoder("audio/wav", openapi3filter.FileBodyDecoder)
		openapi3filter.RegisterBodyDecoder("text/event-stream", func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
			b, err := io.ReadAll(body)
			return string(b), err
		})
		raw, err := OpenAPIDocument("")
		if err != nil {
			kinErr = err
			return
		}
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(raw)
		if err != nil {
			kinErr = fmt.Errorf("load: %w", err)
			return
		}
		if err := doc.Validate(loader.Context); err != nil {
			kinErr = fmt.Errorf("the document is not valid OpenAPI: %w", err)
			return
		}
		kinRouter, kinErr = legacy.NewRouter(doc)
	})
	if kinErr != nil {
		t.Fatal(kinErr)
	}
	return kinRouter
}

// check validates one exchange: the answer always fits the document; a request the document
// refuses must be answered 4xx; a problem's code is catalogued with its status and listed for
// the operation; rate-limit headers are present when limits are on.
func (w *world) check(t *testing.T, hr *http.Request, body []byte, r *resp) {
	t.Helper()
	if w.limited && r.Header.Get("RateLimit-Limit") == "" && strings.HasPrefix(hr.URL.Path, "/v1") {
		t.Errorf("%s %s: answer %d without RateLimit-Limit", hr.Method, hr.URL.Path, r.Status)
	}
	if hr.URL.Path == "/openapi.v1.json" {
		return
	}
	if r.Status >= 400 {
		c, ok := fault.Codes[r.Code()]
		if !ok || c.Status != r.Status || r.Header.Get("Content-Type") != "application/problem+json" || r.Str("request_id") == "" {
			t.Errorf("%s %s: problem %s: code not catalogued with this status, or not a problem document", hr.Method, hr.URL.Path, r)
		}
	}
	router := openAPIRouter(t)
	vr := hr.Clone(context.Background())
	vr.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := router.FindRoute(vr)
	if err != nil {
		if r.Status != http.StatusNotFound && r.Status != http.StatusMethodNotAllowed && r.Status != http.StatusUnauthorized && r.Status != http.StatusTooManyRequests {
			t.Errorf("%s %s: not in the document (%v) but answered %d", hr.Method, hr.URL.Path, err, r.Status)
		}
		return
	}
	opID := route.Operation.OperationID
	status := fmt.Sprint(r.Status)
	coverage.Store(opID+" "+status+" "+r.Code(), true)
	if r.Status >= 400 {
		var op *operation
		for _, o := range operations() {
			if o.ID == opID {
				op = o
			}
		}
		if op != nil && !slices.Contains(op.codes(), r.Code()) {
			t.Errorf("%s answered code %s, which its document entry does not list", opID, r.Code())
		}
	}
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true, SkipSettingDefaults: true}}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	if reqErr != nil && (r.Status < 400 || r.Status >= 500) {
		t.Errorf("%s %s: the document refuses the request (%v) but it was answered %d", hr.Method, hr.URL.Path, reqErr, r.Status)
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/") {
		for _, m := range answerTime.FindAllSubmatch(r.Body, -1) {
			if len(m[1]) != 7 { // a dot and six digits
				t.Errorf("%s %s: instant %s has %d fractional digits, want 6 everywhere", hr.Method, hr.URL.Path, m[0], max(len(m[1])-1, 0))
			}
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: r.Status, Header: r.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	out.SetBodyBytes(r.Body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		var me openapi3.MultiError
		if errors.As(err, &me) && len(me) == 0 {
			return
		}
		t.Errorf("%s %s: the answer does not fit the document: %v\nanswer: %s", hr.Method, hr.URL.Path, err, r)
	}
}
